import Resilience
import Synchronization

/// Remembers access tokens that passed the signature and claim checks, for
/// at most `maximumAge` seconds and never past their `exp`, so that a client
/// sending the same token again does not cost another public-key operation.
///
/// Keyed by the whole token, so a token that differs in any byte is verified
/// afresh. Revocation is not cached here: it is checked on every use.
/// Bounded: beyond `capacity` entries, the oldest goes (`BoundedDictionary`).
public final class VerifiedTokenCache: Sendable {
    public let maximumAge: Double
    private let entries: Mutex<BoundedDictionary<String, (caller: AuthenticatedCaller, validUntil: Double)>>

    public init(capacity: Int = 10_000, maximumAge: Double = 30) {
        self.maximumAge = maximumAge
        entries = Mutex(BoundedDictionary(capacity: capacity))
    }

    func caller(for token: String, now: Double) -> AuthenticatedCaller? {
        entries.withLock { entries in
            guard let entry = entries[token] else { return nil }
            if entry.validUntil > now { return entry.caller }
            entries.removeValue(forKey: token)
            return nil
        }
    }

    /// Forgets every token (a reload changed whose tokens count, or how they are read).
    public func removeAll() {
        entries.withLock { $0.removeAll { _ in true } }
    }

    func insert(_ caller: AuthenticatedCaller, for token: String, now: Double) {
        let validUntil = min(caller.expiresAt, now + maximumAge)
        guard validUntil > now else { return }
        entries.withLock {
            // Expired entries go as new ones come: the cache holds the live tokens, not `capacity` old ones.
            $0.removeOldest { $0.validUntil <= now }
            $0.insert((caller, validUntil), for: token)
        }
    }
}
