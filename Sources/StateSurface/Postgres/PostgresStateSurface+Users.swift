import PostgresNIO
import Logging

extension PostgresStateSurface: UserRepository {
    static let userColumns = "id, tenant_id, username, password_hash, disabled, created_at, tokens_not_before, group_names"

    static func user(from row: PostgresRow) throws -> UserRecord {
        let r = row.makeRandomAccess()
        return UserRecord(
            id: try r["id"].decode(String.self), tenantID: try r["tenant_id"].decode(String.self), username: try r["username"].decode(String.self),
            passwordHash: try r["password_hash"].decode(String.self), disabled: try r["disabled"].decode(Bool.self),
            createdAt: try r["created_at"].decode(Double.self), tokensNotBefore: try r["tokens_not_before"].decode(Double.self),
            groups: UserRecord.groups(stored: try r["group_names"].decode(String.self)))
    }

    public func insertUser(_ user: UserRecord) async throws {
        do {
            _ = try await rows(
                """
                INSERT INTO users (\(unescaped: Self.userColumns)) VALUES (\(user.id), \(user.tenantID), \(user.username), \(user.passwordHash),
                    \(user.disabled), \(user.createdAt), \(user.tokensNotBefore), \(UserRecord.storedGroups(user.groups)))
                """)
        } catch let error as StateSurfaceError where error.code == .conflict {
            throw StateSurfaceError(.conflict, "tenant \(user.tenantID) already has a user named \(user.username)")
        }
    }

    public func user(tenantID: String, username: String) async throws -> UserRecord? {
        try await rows("SELECT \(unescaped: Self.userColumns) FROM users WHERE tenant_id = \(tenantID) AND username = \(username)").first.map(Self.user(from:))
    }

    public func users() async throws -> [UserRecord] {
        try await rows("SELECT \(unescaped: Self.userColumns) FROM users WHERE username NOT LIKE 'deleted:%' ORDER BY tenant_id, username").map(Self.user(from:))
    }

    public func user(id: String, tenantID: String) async throws -> UserRecord? {
        try await rows("SELECT \(unescaped: Self.userColumns) FROM users WHERE id = \(id) AND tenant_id = \(tenantID)").first.map(Self.user(from:))
    }

    public func disableUser(tenantID: String, username: String, now: Double) async throws -> UserRecord? {
        try await cutOffUser(tenantID: tenantID, username: username, now: now, cause: .disabled) { connection, logger in
            try await connection.query(
                """
                UPDATE users SET disabled = TRUE, tokens_not_before = GREATEST(tokens_not_before, \(now)), cutoff_cause = 'account disabled'
                WHERE tenant_id = \(tenantID) AND username = \(username)
                RETURNING \(unescaped: Self.userColumns)
                """, logger: logger
            ).collect().first
        }
    }

    public func setUserPassword(tenantID: String, username: String, passwordHash: String, now: Double) async throws -> UserRecord? {
        try await cutOffUser(tenantID: tenantID, username: username, now: now, cause: .passwordChanged) { connection, logger in
            try await connection.query(
                """
                UPDATE users SET password_hash = \(passwordHash), tokens_not_before = GREATEST(tokens_not_before, \(now)), cutoff_cause = 'password changed'
                WHERE tenant_id = \(tenantID) AND username = \(username)
                RETURNING \(unescaped: Self.userColumns)
                """, logger: logger
            ).collect().first
        }
    }

    public func deleteUser(tenantID: String, username: String, now: Double) async throws -> UserRecord? {
        try await cutOffUser(tenantID: tenantID, username: username, now: now, cause: .deleted) { connection, logger in
            let row = try await connection.query(
                """
                UPDATE users SET disabled = TRUE, password_hash = '!', tokens_not_before = GREATEST(tokens_not_before, \(now)), cutoff_cause = 'account deleted'
                WHERE tenant_id = \(tenantID) AND username = \(username)
                RETURNING \(unescaped: Self.userColumns)
                """, logger: logger
            ).collect().first
            try await connection.query("UPDATE users SET username = 'deleted:' || id WHERE tenant_id = \(tenantID) AND username = \(username)", logger: logger)
            return row
        }
    }

    public func setUserGroups(tenantID: String, username: String, groups: [String], cuttingOff: Bool, now: Double) async throws -> UserRecord? {
        let stored = UserRecord.storedGroups(groups)
        guard cuttingOff else {
            return try await rows(
                "UPDATE users SET group_names = \(stored) WHERE tenant_id = \(tenantID) AND username = \(username) RETURNING \(unescaped: Self.userColumns)"
            ).first.map(Self.user(from:))
        }
        return try await cutOffUser(tenantID: tenantID, username: username, now: now, cause: .groupsChanged) { connection, logger in
            try await connection.query(
                """
                UPDATE users SET group_names = \(stored), tokens_not_before = GREATEST(tokens_not_before, \(now)), cutoff_cause = 'groups changed'
                WHERE tenant_id = \(tenantID) AND username = \(username)
                RETURNING \(unescaped: Self.userColumns)
                """, logger: logger
            ).collect().first
        }
    }

    /// The account cut off (for `cause`) in one transaction: `change` updates its row (returning it), then its
    /// refresh tokens are revoked and the cut-off enters the feed.
    private func cutOffUser(
        tenantID: String, username: String, now: Double, cause: AccountCutoff.Cause,
        function: String = #function, change: @escaping @Sendable (PostgresConnection, Logger) async throws -> PostgresRow?
    ) async throws -> UserRecord? {
        let logger = self.logger
        // Traced as the public method that called it (`store disableUser`), not as this helper.
        return try await transaction(function) { connection in
            guard let row = try await change(connection, logger) else { return nil }
            let user = try Self.user(from: row)
            try await connection.query(
                "UPDATE refresh_tokens SET revoked_at = \(now) WHERE user_id = \(user.id) AND tenant_id = \(tenantID) AND revoked_at IS NULL", logger: logger)
            if !cause.keepsGrants {
                // Disabled or deleted: the person's consents go with their agents' access tokens (a new password keeps them).
                let tokens = try await connection.query(
                    """
                    DELETE FROM oauth_access_tokens WHERE family_id IN (SELECT family_id FROM oauth_families WHERE user_id = \(user.id) AND tenant_id = \(tenantID))
                    RETURNING token_id, expires_at
                    """, logger: logger
                ).collect()
                try await Self.revokeOAuthAccessTokens(tokens, now: now, connection, logger: logger)
                try await connection.query("DELETE FROM oauth_grants WHERE user_id = \(user.id) AND tenant_id = \(tenantID)", logger: logger)
                // And the services they connected: nothing is sent for them again, and nothing is kept.
                try await connection.query("DELETE FROM connected_accounts WHERE user_id = \(user.id) AND tenant_id = \(tenantID)", logger: logger)
                try await connection.query("DELETE FROM connect_flows WHERE user_id = \(user.id) AND tenant_id = \(tenantID)", logger: logger)
            }
            try await Self.record(
                .accountCutOff(AccountCutoff(userID: user.id, tenantID: tenantID, notBefore: user.tokensNotBefore, cause: cause)), at: now, connection, logger: logger)
            return user
        }
    }

    public func enableUser(tenantID: String, username: String) async throws -> UserRecord? {
        try await rows(
            "UPDATE users SET disabled = FALSE WHERE tenant_id = \(tenantID) AND username = \(username) RETURNING \(unescaped: Self.userColumns)"
        ).first.map(Self.user(from:))
    }

    public func accountCutoffs(since: Double) async throws -> [AccountCutoff] {
        try await rows(
            """
            SELECT id, tenant_id, CASE WHEN cutoff_cause = 'groups changed' AND NOT disabled THEN 'groups:' || id ELSE username END,
                   disabled, tokens_not_before
            FROM users WHERE tokens_not_before > 0 AND tokens_not_before >= \(since)
            UNION ALL
            SELECT user_id, tenant_id, CASE WHEN NOT disabled THEN 'enabled:' || user_id ELSE user_id END,
                   disabled, tokens_not_before
            FROM provider_users WHERE tokens_not_before > 0 AND tokens_not_before >= \(since)
            """
        ).map {
            let (id, tenant, username, disabled, notBefore) = try $0.decode((String, String, String, Bool, Double).self)
            return AccountCutoff(userID: id, tenantID: tenant, notBefore: notBefore, cause: AccountCutoff.cause(username: username, disabled: disabled))
        }
    }
}
