import GRDB

/// One row of `users`. The password hash is a self-describing string; never the password.
public struct UserRecord: Sendable, Equatable {
    public var id: String
    public var tenantID: String
    public var username: String
    public var passwordHash: String
    public var disabled: Bool
    public var createdAt: Double

    public init(id: String, tenantID: String, username: String, passwordHash: String, disabled: Bool = false, createdAt: Double) {
        self.id = id
        self.tenantID = tenantID
        self.username = username
        self.passwordHash = passwordHash
        self.disabled = disabled
        self.createdAt = createdAt
    }
}

/// Accounts. A username is unique within its tenant.
public protocol UserRepository: Sendable {
    /// Stores a new account; `StateSurfaceError.conflict` if the tenant already has that username.
    func insertUser(_ user: UserRecord) async throws
    func user(tenantID: String, username: String) async throws -> UserRecord?
    /// All accounts, by tenant then username.
    func users() async throws -> [UserRecord]
    /// Sets the disabled flag; `false` if there is no such account.
    func setUserDisabled(tenantID: String, username: String, disabled: Bool) async throws -> Bool
}

extension SQLiteStateSurface: UserRepository {
    static let userColumns = "id, tenant_id, username, password_hash, disabled, created_at"

    static func user(from row: Row) -> UserRecord {
        UserRecord(
            id: row["id"], tenantID: row["tenant_id"], username: row["username"], passwordHash: row["password_hash"],
            disabled: row["disabled"], createdAt: row["created_at"])
    }

    public func insertUser(_ user: UserRecord) async throws {
        do {
            try await pool.write { db in
                try db.execute(
                    sql: "INSERT INTO users (\(Self.userColumns)) VALUES (?, ?, ?, ?, ?, ?)",
                    arguments: [user.id, user.tenantID, user.username, user.passwordHash, user.disabled, user.createdAt])
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

    public func setUserDisabled(tenantID: String, username: String, disabled: Bool) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "UPDATE users SET disabled = ? WHERE tenant_id = ? AND username = ?", arguments: [disabled, tenantID, username])
            return db.changesCount == 1
        }
    }
}
