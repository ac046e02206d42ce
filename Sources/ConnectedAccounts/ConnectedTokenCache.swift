import Synchronization

/// The opened tokens of connected accounts this instance sent lately, by person and connection:
/// a request that finds its token here goes upstream without a store read.
///
/// An entry lives a minute at most (and never past its token's expiry), so a change made on
/// another instance (a disconnect, a refresh) is seen within that minute even before the feed
/// tells this one; `forget` drops entries at once.
public final class ConnectedTokenCache: Sendable {
    struct Entry {
        let token: String
        let until: Double
    }

    /// How long an entry is kept.
    public static let lifetime: Double = 60
    /// The entries kept at most; past it the table is emptied (a busy gateway reads again, no more).
    public static let capacity = 100_000
    private let state = Mutex<(entries: [ConnectionTokenVault.Owner: Entry], generation: UInt64)>(([:], 0))

    public init() {}

    /// How many forgets there have been: a reader notes it before reading the store and keeps what it
    /// read only if no forget came meanwhile (a disconnect applied during the read is not undone).
    public var generation: UInt64 { state.withLock { $0.generation } }

    /// The token of `owner`, when kept and still good at `now`.
    public func token(for owner: ConnectionTokenVault.Owner, now: Double) -> String? {
        state.withLock { state in
            guard let entry = state.entries[owner] else { return nil }
            guard entry.until > now else {
                state.entries[owner] = nil
                return nil
            }
            return entry.token
        }
    }

    /// Keeps `token` for `owner` until a minute from `now`, or until it is due for refresh if sooner
    /// (`ConnectedAccountService.refreshMargin` before it expires: the next request reads and refreshes).
    /// Kept only while the generation is still `seen` (the one noted before the read).
    public func keep(_ token: String, for owner: ConnectionTokenVault.Owner, expiresAt: Double?, now: Double, seen: UInt64) {
        let until = min(now + Self.lifetime, (expiresAt ?? .infinity) - ConnectedAccountService.refreshMargin)
        guard until > now else { return }
        state.withLock { state in
            guard state.generation == seen else { return }
            if state.entries.count >= Self.capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[owner] = Entry(token: token, until: until)
        }
    }

    /// Drops the person's entries (every connection of theirs with `connection` nil).
    public func forget(userID: String, tenantID: String, connection: String? = nil) {
        state.withLock { state in
            state.generation &+= 1
            if let connection {
                state.entries[ConnectionTokenVault.Owner(userID: userID, tenantID: tenantID, connection: connection)] = nil
            } else {
                state.entries = state.entries.filter { owner, _ in !(owner.userID == userID && owner.tenantID == tenantID) }
            }
        }
    }
}
