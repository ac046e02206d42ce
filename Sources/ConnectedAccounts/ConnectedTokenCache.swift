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
    private let entries = Mutex<[ConnectionTokenVault.Owner: Entry]>([:])

    public init() {}

    /// The token of `owner`, when kept and still good at `now`.
    public func token(for owner: ConnectionTokenVault.Owner, now: Double) -> String? {
        entries.withLock { table in
            guard let entry = table[owner] else { return nil }
            guard entry.until > now else {
                table[owner] = nil
                return nil
            }
            return entry.token
        }
    }

    /// Keeps `token` for `owner` until a minute from `now`, or until it is due for refresh if sooner
    /// (`ConnectedAccountService.refreshMargin` before it expires: the next request reads and refreshes).
    public func keep(_ token: String, for owner: ConnectionTokenVault.Owner, expiresAt: Double?, now: Double) {
        let until = min(now + Self.lifetime, (expiresAt ?? .infinity) - ConnectedAccountService.refreshMargin)
        guard until > now else { return }
        entries.withLock { table in
            if table.count >= Self.capacity { table.removeAll(keepingCapacity: true) }
            table[owner] = Entry(token: token, until: until)
        }
    }

    /// Drops the person's entries (every connection of theirs with `connection` nil).
    public func forget(userID: String, tenantID: String, connection: String? = nil) {
        entries.withLock { table in
            table = table.filter { owner, _ in !(owner.userID == userID && owner.tenantID == tenantID && (connection == nil || owner.connection == connection)) }
        }
    }
}
