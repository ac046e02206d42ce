import GRDB

extension SQLiteStateSurface: UserRepository {
    static let userColumns = "id, tenant_id, username, password_hash, disabled, created_at, tokens_not_before, group_names"

    static func user(from row: Row) -> UserRecord {
        UserRecord(
            id: row["id"], tenantID: row["tenant_id"], username: row["username"], passwordHash: row["password_hash"],
            disabled: row["disabled"], createdAt: row["created_at"], tokensNotBefore: row["tokens_not_before"],
            groups: UserRecord.groups(stored: row["group_names"]))
    }

    public func insertUser(_ user: UserRecord) async throws {
        do {
            try await write { db in
                try db.execute(
                    sql: "INSERT INTO users (\(Self.userColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    arguments: [
                        user.id, user.tenantID, user.username, user.passwordHash, user.disabled, user.createdAt, user.tokensNotBefore,
                        UserRecord.storedGroups(user.groups),
                    ])
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw StateSurfaceError(.conflict, "tenant \(user.tenantID) already has a user named \(user.username)")
        }
    }

    public func user(tenantID: String, username: String) async throws -> UserRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.userColumns) FROM users WHERE tenant_id = ? AND username = ?", arguments: [tenantID, username])
                .map(Self.user(from:))
        }
    }

    public func users() async throws -> [UserRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.userColumns) FROM users WHERE username NOT LIKE 'deleted:%' ORDER BY tenant_id, username").map(Self.user(from:))
        }
    }

    public func user(id: String, tenantID: String) async throws -> UserRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.userColumns) FROM users WHERE id = ? AND tenant_id = ?", arguments: [id, tenantID]).map(Self.user(from:))
        }
    }

    public func disableUser(tenantID: String, username: String, now: Double) async throws -> UserRecord? {
        try await cutOffUser(tenantID: tenantID, username: username, now: now, cause: .disabled, change: "disabled = 1", arguments: [])
    }

    public func setUserPassword(tenantID: String, username: String, passwordHash: String, now: Double) async throws -> UserRecord? {
        try await cutOffUser(tenantID: tenantID, username: username, now: now, cause: .passwordChanged, change: "password_hash = ?", arguments: [passwordHash])
    }

    public func deleteUser(tenantID: String, username: String, now: Double) async throws -> UserRecord? {
        try await cutOffUser(
            tenantID: tenantID, username: username, now: now, cause: .deleted, change: "disabled = 1, password_hash = '!'", arguments: [],
            then: "UPDATE users SET username = 'deleted:' || id WHERE tenant_id = ? AND username = ?")
    }

    public func setUserGroups(tenantID: String, username: String, groups: [String], cuttingOff: Bool, now: Double) async throws -> UserRecord? {
        let stored = UserRecord.storedGroups(groups)
        guard !cuttingOff else {
            return try await cutOffUser(tenantID: tenantID, username: username, now: now, cause: .groupsChanged, change: "group_names = ?", arguments: [stored])
        }
        return try await write { db in
            try db.execute(sql: "UPDATE users SET group_names = ? WHERE tenant_id = ? AND username = ?", arguments: [stored, tenantID, username])
            return try Row.fetchOne(
                db, sql: "SELECT \(Self.userColumns) FROM users WHERE tenant_id = ? AND username = ?", arguments: [tenantID, username]
            ).map(Self.user(from:))
        }
    }

    /// The account cut off (for `cause`) in one transaction: `change` applied (its `?` bound to `arguments`), the
    /// not-before set, refresh tokens revoked, the cut-off in the feed; then `then` (bound to the tenant and username).
    private func cutOffUser(
        tenantID: String, username: String, now: Double, cause: AccountCutoff.Cause, change: String, arguments: [String], then: String? = nil,
        function: String = #function
    ) async throws -> UserRecord? {
        // Traced as the public method that called it (`store disableUser`), not as this helper.
        try await write(function) { db in
            try db.execute(
                sql: "UPDATE users SET \(change), tokens_not_before = max(tokens_not_before, ?), cutoff_cause = ? WHERE tenant_id = ? AND username = ?",
                arguments: StatementArguments(arguments) + [now, cause.rawValue, tenantID, username])
            guard let user = try Row.fetchOne(
                db, sql: "SELECT \(Self.userColumns) FROM users WHERE tenant_id = ? AND username = ?", arguments: [tenantID, username]
            ).map(Self.user(from:)) else { return nil }
            try db.execute(
                sql: "UPDATE refresh_tokens SET revoked_at = ? WHERE user_id = ? AND tenant_id = ? AND revoked_at IS NULL",
                arguments: [now, user.id, tenantID])
            if !cause.keepsGrants {
                // Disabled or deleted: the person's consents go with their agents' access tokens (a new password keeps them).
                try Self.revokeOAuthAccessTokens(
                    where: "family_id IN (SELECT family_id FROM oauth_families WHERE user_id = ? AND tenant_id = ?)", [user.id, tenantID], now: now, db)
                try db.execute(sql: "DELETE FROM oauth_grants WHERE user_id = ? AND tenant_id = ?", arguments: [user.id, tenantID])
                // And the services they connected: nothing is sent for them again, and nothing is kept.
                try db.execute(sql: "DELETE FROM connected_accounts WHERE user_id = ? AND tenant_id = ?", arguments: [user.id, tenantID])
                try db.execute(sql: "DELETE FROM connect_flows WHERE user_id = ? AND tenant_id = ?", arguments: [user.id, tenantID])
            }
            try Self.record(.accountCutOff(AccountCutoff(userID: user.id, tenantID: tenantID, notBefore: user.tokensNotBefore, cause: cause)), at: now, db)
            if let then { try db.execute(sql: then, arguments: [tenantID, username]) }
            return user
        }
    }

    public func enableUser(tenantID: String, username: String) async throws -> UserRecord? {
        try await write { db in
            try db.execute(sql: "UPDATE users SET disabled = 0 WHERE tenant_id = ? AND username = ?", arguments: [tenantID, username])
            return try Row.fetchOne(
                db, sql: "SELECT \(Self.userColumns) FROM users WHERE tenant_id = ? AND username = ?", arguments: [tenantID, username]
            ).map(Self.user(from:))
        }
    }

    public func accountCutoffs(since: Double) async throws -> [AccountCutoff] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, tenant_id, CASE WHEN cutoff_cause = 'groups changed' AND disabled = 0 THEN 'groups:' || id ELSE username END AS username,
                           disabled, tokens_not_before
                    FROM users WHERE tokens_not_before > 0 AND tokens_not_before >= ?
                    UNION ALL
                    SELECT user_id, tenant_id, CASE WHEN disabled = 0 THEN 'enabled:' || user_id ELSE user_id END,
                           disabled, tokens_not_before
                    FROM provider_users WHERE tokens_not_before > 0 AND tokens_not_before >= ?
                    """,
                arguments: [since, since]
            ).map {
                AccountCutoff(
                    userID: $0["id"], tenantID: $0["tenant_id"], notBefore: $0["tokens_not_before"],
                    cause: AccountCutoff.cause(username: $0["username"], disabled: $0["disabled"]))
            }
        }
    }
}
