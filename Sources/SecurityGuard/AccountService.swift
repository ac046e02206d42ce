import JOSE
import StateSurface

/// Why an account operation was refused.
public struct AccountError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: String
    public let message: String

    public init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// Accounts: create, list, disable, and the password check login uses.
public struct AccountService: Sendable {
    public let users: any UserRepository
    public let hasher: PasswordHasher
    public let clock: any TokenClock

    /// Usernames and tenants: 1-64 characters of letters, digits and `. _ @ + -`.
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || [UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "@"), UInt8(ascii: "+"), UInt8(ascii: "-")].contains(byte)
            }
    }

    /// Group names: 1-64 characters of letters, digits and `. _ @ + - : /` (no `,`, which the
    /// identity headers join groups with, and no space, which a rule's `contains` would split on).
    public static func isValidGroup(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || Array("._@+-:/".utf8).contains(byte)
            }
    }

    public static let minimumPasswordLength = 8

    public init(users: any UserRepository, hasher: PasswordHasher = PasswordHasher(), clock: any TokenClock = SystemClock()) {
        self.users = users
        self.hasher = hasher
        self.clock = clock
    }

    /// Creates an account with a fresh scrypt hash of `password`.
    public func addUser(username: String, tenantID: String, password: String, groups: [String] = []) async throws -> UserRecord {
        guard Self.isValidName(username) else {
            throw AccountError("invalid_request", "a username is 1-64 characters of letters, digits and . _ @ + -")
        }
        guard Self.isValidName(tenantID) else {
            throw AccountError("invalid_request", "a tenant is 1-64 characters of letters, digits and . _ @ + -")
        }
        let groups = try Self.checkedGroups(groups)
        guard password.count >= Self.minimumPasswordLength else {
            throw AccountError("invalid_request", "a password needs at least \(Self.minimumPasswordLength) characters")
        }
        let user = UserRecord(
            id: "usr_" + (try SecureRandom.identifier(bytes: 12)), tenantID: tenantID, username: username,
            passwordHash: try await hasher.hash(password).description, createdAt: clock.now(), groups: groups)
        do {
            try await users.insertUser(user)
        } catch let error as StateSurfaceError where error.code == .conflict {
            throw AccountError("conflict", error.message)
        }
        return user
    }

    /// The account if `password` is right and the account is enabled; `nil` otherwise.
    ///
    /// Unknown user, wrong password and disabled account cost the same scrypt
    /// work and give the same answer, so neither timing nor the reply tells
    /// them apart.
    public func authenticate(username: String, tenantID: String, password: String) async throws -> UserRecord? {
        guard let user = try await users.user(tenantID: tenantID, username: username), let stored = PasswordHash(user.passwordHash) else {
            try await hasher.verifyAgainstDummy(password)
            return nil
        }
        let matches = try await hasher.verify(password, against: stored)
        return matches && !user.disabled ? user : nil
    }

    /// Disables an account: it can no longer log in or refresh, its refresh
    /// tokens are revoked, and every access token issued to it until now is
    /// refused (its not-before). Ending its sessions is the Runtime's part
    /// (`SessionService.revokeAll`). `nil` if there is no such account.
    public func disable(username: String, tenantID: String) async throws -> UserRecord? {
        guard Self.isValidName(username) else { return nil }
        return try await users.disableUser(tenantID: tenantID, username: username, now: clock.now())
    }

    /// Adds and removes groups of an account (a name in both is removed). Taking a group away cuts
    /// the account's tokens and refresh tokens off, since they carry the group (the caller ends its
    /// sessions with `SessionService.revokeAll`, as `users groups` does); adding one changes tokens
    /// issued from now (the next login, refresh or sign-in). `nil` if there is no such account.
    public func setGroups(username: String, tenantID: String, adding: [String], removing: [String]) async throws -> (user: UserRecord, signedOut: Bool)? {
        let (adding, removing) = (try Self.checkedGroups(adding), try Self.checkedGroups(removing))
        guard let user = try await users.user(tenantID: tenantID, username: username) else { return nil }
        let groups = Set(user.groups).union(adding).subtracting(removing).sorted()
        let takenAway = !Set(user.groups).isSubset(of: groups)
        guard groups != user.groups else { return (user, false) }
        guard let changed = try await users.setUserGroups(tenantID: tenantID, username: username, groups: groups, cuttingOff: takenAway, now: clock.now())
        else { return nil }
        return (changed, takenAway)
    }

    /// `groups` checked, without repeats, sorted; `invalid_request` naming the first bad one.
    static func checkedGroups(_ groups: [String]) throws -> [String] {
        if let bad = groups.first(where: { !isValidGroup($0) }) {
            throw AccountError("invalid_request", "the group \(JSONValue.clip(bad)) cannot be used: a group is 1-64 characters of letters, digits and . _ @ + - : /")
        }
        return Set(groups).sorted()
    }

    /// Gives an account a new password and signs it out everywhere (as `disable` does, without
    /// disabling it). `nil` if there is no such account.
    public func setPassword(username: String, tenantID: String, password: String) async throws -> UserRecord? {
        // A deleted account's tombstone (`deleted:...`) is no username: never found.
        guard Self.isValidName(username) else { return nil }
        guard password.count >= Self.minimumPasswordLength else {
            throw AccountError("invalid_request", "a password needs at least \(Self.minimumPasswordLength) characters")
        }
        let hash = try await hasher.hash(password).description
        return try await users.setUserPassword(tenantID: tenantID, username: username, passwordHash: hash, now: clock.now())
    }

    /// Deletes an account: cut off as `disable` does, its username free again. `nil` if there is none.
    public func delete(username: String, tenantID: String) async throws -> UserRecord? {
        guard Self.isValidName(username) else { return nil }
        return try await users.deleteUser(tenantID: tenantID, username: username, now: clock.now())
    }

    /// Lets a disabled account log in again; tokens issued before it was disabled stay refused.
    public func enable(username: String, tenantID: String) async throws -> UserRecord? {
        guard Self.isValidName(username) else { return nil }
        return try await users.enableUser(tenantID: tenantID, username: username)
    }

    /// True when the account exists and is not disabled (refresh checks it).
    public func isActive(userID: String, tenantID: String) async throws -> Bool {
        try await activeUser(userID: userID, tenantID: tenantID) != nil
    }

    /// The account with `userID` in `tenantID` when it exists and is enabled (a refresh names its
    /// username in the new access token).
    public func activeUser(userID: String, tenantID: String) async throws -> UserRecord? {
        guard let user = try await users.user(id: userID, tenantID: tenantID), !user.disabled else { return nil }
        return user
    }
}
