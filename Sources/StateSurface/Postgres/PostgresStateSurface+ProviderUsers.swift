import PostgresNIO

extension PostgresStateSurface: ProviderUserRepository {
    public func recordProviderUser(_ record: ProviderUserRecord) async throws {
        _ = try await rows(
            """
            INSERT INTO provider_users (user_id, issuer, subject, tenant_id, email, username, name, first_seen_at, last_seen_at)
            VALUES (\(record.userID), \(record.issuer), \(record.subject), \(record.tenantID), \(record.email), \(record.username), \(record.name),
                    \(record.firstSeenAt), \(record.lastSeenAt))
            ON CONFLICT (user_id) DO UPDATE SET
                tenant_id = excluded.tenant_id, email = excluded.email, username = excluded.username, name = excluded.name,
                last_seen_at = excluded.last_seen_at
            """)
    }

    public func providerUsers() async throws -> [ProviderUserRecord] {
        try await rows(
            """
            SELECT \(unescaped: Self.providerUserColumns) FROM provider_users ORDER BY last_seen_at DESC
            """
        ).map(Self.providerUser)
    }

    public func providerUsers(matching text: String) async throws -> [ProviderUserRecord] {
        try await rows(
            """
            SELECT \(unescaped: Self.providerUserColumns) FROM provider_users
            WHERE user_id = \(text) OR subject = \(text) OR username = \(text) OR lower(email) = lower(\(text)) ORDER BY last_seen_at DESC
            """
        ).map(Self.providerUser)
    }

    public func providerUser(id userID: String) async throws -> ProviderUserRecord? {
        try await rows("SELECT \(unescaped: Self.providerUserColumns) FROM provider_users WHERE user_id = \(userID)").first.map(Self.providerUser)
    }

    public func cutOffProviderUser(id userID: String, now: Double, forgetNames: Bool) async throws -> ProviderUserRecord? {
        let logger = self.logger
        return try await transaction { connection in
            let names = forgetNames ? ", email = NULL, username = NULL, name = NULL" : ""
            guard let row = try await connection.query(
                """
                UPDATE provider_users SET disabled = TRUE, tokens_not_before = greatest(tokens_not_before, \(now))\(unescaped: names)
                WHERE user_id = \(userID) RETURNING \(unescaped: Self.providerUserColumns)
                """, logger: logger
            ).collect().first else { return nil }
            let user = try Self.providerUser(row)
            try await connection.query("UPDATE refresh_tokens SET revoked_at = \(now) WHERE user_id = \(userID) AND revoked_at IS NULL", logger: logger)
            let tokens = try await connection.query(
                """
                DELETE FROM oauth_access_tokens WHERE family_id IN (SELECT family_id FROM oauth_families WHERE user_id = \(userID))
                RETURNING token_id, expires_at
                """, logger: logger
            ).collect()
            try await Self.revokeOAuthAccessTokens(tokens, now: now, connection, logger: logger)
            try await connection.query("DELETE FROM oauth_grants WHERE user_id = \(userID)", logger: logger)
            try await connection.query("DELETE FROM provider_sessions WHERE user_id = \(userID)", logger: logger)
            try await connection.query("DELETE FROM connected_accounts WHERE user_id = \(userID)", logger: logger)
            try await connection.query("DELETE FROM connect_flows WHERE user_id = \(userID)", logger: logger)
            try await Self.record(
                .accountCutOff(AccountCutoff(userID: userID, tenantID: user.tenantID, notBefore: user.tokensNotBefore, cause: forgetNames ? .deleted : .disabled)),
                at: now, connection, logger: logger)
            return user
        }
    }

    public func enableProviderUser(id userID: String, now: Double) async throws -> ProviderUserRecord? {
        let logger = self.logger
        return try await transaction { connection in
            guard let row = try await connection.query(
                """
                UPDATE provider_users SET disabled = FALSE, tokens_not_before = greatest(tokens_not_before, \(now)) WHERE user_id = \(userID)
                RETURNING \(unescaped: Self.providerUserColumns)
                """, logger: logger
            ).collect().first else { return nil }
            let user = try Self.providerUser(row)
            try await Self.record(
                .accountCutOff(AccountCutoff(userID: userID, tenantID: user.tenantID, notBefore: user.tokensNotBefore, cause: .enabled)), at: now, connection,
                logger: logger)
            return user
        }
    }

    static let providerUserColumns = "user_id, issuer, subject, tenant_id, email, username, name, first_seen_at, last_seen_at, disabled, tokens_not_before"

    static func providerUser(_ row: PostgresRow) throws -> ProviderUserRecord {
        let (userID, issuer, subject, tenantID, email, username, name, firstSeenAt, lastSeenAt, disabled, notBefore) = try row.decode(
            (String, String, String, String, String?, String?, String?, Double, Double, Bool, Double).self)
        return ProviderUserRecord(
            userID: userID, issuer: issuer, subject: subject, tenantID: tenantID, email: email, username: username, name: name, firstSeenAt: firstSeenAt,
            lastSeenAt: lastSeenAt, disabled: disabled, tokensNotBefore: notBefore)
    }
}
