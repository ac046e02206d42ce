import PostgresNIO

extension PostgresStateSurface: OAuthRepository {
    public func insertOAuthCode(_ record: OAuthCodeRecord) async throws {
        _ = try await rows(
            """
            INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, resource, scope, user_id, tenant_id, session_id, claims, created_at, expires_at)
            VALUES (\(record.codeHash), \(record.clientID), \(record.redirectURI), \(record.codeChallenge), \(record.resource), \(record.scope),
                    \(record.userID), \(record.tenantID), \(record.sessionID), \(record.claims), \(record.createdAt), \(record.expiresAt))
            """)
    }

    public func redeemOAuthCode(codeHash: String, familyID: String, accessTokenID: String, now: Double) async throws -> OAuthCodeRedemption {
        // One statement spends it: of two exchanges (on any instances), one updates the row.
        if let row = try await rows(
            """
            UPDATE oauth_codes SET used_at = \(now), family_id = \(familyID), access_token_id = \(accessTokenID)
            WHERE code_hash = \(codeHash) AND used_at IS NULL AND expires_at > \(now)
            RETURNING code_hash, client_id, redirect_uri, code_challenge, resource, scope, user_id, tenant_id, session_id, claims, created_at, expires_at,
                      used_at, family_id, access_token_id
            """
        ).first {
            return .redeemed(try Self.oauthCode(row))
        }
        guard
            let row = try await rows(
                """
                UPDATE oauth_codes SET reused_at = \(now) WHERE code_hash = \(codeHash) AND used_at IS NOT NULL
                RETURNING code_hash, client_id, redirect_uri, code_challenge, resource, scope, user_id, tenant_id, session_id, claims, created_at, expires_at,
                          used_at, family_id, access_token_id
                """
            ).first
        else { return .unknown }
        return .reused(try Self.oauthCode(row))
    }

    public func oauthCodeReused(codeHash: String) async throws -> Bool {
        try await rows("SELECT reused_at IS NOT NULL FROM oauth_codes WHERE code_hash = \(codeHash)").first.map { try $0.decode(Bool.self) } ?? false
    }

    public func upsertOAuthGrant(_ record: OAuthGrantRecord) async throws {
        _ = try await rows(
            """
            INSERT INTO oauth_grants (user_id, tenant_id, client_id, client_name, resource, scope, created_at, updated_at, by_assertion)
            VALUES (
                \(record.userID), \(record.tenantID), \(record.clientID), \(record.clientName), \(record.resource), \(record.scope), \(record.createdAt),
                \(record.updatedAt), \(record.byAssertion))
            ON CONFLICT (user_id, tenant_id, client_id, resource) DO UPDATE SET
                client_name = excluded.client_name, scope = excluded.scope, updated_at = excluded.updated_at,
                by_assertion = (oauth_grants.by_assertion AND excluded.by_assertion)
            """)
    }

    public func oauthGrant(userID: String, tenantID: String, clientID: String, resource: String) async throws -> OAuthGrantRecord? {
        try await rows(
            """
            SELECT user_id, tenant_id, client_id, client_name, resource, scope, created_at, updated_at, last_used_at, by_assertion FROM oauth_grants
            WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND client_id = \(clientID) AND resource = \(resource)
            """
        ).first.map(Self.oauthGrant)
    }

    public func oauthGrants(userID: String?) async throws -> [OAuthGrantRecord] {
        if let userID {
            return try await rows(
                """
                SELECT user_id, tenant_id, client_id, client_name, resource, scope, created_at, updated_at, last_used_at, by_assertion FROM oauth_grants
                WHERE user_id = \(userID) ORDER BY updated_at DESC
                """
            ).map(Self.oauthGrant)
        }
        return try await rows(
            "SELECT user_id, tenant_id, client_id, client_name, resource, scope, created_at, updated_at, last_used_at, by_assertion FROM oauth_grants ORDER BY updated_at DESC"
        ).map(Self.oauthGrant)
    }

    public func deleteOAuthGrant(userID: String, tenantID: String, clientID: String, resource: String, now: Double) async throws -> Int {
        let logger = self.logger
        return try await transaction { connection in
            try await connection.query(
                """
                UPDATE refresh_tokens SET revoked_at = \(now) WHERE revoked_at IS NULL AND family_id IN
                    (SELECT family_id FROM oauth_families WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND client_id = \(clientID) AND resource = \(resource))
                """, logger: logger)
            let tokens = try await connection.query(
                """
                DELETE FROM oauth_access_tokens WHERE family_id IN
                    (SELECT family_id FROM oauth_families WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND client_id = \(clientID) AND resource = \(resource))
                RETURNING token_id, expires_at
                """, logger: logger
            ).collect()
            try await Self.revokeOAuthAccessTokens(tokens, now: now, connection, logger: logger)
            return try await connection.query(
                """
                DELETE FROM oauth_grants WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND client_id = \(clientID) AND resource = \(resource)
                RETURNING user_id
                """, logger: logger
            ).collect().count
        }
    }

    public func insertOAuthFamily(_ record: OAuthFamilyRecord) async throws {
        _ = try await rows(
            """
            INSERT INTO oauth_families (family_id, client_id, resource, scope, user_id, tenant_id, session_id, claims, created_at)
            VALUES (\(record.familyID), \(record.clientID), \(record.resource), \(record.scope), \(record.userID), \(record.tenantID), \(record.sessionID),
                    \(record.claims), \(record.createdAt))
            """)
    }

    public func oauthFamily(id: String) async throws -> OAuthFamilyRecord? {
        guard
            let row = try await rows(
                "SELECT family_id, client_id, resource, scope, user_id, tenant_id, session_id, claims, created_at FROM oauth_families WHERE family_id = \(id)"
            ).first
        else { return nil }
        let (familyID, clientID, resource, scope, userID, tenantID, sessionID, claims, createdAt) = try row.decode(
            (String, String, String, String, String, String, String, String, Double).self)
        return OAuthFamilyRecord(
            familyID: familyID, clientID: clientID, resource: resource, scope: scope, userID: userID, tenantID: tenantID, sessionID: sessionID, claims: claims,
            createdAt: createdAt)
    }

    public func revokeRefreshFamily(_ familyID: String, now: Double) async throws -> Int {
        let logger = self.logger
        return try await transaction { connection in
            let revoked = try await connection.query(
                "UPDATE refresh_tokens SET revoked_at = \(now) WHERE family_id = \(familyID) AND revoked_at IS NULL RETURNING id", logger: logger
            ).collect().count
            let tokens = try await connection.query(
                "DELETE FROM oauth_access_tokens WHERE family_id = \(familyID) RETURNING token_id, expires_at", logger: logger
            ).collect()
            try await Self.revokeOAuthAccessTokens(tokens, now: now, connection, logger: logger)
            return revoked
        }
    }

    public func touchOAuthGrant(userID: String, tenantID: String, clientID: String, resource: String, now: Double) async throws {
        _ = try await rows(
            """
            UPDATE oauth_grants SET last_used_at = \(now)
            WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND client_id = \(clientID) AND resource = \(resource) RETURNING user_id
            """)
    }

    public func recordOAuthAccessToken(tokenID: String, familyID: String, sessionID: String, expiresAt: Double, now: Double) async throws -> Bool {
        // The session's and a refresh token's rows are locked (FOR SHARE) until this commits: an end
        // committing meanwhile waits, and its delete of the family's or session's tokens then sees this row.
        try await !rows(
            """
            INSERT INTO oauth_access_tokens (token_id, family_id, session_id, expires_at)
            SELECT \(tokenID), \(familyID), s.id, \(expiresAt) FROM sessions s
            WHERE s.id = \(sessionID) AND s.state <> 'revoked' AND s.expires_at > \(now)
              AND EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family_id = \(familyID) AND r.revoked_at IS NULL FOR SHARE)
            FOR SHARE OF s
            RETURNING token_id
            """
        ).isEmpty
    }

    public func recordAssertionAccessToken(tokenID: String, familyID: String, expiresAt: Double) async throws -> Bool {
        try await !rows(
            """
            INSERT INTO oauth_access_tokens (token_id, family_id, session_id, expires_at)
            SELECT \(tokenID), f.family_id, '', \(expiresAt) FROM oauth_families f WHERE f.family_id = \(familyID)
              AND EXISTS (SELECT 1 FROM oauth_grants g
                  WHERE g.user_id = f.user_id AND g.tenant_id = f.tenant_id AND g.client_id = f.client_id AND g.resource = f.resource FOR SHARE)
              AND EXISTS (SELECT 1 FROM provider_users u WHERE u.user_id = f.user_id AND NOT u.disabled FOR SHARE)
            RETURNING token_id
            """
        ).isEmpty
    }

    /// Revokes the deleted access-token rows (`token_id, expires_at`) that are still live: a
    /// `revoked_tokens` row and a `tokenRevoked` change each.
    static func revokeOAuthAccessTokens(_ deleted: [PostgresRow], now: Double, _ connection: PostgresConnection, logger: Logger) async throws {
        for row in deleted {
            let (tokenID, expiresAt) = try row.decode((String, Double).self)
            guard expiresAt > now else { continue }
            let inserted = try await connection.query(
                "INSERT INTO revoked_tokens (jti, expires_at, revoked_at) VALUES (\(tokenID), \(expiresAt), \(now)) ON CONFLICT (jti) DO NOTHING RETURNING jti",
                logger: logger
            ).collect()
            if !inserted.isEmpty { try await record(.tokenRevoked(jti: tokenID, expiresAt: expiresAt), at: now, connection, logger: logger) }
        }
    }

    public func deleteExpiredOAuthCodes(before cutoff: Double) async throws -> Int {
        let codes = try await rows("DELETE FROM oauth_codes WHERE expires_at < \(cutoff) RETURNING code_hash").count
        _ = try await rows("DELETE FROM oauth_access_tokens WHERE expires_at < \(cutoff) RETURNING token_id")
        let clients = try await rows("DELETE FROM oauth_clients WHERE expires_at < \(cutoff) RETURNING client_id").count
        // A family with no live refresh token and no access token recorded, made long enough ago that its first refresh token is written.
        let families = try await rows(
            """
            DELETE FROM oauth_families f
            WHERE NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family_id = f.family_id AND r.revoked_at IS NULL AND r.expires_at >= \(cutoff))
              AND NOT EXISTS (SELECT 1 FROM oauth_access_tokens a WHERE a.family_id = f.family_id) AND f.created_at < \(cutoff - OAuthFamilyRecord.endedGrace)
            RETURNING f.family_id
            """
        ).count
        return codes + clients + families
    }

    /// The advisory lock registrations are counted and stored under, so that instances registering
    /// at once cannot together pass the limit of unused ones ("portcull" + 2).
    static let registrationLock: Int64 = migrationLock + 2

    public func insertOAuthClient(_ record: OAuthClientRecord, unusedLimit: Int, now: Double) async throws -> Bool {
        let logger = self.logger
        let lifetime = record.expiresAt - record.createdAt
        return try await transaction { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.registrationLock))", logger: logger)
            let counted = try await connection.query(
                "SELECT COUNT(*)::BIGINT FROM oauth_clients WHERE expires_at > \(now) AND expires_at - created_at <= \(lifetime)", logger: logger
            ).collect()
            let unused = try counted.first?.decode(Int64.self) ?? 0
            guard unused < Int64(unusedLimit) else { return false }
            try await connection.query(
                """
                INSERT INTO oauth_clients (client_id, name, redirect_uris, created_at, expires_at)
                VALUES (\(record.clientID), \(record.name), \(record.redirectURIs), \(record.createdAt), \(record.expiresAt))
                """, logger: logger)
            return true
        }
    }

    public func oauthClient(id: String, now: Double) async throws -> OAuthClientRecord? {
        try await rows(
            "SELECT client_id, name, redirect_uris, created_at, expires_at FROM oauth_clients WHERE client_id = \(id) AND expires_at > \(now)"
        ).first.map(Self.oauthClient)
    }

    public func extendOAuthClient(id: String, expiresAt: Double) async throws {
        _ = try await rows("UPDATE oauth_clients SET expires_at = \(expiresAt) WHERE client_id = \(id) AND expires_at < \(expiresAt)")
    }

    public func oauthClients(now: Double) async throws -> [OAuthClientRecord] {
        try await rows(
            "SELECT client_id, name, redirect_uris, created_at, expires_at FROM oauth_clients WHERE expires_at > \(now) ORDER BY created_at DESC"
        ).map(Self.oauthClient)
    }

    public func deleteOAuthClient(id: String, now: Double) async throws -> Int {
        let logger = self.logger
        return try await transaction { connection in
            try await connection.query(
                """
                UPDATE refresh_tokens SET revoked_at = \(now) WHERE revoked_at IS NULL AND family_id IN
                    (SELECT family_id FROM oauth_families WHERE client_id = \(id))
                """, logger: logger)
            let tokens = try await connection.query(
                "DELETE FROM oauth_access_tokens WHERE family_id IN (SELECT family_id FROM oauth_families WHERE client_id = \(id)) RETURNING token_id, expires_at",
                logger: logger
            ).collect()
            try await Self.revokeOAuthAccessTokens(tokens, now: now, connection, logger: logger)
            try await connection.query("DELETE FROM oauth_grants WHERE client_id = \(id)", logger: logger)
            return try await connection.query("DELETE FROM oauth_clients WHERE client_id = \(id) RETURNING client_id", logger: logger).collect().count
        }
    }

    static func oauthClient(_ row: PostgresRow) throws -> OAuthClientRecord {
        let (clientID, name, redirectURIs, createdAt, expiresAt) = try row.decode((String, String, String, Double, Double).self)
        return OAuthClientRecord(clientID: clientID, name: name, redirectURIs: redirectURIs, createdAt: createdAt, expiresAt: expiresAt)
    }

    static func oauthCode(_ row: PostgresRow) throws -> OAuthCodeRecord {
        let (codeHash, clientID, redirectURI, codeChallenge, resource, scope, userID, tenantID, sessionID, claims, createdAt, expiresAt, usedAt, familyID, accessTokenID) =
            try row.decode((String, String, String, String, String, String, String, String, String, String, Double, Double, Double?, String?, String?).self)
        return OAuthCodeRecord(
            codeHash: codeHash, clientID: clientID, redirectURI: redirectURI, codeChallenge: codeChallenge, resource: resource, scope: scope, userID: userID,
            tenantID: tenantID, sessionID: sessionID, claims: claims, createdAt: createdAt, expiresAt: expiresAt, usedAt: usedAt, familyID: familyID,
            accessTokenID: accessTokenID)
    }

    static func oauthGrant(_ row: PostgresRow) throws -> OAuthGrantRecord {
        let (userID, tenantID, clientID, clientName, resource, scope, createdAt, updatedAt, lastUsedAt, byAssertion) = try row.decode(
            (String, String, String, String, String, String, Double, Double, Double?, Bool).self)
        return OAuthGrantRecord(
            userID: userID, tenantID: tenantID, clientID: clientID, clientName: clientName, resource: resource, scope: scope, createdAt: createdAt, updatedAt: updatedAt,
            lastUsedAt: lastUsedAt, byAssertion: byAssertion)
    }
}
