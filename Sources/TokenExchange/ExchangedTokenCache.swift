import DataPlane
import Synchronization

/// The tokens exchanged for people lately, by person and exchange target: a request that finds
/// its token here goes upstream without asking the provider.
///
/// Never shared between people: the key is the person (user and tenant) and the target. Each
/// entry remembers the gateway session whose provider token was exchanged, so the end of that
/// session (a logout, a provider's refusal at re-check) drops it; so does the end of the person's
/// access (`forget(userID:tenantID:)`).
public final class ExchangedTokenCache: Sendable {
    /// Whose token for what.
    public struct Key: Hashable, Sendable {
        public let userID: String
        public let tenantID: String
        public let target: ExchangeTarget

        public init(userID: String, tenantID: String, target: ExchangeTarget) {
            self.userID = userID
            self.tenantID = tenantID
            self.target = target
        }
    }

    struct Entry {
        let token: String
        /// From then on a request still gets it, and starts its renewal off the request path.
        let renewAt: Double
        /// Not sent at or after this (30 s before it expires).
        let until: Double
        let sessionID: String
    }

    /// What a lookup found.
    public enum Lookup: Equatable {
        case fresh(String)
        /// Good to send, and due for renewal: the caller renews it in the background.
        case renewing(String)
        case missing
    }

    /// A token is never sent with less than this left.
    public static let sendMargin: Double = 30
    /// The entries kept at most; past it the table is emptied (a busy gateway exchanges again, no more).
    public static let capacity = 100_000
    private let state = Mutex<(entries: [Key: Entry], generation: UInt64)>(([:], 0))

    public init() {}

    /// How many forgets there have been: an exchange notes it before it starts and keeps its token
    /// only if no forget came meanwhile (a logout applied during the exchange is not undone).
    public var generation: UInt64 { state.withLock { $0.generation } }

    public func lookup(_ key: Key, now: Double) -> Lookup {
        state.withLock { state in
            guard let entry = state.entries[key] else { return .missing }
            guard entry.until > now else {
                state.entries[key] = nil
                return .missing
            }
            return entry.renewAt > now ? .fresh(entry.token) : .renewing(entry.token)
        }
    }

    /// Keeps `token`, exchanged with `sessionID`'s provider token, for `key` until 30 s before it
    /// expires; its renewal is due a fifth of its life (at least a minute) before it expires, not in the
    /// first half of its sending time. Kept only
    /// while the generation is still `seen`, the one noted before the exchange.
    public func keep(_ token: String, for key: Key, sessionID: String, expiresAt: Double, now: Double, seen: UInt64) {
        let until = expiresAt - Self.sendMargin
        guard until > now else { return }
        // Renewal is due a fifth of its life (at least a minute) before it expires, but never in the first
        // half of the time it may be sent: a short-lived token is not renewed by every request.
        let renewAt = max(now + (until - now) / 2, expiresAt - max(60, (expiresAt - now) / 5))
        state.withLock { state in
            guard state.generation == seen else { return }
            if state.entries.count >= Self.capacity, state.entries[key] == nil { state.entries.removeAll(keepingCapacity: true) }
            state.entries[key] = Entry(token: token, renewAt: min(renewAt, until), until: until, sessionID: sessionID)
        }
    }

    /// Drops the person's entries: their access ended.
    public func forget(userID: String, tenantID: String) {
        state.withLock { state in
            state.generation &+= 1
            state.entries = state.entries.filter { key, _ in !(key.userID == userID && key.tenantID == tenantID) }
        }
    }

    /// Drops the entries exchanged from these sessions' provider tokens: the sessions ended.
    public func forget(sessionIDs: [String]) {
        let ended = Set(sessionIDs)
        state.withLock { state in
            state.generation &+= 1
            state.entries = state.entries.filter { _, entry in !ended.contains(entry.sessionID) }
        }
    }

    /// How many entries there are (for the tests and the bench).
    public var count: Int { state.withLock { $0.entries.count } }
}
