import PostgresNIO

extension PostgresStateSurface: CredentialRepository {
    static let refreshColumns = "id, token_hash, family_id, session_id, user_id, tenant_id, created_at, expires_at, used_at, revoked_at"

    static func refreshToken(from row: PostgresRow) throws -> RefreshTokenRecord {
        let r = row.makeRandomAccess()
        return RefreshTokenRecord(
            id: try r["id"].decode(String.self), tokenHash: try r["token_hash"].decode(String.self), familyID: try r["family_id"].decode(String.self),
            sessionID: try r["session_id"].decode(String.self), userID: try r["user_id"].decode(String.self),
            tenantID: try r["tenant_id"].decode(String.self), createdAt: try r["created_at"].decode(Double.self),
            expiresAt: try r["expires_at"].decode(Double.self), usedAt: try r["used_at"].decode(Double?.self),
            revokedAt: try r["revoked_at"].decode(Double?.self))
    }

    static func insert(_ record: RefreshTokenRecord, _ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO refresh_tokens (\(unescaped: refreshColumns)) VALUES (\(record.id), \(record.tokenHash), \(record.familyID), \(record.sessionID),
                \(record.userID), \(record.tenantID), \(record.createdAt), \(record.expiresAt), \(record.usedAt), \(record.revokedAt))
            """, logger: logger)
    }

    public func insertRefreshToken(_ record: RefreshTokenRecord) async throws {
        let logger = self.logger
        try await transaction { connection in try await Self.insert(record, connection, logger: logger) }
    }

    public func refreshToken(hash tokenHash: String) async throws -> RefreshTokenRecord? {
        try await rows("SELECT \(unescaped: Self.refreshColumns) FROM refresh_tokens WHERE token_hash = \(tokenHash)").first.map(Self.refreshToken(from:))
    }

    public func rotateRefreshToken(tokenHash: String, next: RefreshTokenRecord, now: Double) async throws -> RefreshRotationOutcome {
        let logger = self.logger
        return try await transaction { connection in
            // FOR UPDATE: a concurrent rotation of the same token (through any instance) waits
            // here and then sees it spent, which is reuse.
            guard
                let row = try await connection.query(
                    "SELECT \(unescaped: Self.refreshColumns) FROM refresh_tokens WHERE token_hash = \(tokenHash) FOR UPDATE", logger: logger
                ).collect().first
            else { return .unknown }
            let current = try Self.refreshToken(from: row)
            if current.revokedAt != nil { return .revoked }
            if current.usedAt != nil {
                try await connection.query(
                    "UPDATE refresh_tokens SET revoked_at = \(now) WHERE family_id = \(current.familyID) AND revoked_at IS NULL", logger: logger)
                // What the family gave is ended with it: a thief who refreshed first keeps no access token.
                let tokens = try await connection.query(
                    "DELETE FROM oauth_access_tokens WHERE family_id = \(current.familyID) RETURNING token_id, expires_at", logger: logger
                ).collect()
                try await Self.revokeOAuthAccessTokens(tokens, now: now, connection, logger: logger)
                return .reused(current)
            }
            if current.expiresAt <= now { return .expired }
            try await connection.query("UPDATE refresh_tokens SET used_at = \(now) WHERE id = \(current.id)", logger: logger)
            var successor = next
            successor.familyID = current.familyID
            successor.sessionID = current.sessionID
            successor.userID = current.userID
            successor.tenantID = current.tenantID
            try await Self.insert(successor, connection, logger: logger)
            var spent = current
            spent.usedAt = now
            return .rotated(previous: spent, next: successor)
        }
    }

    public func revokeRefreshTokens(sessionID: String, now: Double) async throws -> Int {
        try await rows("UPDATE refresh_tokens SET revoked_at = \(now) WHERE session_id = \(sessionID) AND revoked_at IS NULL RETURNING id").count
    }

    public func revokeTokenID(_ jti: String, expiresAt: Double, now: Double) async throws {
        let logger = self.logger
        try await transaction { connection in
            let inserted = try await connection.query(
                "INSERT INTO revoked_tokens (jti, expires_at, revoked_at) VALUES (\(jti), \(expiresAt), \(now)) ON CONFLICT (jti) DO NOTHING RETURNING jti",
                logger: logger
            ).collect()
            if !inserted.isEmpty { try await Self.record(.tokenRevoked(jti: jti, expiresAt: expiresAt), at: now, connection, logger: logger) }
        }
    }

    public func isTokenIDRevoked(_ jti: String) async throws -> Bool {
        try await !rows("SELECT 1 FROM revoked_tokens WHERE jti = \(jti)").isEmpty
    }

    public func revokedTokenIDs(revokedSince since: Double, now: Double) async throws -> [(jti: String, expiresAt: Double, revokedAt: Double)] {
        try await rows("SELECT jti, expires_at, revoked_at FROM revoked_tokens WHERE revoked_at >= \(since) AND expires_at > \(now)").map {
            let (jti, expiresAt, revokedAt) = try $0.decode((String, Double, Double).self)
            return (jti: jti, expiresAt: expiresAt, revokedAt: revokedAt)
        }
    }

    public func deleteExpiredCredentials(before cutoff: Double) async throws -> Int {
        let logger = self.logger
        return try await transaction { connection in
            let revoked = try await connection.query("DELETE FROM revoked_tokens WHERE expires_at <= \(cutoff) RETURNING jti", logger: logger).collect().count
            let refresh = try await connection.query("DELETE FROM refresh_tokens WHERE expires_at <= \(cutoff) RETURNING id", logger: logger).collect().count
            // Every instance reads the feed twice a second; an hour-old change is history.
            let changes = try await connection.query("DELETE FROM access_changes WHERE at <= \(cutoff - 3_600) RETURNING version", logger: logger).collect().count
            return revoked + refresh + changes
        }
    }
}
