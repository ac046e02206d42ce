/// One row of `users`. The password hash is a self-describing string; never the password.
public struct UserRecord: Sendable, Equatable {
    public var id: String
    public var tenantID: String
    public var username: String
    public var passwordHash: String
    public var disabled: Bool
    public var createdAt: Double
    /// Access tokens issued to the account before this instant are refused (set when it is disabled); 0: none.
    public var tokensNotBefore: Double
    /// The groups the operator put the account in (`users groups`), sorted: its tokens carry them as
    /// `groups`, as a provider's sign-in carries the provider's.
    public var groups: [String]

    public init(
        id: String, tenantID: String, username: String, passwordHash: String, disabled: Bool = false, createdAt: Double, tokensNotBefore: Double = 0,
        groups: [String] = []
    ) {
        self.id = id
        self.tenantID = tenantID
        self.username = username
        self.passwordHash = passwordHash
        self.disabled = disabled
        self.createdAt = createdAt
        self.tokensNotBefore = tokensNotBefore
        self.groups = groups
    }

    /// The stored form of `groups`: joined by `,` (a group name has none).
    public static func storedGroups(_ groups: [String]) -> String { groups.joined(separator: ",") }

    /// `groups` read back from its stored form.
    public static func groups(stored: String) -> [String] { stored.split(separator: ",").map(String.init) }
}

/// An account's not-before: tokens issued to `userID` in `tenantID` before `notBefore` are refused.
public struct AccountCutoff: Sendable, Equatable {
    public var userID: String
    public var tenantID: String
    public var notBefore: Double
    /// Why the account's tokens were cut off: what its closed sockets are told.
    public var cause: Cause

    /// What cut an account's tokens off.
    public enum Cause: String, Sendable, Equatable, CaseIterable {
        /// `users disable` (or the admin API's disable).
        case disabled = "account disabled"
        /// `users delete`.
        case deleted = "account deleted"
        /// `users passwd`: the account is signed out everywhere, and stays enabled.
        case passwordChanged = "password changed"
        /// `users enable` of a provider's user: tokens issued while they were disabled (a provider's
        /// own, presented as Bearer) stay refused, and new ones pass again.
        case enabled = "account enabled"
        /// `users groups --remove`: tokens and agents' refresh tokens carry the groups they were
        /// issued with, so a group taken away signs the account out everywhere (it stays enabled, its grants too).
        case groupsChanged = "groups changed"

        /// Whether the user is refused whatever their tokens' age until enabled (a provider's user
        /// disabled or deleted: the provider may go on issuing them tokens).
        public var refusesEveryToken: Bool { self == .disabled || self == .deleted }

        /// Whether the person's consents stay (they are signed out, not cut off): a new password, groups taken away.
        public var keepsGrants: Bool { self == .passwordChanged || self == .groupsChanged }

        /// The close reason its sockets get (1008).
        public var closeReason: String { rawValue }

        /// Its kind in the access-change feed (`account_cut_off`, the first kind, is a disabled account's).
        var feedKind: String {
            switch self {
            case .disabled: "account_cut_off"
            case .deleted: "account_deleted"
            case .passwordChanged: "account_password_changed"
            case .enabled: "account_enabled"
            case .groupsChanged: "account_groups_changed"
            }
        }
    }

    public init(userID: String, tenantID: String, notBefore: Double, cause: Cause) {
        self.userID = userID
        self.tenantID = tenantID
        self.notBefore = notBefore
        self.cause = cause
    }

    /// The cause an account row shows: a tombstone's username is `deleted:...`; otherwise
    /// disabled, or (enabled) its password changed.
    public static func cause(username: String, disabled: Bool) -> Cause {
        // A provider user's row reads `enabled:...` once enabled again (provider_users has no password);
        // an account whose last cut-off took groups away reads `groups:...` (its `cutoff_cause`).
        if username.hasPrefix("enabled:") { return .enabled }
        if username.hasPrefix("deleted:") { return .deleted }
        if disabled { return .disabled }
        return username.hasPrefix("groups:") ? .groupsChanged : .passwordChanged
    }
}

/// Accounts. A username is unique within its tenant.
public protocol UserRepository: Sendable {
    /// Stores a new account; `StateSurfaceError.conflict` if the tenant already has that username.
    func insertUser(_ user: UserRecord) async throws
    func user(tenantID: String, username: String) async throws -> UserRecord?
    /// All accounts, by tenant then username.
    func users() async throws -> [UserRecord]
    /// The account with this id.
    func user(id: String, tenantID: String) async throws -> UserRecord?
    /// In one transaction: sets the disabled flag, sets the account's not-before
    /// to `now` (every access token issued before is refused) and revokes every
    /// refresh token of the account. The account as it now is; `nil` if there is none.
    func disableUser(tenantID: String, username: String, now: Double) async throws -> UserRecord?
    /// In one transaction: replaces the password hash and cuts the account off as `disableUser`
    /// does (not-before, refresh tokens, the access-change feed) without disabling it: a new
    /// password signs the account out everywhere. `nil` if there is no such account.
    func setUserPassword(tenantID: String, username: String, passwordHash: String, now: Double) async throws -> UserRecord?
    /// In one transaction: cuts the account off as `disableUser` does, and frees its username. The
    /// row stays as a tombstone (disabled, no password, named `deleted:` + its id, which no
    /// username can be) so that its not-before keeps refusing its tokens after a restart; `users()`
    /// leaves tombstones out. The account as it was; `nil` if there is none.
    func deleteUser(tenantID: String, username: String, now: Double) async throws -> UserRecord?
    /// Sets the account's groups. With `cuttingOff` (a group taken away), in one transaction with a
    /// cut-off as `setUserPassword` makes (cause `groupsChanged`); otherwise only the groups change,
    /// and tokens issued from now carry them. `nil` if there is no such account.
    func setUserGroups(tenantID: String, username: String, groups: [String], cuttingOff: Bool, now: Double) async throws -> UserRecord?
    /// Clears the disabled flag (the not-before stays: old tokens stay dead); `nil` if there is no such account.
    func enableUser(tenantID: String, username: String) async throws -> UserRecord?
    /// Accounts whose not-before is at or after `since`.
    func accountCutoffs(since: Double) async throws -> [AccountCutoff]
}
