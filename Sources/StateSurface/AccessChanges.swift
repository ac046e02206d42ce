/// A change that ends access somewhere, published to every instance.
///
/// Each is written in the same transaction as the change itself (the revoked
/// token id, the account's not-before, the revoked session), numbered by the
/// store, so an instance that reads "after version N" sees every change once,
/// in order, whichever instance made it.
public enum AccessChange: Sendable, Equatable {
    /// An access token was revoked (logout): refuse it until it expires.
    case tokenRevoked(jti: String, expiresAt: Double)
    /// An account's tokens issued before `notBefore` are refused (it was disabled).
    case accountCutOff(AccountCutoff)
    /// A session was revoked (logout, revocation, disabled account): close its sockets.
    case sessionEnded(sessionID: String)
    /// The shared key ring changed (`portcullis keys`): reload it now, not at the next poll.
    case keyRingChanged
    /// An operator revoked a grant or removed a client: every instance logs it.
    case administrativeAction(AdministrativeAction)
    /// A person's connected account was disconnected: the token kept of it is no longer sent, and
    /// the requests under way that carry it end.
    case connectionEnded(userID: String, tenantID: String, connection: String)
    /// A person connected an account again (perhaps as another account at the service): the token
    /// kept of the one before is no longer sent (requests under way finish as they were admitted).
    case connectionReplaced(userID: String, tenantID: String, connection: String)
    /// A person completed a URL elicitation (connected its service): its client is told on its open streams.
    case elicitationCompleted(ElicitationCompletion)
    /// A kind a newer version wrote, which this one does not know: read past (its version counts),
    /// never applied. The periodic sync still applies what the store's rows say.
    case unknown(kind: String)
}

/// An `AccessChange` with its place in the store's order.
public struct VersionedAccessChange: Sendable, Equatable {
    public var version: Int64
    public var change: AccessChange

    public init(version: Int64, change: AccessChange) {
        self.version = version
        self.change = change
    }
}

/// The changes that end access, in order, and a signal when there are new ones.
public protocol AccessChangeFeed: Sendable {
    /// The newest change's version (0 when there is none).
    func latestAccessChangeVersion() async throws -> Int64
    /// Changes after `version`, oldest first, at most `limit`.
    func accessChanges(after version: Int64, limit: Int) async throws -> [VersionedAccessChange]
    /// Records a change that has no row of its own (`keyRingChanged`, `administrativeAction`), and signals it.
    func recordAccessChange(_ change: AccessChange, now: Double) async throws
    /// Wakes when another process committed changes (PostgreSQL's LISTEN/NOTIFY), and once
    /// after every reconnection so the reader catches up; `nil` where the store cannot
    /// signal (SQLite: read the feed on a timer instead).
    func accessChangeSignals() -> AsyncStream<Void>?
}

extension AccessChange {
    /// The stored form: kind, subject, tenant, a time (expiry or not-before).
    var row: (kind: String, subject: String, tenantID: String?, until: Double?) {
        switch self {
        case .tokenRevoked(let jti, let expiresAt): ("token_revoked", jti, nil, expiresAt)
        case .accountCutOff(let cutoff): (cutoff.cause.feedKind, cutoff.userID, cutoff.tenantID, cutoff.notBefore)
        case .sessionEnded(let sessionID): ("session_ended", sessionID, nil, nil)
        case .keyRingChanged: ("key_ring_changed", "", nil, nil)
        case .administrativeAction(let action): (action.kind.feedKind, action.subject, action.tenantID, nil)
        // The connection's name (lower-case letters, digits and -) cannot hold the `/` that separates it.
        case .connectionEnded(let userID, let tenantID, let connection): ("connection_ended", connection + "/" + userID, tenantID, nil)
        case .connectionReplaced(let userID, let tenantID, let connection): ("connection_replaced", connection + "/" + userID, tenantID, nil)
        // The id (base64url), the connection's name and the user id (`usr_`/`ext_` and base64url) hold
        // no `/`; the client id, which may (a metadata document's URL), comes last.
        case .elicitationCompleted(let done):
            ("elicitation_completed", done.id + "/" + done.connection + "/" + done.userID + "/" + done.clientID, done.tenantID, nil)
        case .unknown(let kind): (kind, "", nil, nil)
        }
    }

    /// Reads the stored form back; `unknown` for a kind this version does not know (a newer writer's).
    init(kind: String, subject: String, tenantID: String?, until: Double?) {
        switch kind {
        case "token_revoked": self = .tokenRevoked(jti: subject, expiresAt: until ?? 0)
        case "session_ended": self = .sessionEnded(sessionID: subject)
        case "key_ring_changed": self = .keyRingChanged
        case "elicitation_completed":
            let parts = subject.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 4 else {
                self = .unknown(kind: kind)
                return
            }
            self = .elicitationCompleted(
                ElicitationCompletion(id: parts[0], connection: parts[1], userID: parts[2], tenantID: tenantID ?? "", clientID: parts[3]))
        case "connection_ended", "connection_replaced":
            let parts = subject.split(separator: "/", maxSplits: 1)
            guard parts.count == 2 else {
                self = .unknown(kind: kind)
                return
            }
            let (connection, userID, tenantID) = (String(parts[0]), String(parts[1]), tenantID ?? "")
            self =
                kind == "connection_ended"
                ? .connectionEnded(userID: userID, tenantID: tenantID, connection: connection)
                : .connectionReplaced(userID: userID, tenantID: tenantID, connection: connection)
        default:
            if let cause = AccountCutoff.Cause.allCases.first(where: { $0.feedKind == kind }) {
                self = .accountCutOff(AccountCutoff(userID: subject, tenantID: tenantID ?? "", notBefore: until ?? 0, cause: cause))
            } else if let action = AdministrativeAction(kind: kind, subject: subject, tenantID: tenantID) {
                self = .administrativeAction(action)
            } else {
                self = .unknown(kind: kind)
            }
        }
    }
}
