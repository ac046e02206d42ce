import JOSE
import Resilience
import RuntimeAPI
import Synchronization

/// Gateway assertions signed once per (caller, session, audience) and reused
/// for at most half their life.
///
/// An assertion lives 60 s; signing one (an ES256 signature by default) costs
/// more than everything else on a cached request's path. Reusing it for up to
/// 30 s leaves every upstream at least 30 s of validity to check it in, and a
/// caller's identity, session and audience are all part of the key, so a
/// reused assertion never says anything the gateway did not verify for this
/// request. Bounded: beyond `capacity` entries, the oldest goes (`BoundedDictionary`).
public final class AssertionCache: Sendable {
    struct Key: Hashable {
        let userID: String?
        let tenantID: String?
        let sessionID: String?
        let audience: String
        let clientID: String?
    }

    let signer: GatewayAssertionSigner
    /// How long one assertion is reused: half its lifetime.
    let reuseFor: Double
    private let entries: Mutex<BoundedDictionary<Key, (assertion: String, signedAt: Double)>>

    public init(signer: GatewayAssertionSigner, capacity: Int = 10_000) {
        self.signer = signer
        entries = Mutex(BoundedDictionary(capacity: capacity))
        self.reuseFor = signer.lifetime / 2
    }

    /// An assertion for `caller` to `audience`: a recent one, or a fresh signature.
    public func assertion(audience: String, caller: RuntimeCaller) throws -> String {
        let key = Key(userID: caller.userID, tenantID: caller.tenantID, sessionID: caller.sessionID, audience: audience, clientID: caller.clientID)
        let now = signer.clock.now()
        if let cached = entries.withLock({ $0[key] }), now - cached.signedAt < reuseFor, now >= cached.signedAt {
            return cached.assertion
        }
        let assertion = try signer.assertion(audience: audience, caller: caller)
        // iat is whole seconds: reuse counts from the claim's second, never longer.
        // The assertion evicted for room is let go after the lock.
        let evicted = entries.withLock {
            // Assertions past their reuse go as new ones come: the cache holds what may still be reused.
            $0.removeOldest { now - $0.signedAt >= reuseFor }
            return $0.insert((assertion, now.rounded(.down)), for: key)
        }
        _ = evicted
        return assertion
    }
}
