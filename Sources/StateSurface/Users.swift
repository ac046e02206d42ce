import GRDB

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

    public init(
        id: String, tenantID: String, username: String, passwordHash: String, disabled: Bool = false, createdAt: Double, tokensNotBefore: Double = 0
    ) {
        self.id = id
        self.tenantID = tenantID
        self.username = username
        self.passwordHash = passwordHash
        self.disabled = disabled
        self.createdAt = createdAt
        self.tokensNotBefore = tokensNotBefore
    }
}

/// An account's not-before: tokens issued to `userID` in `tenantID` before `notBefore` are refused.
public struct AccountCutoff: Sendable, Equatable {
    public var userID: String
    public var tenantID: String
    public var notBefore: Double

    public init(userID: String, tenantID: String, notBefore: Double) {
        self.userID = userID
        self.tenantID = tenantID
        self.notBefore = notBefore
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
    /// Clears the disabled flag (the not-before stays: old tokens stay dead); `nil` if there is no such account.
    func enableUser(tenantID: String, username: String) async throws -> UserRecord?
    /// Accounts whose not-before is at or after `since`.
    func accountCutoffs(since: Double) async throws -> [AccountCutoff]
}

extension SQLiteStateSurface: UserRepository {
    static let userColumns = "id, tenant_id, username, password_hash, disabled, created_at, tokens_not_before"

    static func user(from row: Row) -> UserRecord {
        UserRecord(
            id: row["id"], tenantID: row["tenant_id"], username: row["username"], passwordHash: row["password_hash"],
            disabled: row["disabled"], createdAt: row["created_at"], tokensNotBefore: row["tokens_not_before"])
    }

    public func insertUser(_ user: UserRecord) async throws {
        do {
            try await pool.write { db in
                try db.execute(
                    sql: "INSERT INTO users (\(Self.userColumns)) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    arguments: [user.id, user.tenantID, user.username, user.passwordHash, user.disabled, user.createdAt, user.tokensNotBefore])
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw StateSurfaceError(.conflict, "tenant \(user.tenantID) already has a user named \(user.username)")
        }
    }

    public func user(tenantID: String, username: String) async throws -> UserRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.userColumns) FROM users WHERE tenant_id = ? AND username = ?", arguments: [tenantID, username])
                .map(Self.user(from:))
        }
    }

    public func users() async throws -> [UserRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.userColumns) FROM users ORDER BY tenant_id, username").map(Self.user(from:))
        }
    }

    public func user(id: String, tenantID: String) async throws -> UserRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.userColumns) FROM users WHERE id = ? AND tenant_id = ?", arguments: [id, tenantID]).map(Self.user(from:))
        }
    }

    public func disableUser(tenantID: String, username: String, now: Double) async throws -> UserRecord? {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE users SET disabled = 1, tokens_not_before = max(tokens_not_before, ?) WHERE tenant_id = ? AND username = ?",
                arguments: [now, tenantID, username])
            guard let user = try Row.fetchOne(
                db, sql: "SELECT \(Self.userColumns) FROM users WHERE tenant_id = ? AND username = ?", arguments: [tenantID, username]
            ).map(Self.user(from:)) else { return nil }
            try db.execute(
                sql: "UPDATE refresh_tokens SET revoked_at = ? WHERE user_id = ? AND tenant_id = ? AND revoked_at IS NULL",
                arguments: [now, user.id, tenantID])
            return user
        }
    }

    public func enableUser(tenantID: String, username: String) async throws -> UserRecord? {
        try await pool.write { db in
            try db.execute(sql: "UPDATE users SET disabled = 0 WHERE tenant_id = ? AND username = ?", arguments: [tenantID, username])
            return try Row.fetchOne(
                db, sql: "SELECT \(Self.userColumns) FROM users WHERE tenant_id = ? AND username = ?", arguments: [tenantID, username]
            ).map(Self.user(from:))
        }
    }

    public func accountCutoffs(since: Double) async throws -> [AccountCutoff] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, tenant_id, tokens_not_before FROM users WHERE tokens_not_before > 0 AND tokens_not_before >= ?", arguments: [since])
                .map { AccountCutoff(userID: $0["id"], tenantID: $0["tenant_id"], notBefore: $0["tokens_not_before"]) }
        }
    }
}
