import JOSE
import Resilience
import RuntimeAPI
import Synchronization

/// Which user owns a live session, as the Runtime last said, so that a proxied
/// request naming `X-Session-Id` needs no Runtime round trip.
///
/// Only owned sessions are remembered, each until its `expires_at`. A change
/// that ends access reaches the view within a second: this gateway's logout
/// forgets at once; `AccessChangeWatcher` asks the Runtime twice a second
/// which remembered sessions have ended (another gateway's logout, a
/// revocation, a disabled account) and forgets those. If that check has not
/// succeeded for `maximumStaleness` seconds, the view answers nothing and
/// every lookup goes to the Runtime. (An upgrade turns an anonymous session
/// into an owned one; anonymous sessions are never remembered, so it needs
/// nothing.)
public final class SessionOwnershipView: Sendable {
    struct Owner: Equatable {
        let userID: String
        let tenantID: String
        let expiresAt: Double
    }

    let clock: any TokenClock
    let maximumStaleness: Double
    private let state: Mutex<(owners: BoundedDictionary<String, Owner>, validatedAt: Double)>

    /// - Parameter capacity: sessions remembered at most; beyond it the oldest remembered is forgotten (it is then asked of the Runtime).
    public init(clock: any TokenClock, capacity: Int = 100_000, maximumStaleness: Double = 2) {
        self.clock = clock
        self.maximumStaleness = maximumStaleness
        state = Mutex((BoundedDictionary(capacity: capacity), -.infinity))
    }

    /// `true` owned by that user and tenant, `false` owned by someone else, `nil` unknown (ask the Runtime).
    public func isOwned(_ sessionID: String, by userID: String, tenantID: String) -> Bool? {
        lastKnownOwnership(sessionID, by: userID, tenantID: tenantID, within: maximumStaleness)
    }

    /// `isOwned` from a view checked up to `staleness` seconds ago: for when the Runtime cannot be
    /// asked at all (its outage), so that no session can have ended through it since the check.
    /// A session past its `expires_at` is never answered.
    public func lastKnownOwnership(_ sessionID: String, by userID: String, tenantID: String, within staleness: Double) -> Bool? {
        let now = clock.now()
        return state.withLock { state -> Bool? in
            guard now - state.validatedAt <= staleness, let owner = state.owners[sessionID], owner.expiresAt > now else { return nil }
            return owner.userID == userID && owner.tenantID == tenantID
        }
    }

    /// Remembers an owned session the Runtime just returned (anonymous ones are ignored).
    public func remember(_ session: SessionView) {
        guard session.state == .authenticated, let userID = session.userID, let tenantID = session.tenantID else { return }
        let now = clock.now()
        guard session.expiresAt > now else { return }
        state.withLock { _ = $0.owners.insert(Owner(userID: userID, tenantID: tenantID, expiresAt: session.expiresAt), for: session.sessionID) }
    }

    /// Forgets sessions that ended.
    public func forget<S: Sequence>(_ sessionIDs: S) where S.Element == String {
        state.withLock { state in
            for id in sessionIDs { state.owners.removeValue(forKey: id) }
        }
    }

    /// The remembered sessions (for the ended-session check), dropping expired ones.
    package var sessionIDs: [String] {
        let now = clock.now()
        return state.withLock { state in
            state.owners.removeAll { $0.expiresAt <= now }
            return state.owners.keys
        }
    }

    /// Records a successful ended-session check made at `checkedAt` (the view is trustworthy until `maximumStaleness` after it).
    package func validated(at checkedAt: Double) {
        state.withLock { $0.validatedAt = max($0.validatedAt, checkedAt) }
    }
}
