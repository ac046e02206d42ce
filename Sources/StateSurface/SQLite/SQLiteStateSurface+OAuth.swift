import GRDB

extension SQLiteStateSurface: OAuthRepository {
    public func insertOAuthCode(_ record: OAuthCodeRecord) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge, resource, scope, user_id, tenant_id, session_id, claims, created_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    record.codeHash, record.clientID, record.redirectURI, record.codeChallenge, record.resource, record.scope, record.userID, record.tenantID,
                    record.sessionID, record.claims, record.createdAt, record.expiresAt,
                ])
        }
    }

    public func redeemOAuthCode(codeHash: String, familyID: String, accessTokenID: String, now: Double) async throws -> OAuthCodeRedemption {
        try await write { db in
            // One statement spends it: of two exchanges, one updates the row.
            if let row = try Row.fetchOne(
                db,
                sql: """
                    UPDATE oauth_codes SET used_at = ?, family_id = ?, access_token_id = ?
                    WHERE code_hash = ? AND used_at IS NULL AND expires_at > ?
                    RETURNING \(Self.oauthCodeColumns)
                    """,
                arguments: [now, familyID, accessTokenID, codeHash, now])
            {
                return .redeemed(Self.oauthCode(row))
            }
            guard
                let row = try Row.fetchOne(
                    db, sql: "UPDATE oauth_codes SET reused_at = ? WHERE code_hash = ? AND used_at IS NOT NULL RETURNING \(Self.oauthCodeColumns)", arguments: [now, codeHash])
            else { return .unknown }
            return .reused(Self.oauthCode(row))
        }
    }

    public func oauthCodeReused(codeHash: String) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db, sql: "SELECT reused_at IS NOT NULL FROM oauth_codes WHERE code_hash = ?", arguments: [codeHash]) ?? false
        }
    }

    public func upsertOAuthGrant(_ record: OAuthGrantRecord) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO oauth_grants (user_id, tenant_id, client_id, client_name, resource, scope, created_at, updated_at, by_assertion)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (user_id, tenant_id, client_id, resource) DO UPDATE SET
                        client_name = excluded.client_name, scope = excluded.scope, updated_at = excluded.updated_at,
                        by_assertion = (oauth_grants.by_assertion AND excluded.by_assertion)
                    """,
                arguments: [
                    record.userID, record.tenantID, record.clientID, record.clientName, record.resource, record.scope, record.createdAt, record.updatedAt, record.byAssertion,
                ])
        }
    }

    public func touchOAuthGrant(userID: String, tenantID: String, clientID: String, resource: String, now: Double) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE oauth_grants SET last_used_at = ? WHERE user_id = ? AND tenant_id = ? AND client_id = ? AND resource = ?",
                arguments: [now, userID, tenantID, clientID, resource])
        }
    }

    public func oauthGrant(userID: String, tenantID: String, clientID: String, resource: String) async throws -> OAuthGrantRecord? {
        try await read { db in
            try Row.fetchOne(
                db, sql: "SELECT \(Self.oauthGrantColumns) FROM oauth_grants WHERE user_id = ? AND tenant_id = ? AND client_id = ? AND resource = ?",
                arguments: [userID, tenantID, clientID, resource]
            ).map(Self.oauthGrant)
        }
    }

    public func oauthGrants(userID: String?) async throws -> [OAuthGrantRecord] {
        try await read { db in
            if let userID {
                return try Row.fetchAll(db, sql: "SELECT \(Self.oauthGrantColumns) FROM oauth_grants WHERE user_id = ? ORDER BY updated_at DESC", arguments: [userID])
                    .map(Self.oauthGrant)
            }
            return try Row.fetchAll(db, sql: "SELECT \(Self.oauthGrantColumns) FROM oauth_grants ORDER BY updated_at DESC").map(Self.oauthGrant)
        }
    }

    public func deleteOAuthGrant(userID: String, tenantID: String, clientID: String, resource: String, now: Double) async throws -> Int {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE refresh_tokens SET revoked_at = ? WHERE revoked_at IS NULL AND family_id IN
                        (SELECT family_id FROM oauth_families WHERE user_id = ? AND tenant_id = ? AND client_id = ? AND resource = ?)
                    """,
                arguments: [now, userID, tenantID, clientID, resource])
            try Self.revokeOAuthAccessTokens(
                where: "family_id IN (SELECT family_id FROM oauth_families WHERE user_id = ? AND tenant_id = ? AND client_id = ? AND resource = ?)",
                [userID, tenantID, clientID, resource], now: now, db)
            try db.execute(
                sql: "DELETE FROM oauth_grants WHERE user_id = ? AND tenant_id = ? AND client_id = ? AND resource = ?",
                arguments: [userID, tenantID, clientID, resource])
            return db.changesCount
        }
    }

    public func insertOAuthFamily(_ record: OAuthFamilyRecord) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO oauth_families (family_id, client_id, resource, scope, user_id, tenant_id, session_id, claims, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    record.familyID, record.clientID, record.resource, record.scope, record.userID, record.tenantID, record.sessionID, record.claims, record.createdAt,
                ])
        }
    }

    public func oauthFamily(id: String) async throws -> OAuthFamilyRecord? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT family_id, client_id, resource, scope, user_id, tenant_id, session_id, claims, created_at FROM oauth_families WHERE family_id = ?",
                arguments: [id]
            ).map { row in
                OAuthFamilyRecord(
                    familyID: row["family_id"], clientID: row["client_id"], resource: row["resource"], scope: row["scope"], userID: row["user_id"],
                    tenantID: row["tenant_id"], sessionID: row["session_id"], claims: row["claims"], createdAt: row["created_at"])
            }
        }
    }

    public func revokeRefreshFamily(_ familyID: String, now: Double) async throws -> Int {
        try await write { db in
            try db.execute(sql: "UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL", arguments: [now, familyID])
            let revoked = db.changesCount
            try Self.revokeOAuthAccessTokens(where: "family_id = ?", [familyID], now: now, db)
            return revoked
        }
    }

    public func recordOAuthAccessToken(tokenID: String, familyID: String, sessionID: String, expiresAt: Double, now: Double) async throws -> Bool {
        try await write { db in
            // One writer at a time: a session or family ended before this sees it; one ended after finds this row.
            try db.execute(
                sql: """
                    INSERT INTO oauth_access_tokens (token_id, family_id, session_id, expires_at)
                    SELECT ?, ?, id, ? FROM sessions WHERE id = ? AND state <> 'revoked' AND expires_at > ?
                      AND EXISTS (SELECT 1 FROM refresh_tokens WHERE family_id = ? AND revoked_at IS NULL)
                    """,
                arguments: [tokenID, familyID, expiresAt, sessionID, now, familyID])
            return db.changesCount == 1
        }
    }

    public func recordAssertionAccessToken(tokenID: String, familyID: String, expiresAt: Double) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO oauth_access_tokens (token_id, family_id, session_id, expires_at)
                    SELECT ?, f.family_id, '', ? FROM oauth_families f WHERE f.family_id = ?
                      AND EXISTS (SELECT 1 FROM oauth_grants g
                          WHERE g.user_id = f.user_id AND g.tenant_id = f.tenant_id AND g.client_id = f.client_id AND g.resource = f.resource)
                      AND EXISTS (SELECT 1 FROM provider_users u WHERE u.user_id = f.user_id AND u.disabled = 0)
                    """,
                arguments: [tokenID, expiresAt, familyID])
            return db.changesCount == 1
        }
    }

    /// Revokes the recorded access tokens `condition` selects that are still live (a
    /// `revoked_tokens` row and a `tokenRevoked` change each), and forgets them all.
    static func revokeOAuthAccessTokens(where condition: String, _ arguments: [any DatabaseValueConvertible], now: Double, _ db: Database) throws {
        let rows = try Row.fetchAll(
            db, sql: "SELECT token_id, expires_at FROM oauth_access_tokens WHERE (\(condition)) AND expires_at > ?",
            arguments: StatementArguments(arguments + [now]))
        for row in rows {
            let (tokenID, expiresAt): (String, Double) = (row["token_id"], row["expires_at"])
            try db.execute(
                sql: "INSERT INTO revoked_tokens (jti, expires_at, revoked_at) VALUES (?, ?, ?) ON CONFLICT (jti) DO NOTHING", arguments: [tokenID, expiresAt, now])
            if db.changesCount == 1 { try record(.tokenRevoked(jti: tokenID, expiresAt: expiresAt), at: now, db) }
        }
        try db.execute(sql: "DELETE FROM oauth_access_tokens WHERE \(condition)", arguments: StatementArguments(arguments))
    }

    /// A family with no live refresh token and no access token recorded, made long enough ago
    /// that its first refresh token is written (the exchange makes the family first).
    static let endedFamily = """
        NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family_id = oauth_families.family_id AND r.revoked_at IS NULL AND r.expires_at >= ?)
          AND NOT EXISTS (SELECT 1 FROM oauth_access_tokens a WHERE a.family_id = oauth_families.family_id) AND created_at < ?
        """
    public func deleteExpiredOAuthCodes(before cutoff: Double) async throws -> Int {
        try await write { db in
            try db.execute(sql: "DELETE FROM oauth_codes WHERE expires_at < ?", arguments: [cutoff])
            let codes = db.changesCount
            try db.execute(sql: "DELETE FROM oauth_access_tokens WHERE expires_at < ?", arguments: [cutoff])
            try db.execute(sql: "DELETE FROM oauth_clients WHERE expires_at < ?", arguments: [cutoff])
            let clients = db.changesCount
            try db.execute(sql: "DELETE FROM oauth_families WHERE \(Self.endedFamily)", arguments: [cutoff, cutoff - OAuthFamilyRecord.endedGrace])
            return codes + clients + db.changesCount
        }
    }

    public func insertOAuthClient(_ record: OAuthClientRecord, unusedLimit: Int, now: Double) async throws -> Bool {
        try await write { db in
            // One writer at a time: the count and the insert are one step.
            let unused =
                try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM oauth_clients WHERE expires_at > ? AND expires_at - created_at <= ?",
                    arguments: [now, record.expiresAt - record.createdAt]) ?? 0
            guard unused < unusedLimit else { return false }
            try db.execute(
                sql: "INSERT INTO oauth_clients (client_id, name, redirect_uris, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [record.clientID, record.name, record.redirectURIs, record.createdAt, record.expiresAt])
            return true
        }
    }

    public func oauthClient(id: String, now: Double) async throws -> OAuthClientRecord? {
        try await read { db in
            try Row.fetchOne(
                db, sql: "SELECT client_id, name, redirect_uris, created_at, expires_at FROM oauth_clients WHERE client_id = ? AND expires_at > ?", arguments: [id, now]
            ).map(Self.oauthClient)
        }
    }

    public func extendOAuthClient(id: String, expiresAt: Double) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE oauth_clients SET expires_at = ? WHERE client_id = ? AND expires_at < ?", arguments: [expiresAt, id, expiresAt])
        }
    }

    public func oauthClients(now: Double) async throws -> [OAuthClientRecord] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT client_id, name, redirect_uris, created_at, expires_at FROM oauth_clients WHERE expires_at > ? ORDER BY created_at DESC", arguments: [now]
            ).map(Self.oauthClient)
        }
    }

    public func deleteOAuthClient(id: String, now: Double) async throws -> Int {
        try await write { db in
            try db.execute(
                sql: "UPDATE refresh_tokens SET revoked_at = ? WHERE revoked_at IS NULL AND family_id IN (SELECT family_id FROM oauth_families WHERE client_id = ?)",
                arguments: [now, id])
            try Self.revokeOAuthAccessTokens(where: "family_id IN (SELECT family_id FROM oauth_families WHERE client_id = ?)", [id], now: now, db)
            try db.execute(sql: "DELETE FROM oauth_grants WHERE client_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM oauth_clients WHERE client_id = ?", arguments: [id])
            return db.changesCount
        }
    }

    static func oauthClient(_ row: Row) -> OAuthClientRecord {
        OAuthClientRecord(clientID: row["client_id"], name: row["name"], redirectURIs: row["redirect_uris"], createdAt: row["created_at"], expiresAt: row["expires_at"])
    }

    static let oauthCodeColumns =
        "code_hash, client_id, redirect_uri, code_challenge, resource, scope, user_id, tenant_id, session_id, claims, created_at, expires_at, used_at, family_id, access_token_id"
    static let oauthGrantColumns = "user_id, tenant_id, client_id, client_name, resource, scope, created_at, updated_at, last_used_at, by_assertion"

    static func oauthCode(_ row: Row) -> OAuthCodeRecord {
        OAuthCodeRecord(
            codeHash: row["code_hash"], clientID: row["client_id"], redirectURI: row["redirect_uri"], codeChallenge: row["code_challenge"],
            resource: row["resource"], scope: row["scope"], userID: row["user_id"], tenantID: row["tenant_id"], sessionID: row["session_id"],
            claims: row["claims"], createdAt: row["created_at"], expiresAt: row["expires_at"], usedAt: row["used_at"], familyID: row["family_id"],
            accessTokenID: row["access_token_id"])
    }

    static func oauthGrant(_ row: Row) -> OAuthGrantRecord {
        OAuthGrantRecord(
            userID: row["user_id"], tenantID: row["tenant_id"], clientID: row["client_id"], clientName: row["client_name"], resource: row["resource"],
            scope: row["scope"], createdAt: row["created_at"], updatedAt: row["updated_at"], lastUsedAt: row["last_used_at"], byAssertion: row["by_assertion"])
    }
}
