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

    /// A forget, remembered for the exchanges under way when it came.
    struct Forget {
        let generation: UInt64
        /// The person (user id, tenant id) whose entries went, or nil.
        let person: (String, String)?
        let sessionIDs: Set<String>
    }

    struct State {
        var entries: [Key: Entry] = [:]
        var generation: UInt64 = 0
        /// The latest forgets, oldest first (at most `forgetsKept`).
        var forgets: [Forget] = []
    }

    /// A token is never sent with less than this left.
    public static let sendMargin: Double = 30
    /// The entries kept at most; past it the table is emptied (a busy gateway exchanges again, no more).
    public static let capacity = 100_000
    /// The forgets remembered: an exchange that began before more than this many is not kept.
    static let forgetsKept = 1_024
    private let state = Mutex(State())

    public init() {}

    /// How many forgets there have been: an exchange notes it before it starts and keeps its token
    /// only if no forget of its person or of its session came meanwhile (a logout applied during the
    /// exchange is not undone; another person's leaves it be).
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
    /// first half of its sending time. Not kept when a forget since `seen` (the generation noted
    /// before the exchange) named its person or its session.
    public func keep(_ token: String, for key: Key, sessionID: String, expiresAt: Double, now: Double, seen: UInt64) {
        let until = expiresAt - Self.sendMargin
        guard until > now else { return }
        // Renewal is due a fifth of its life (at least a minute) before it expires, but never in the first
        // half of the time it may be sent: a short-lived token is not renewed by every request.
        let renewAt = max(now + (until - now) / 2, expiresAt - max(60, (expiresAt - now) / 5))
        state.withLock { state in
            guard !Self.forgotten(key, sessionID: sessionID, since: seen, in: state) else { return }
            if state.entries.count >= Self.capacity, state.entries[key] == nil { state.entries.removeAll(keepingCapacity: true) }
            state.entries[key] = Entry(token: token, renewAt: min(renewAt, until), until: until, sessionID: sessionID)
        }
    }

    /// Drops the person's entries: their access ended.
    public func forget(userID: String, tenantID: String) {
        state.withLock { state in
            Self.note(Forget(generation: state.generation &+ 1, person: (userID, tenantID), sessionIDs: []), in: &state)
            state.entries = state.entries.filter { key, _ in !(key.userID == userID && key.tenantID == tenantID) }
        }
    }

    /// Drops the entries exchanged from these sessions' provider tokens: the sessions ended.
    public func forget(sessionIDs: [String]) {
        let ended = Set(sessionIDs)
        state.withLock { state in
            Self.note(Forget(generation: state.generation &+ 1, person: nil, sessionIDs: ended), in: &state)
            state.entries = state.entries.filter { _, entry in !ended.contains(entry.sessionID) }
        }
    }

    private static func note(_ forget: Forget, in state: inout State) {
        state.generation = forget.generation
        if state.forgets.count >= forgetsKept { state.forgets.removeFirst(state.forgets.count - forgetsKept + 1) }
        state.forgets.append(forget)
    }

    /// Whether a forget after `seen` named `key`'s person or `sessionID` (or too many came to tell).
    private static func forgotten(_ key: Key, sessionID: String, since seen: UInt64, in state: State) -> Bool {
        guard state.generation != seen else { return false }
        guard let oldest = state.forgets.first, oldest.generation <= seen &+ 1 else { return true }
        return state.forgets.contains { forget in
            forget.generation > seen
                && (forget.sessionIDs.contains(sessionID) || forget.person.map { $0 == (key.userID, key.tenantID) } == true)
        }
    }

    /// How many entries there are (for the tests and the bench).
    public var count: Int { state.withLock { $0.entries.count } }
}
