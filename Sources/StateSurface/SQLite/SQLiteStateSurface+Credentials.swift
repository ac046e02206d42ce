import GRDB

extension SQLiteStateSurface: CredentialRepository {
    static let refreshColumns = "id, token_hash, family_id, session_id, user_id, tenant_id, created_at, expires_at, used_at, revoked_at"

    static func refreshToken(from row: Row) -> RefreshTokenRecord {
        RefreshTokenRecord(
            id: row["id"], tokenHash: row["token_hash"], familyID: row["family_id"], sessionID: row["session_id"], userID: row["user_id"],
            tenantID: row["tenant_id"], createdAt: row["created_at"], expiresAt: row["expires_at"], usedAt: row["used_at"], revokedAt: row["revoked_at"])
    }

    static func insert(_ record: RefreshTokenRecord, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO refresh_tokens (\(refreshColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [
                record.id, record.tokenHash, record.familyID, record.sessionID, record.userID, record.tenantID, record.createdAt,
                record.expiresAt, record.usedAt, record.revokedAt,
            ])
    }

    public func insertRefreshToken(_ record: RefreshTokenRecord) async throws {
        try await write { db in try Self.insert(record, db) }
    }

    public func refreshToken(hash tokenHash: String) async throws -> RefreshTokenRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.refreshColumns) FROM refresh_tokens WHERE token_hash = ?", arguments: [tokenHash])
                .map(Self.refreshToken(from:))
        }
    }

    public func rotateRefreshToken(tokenHash: String, next: RefreshTokenRecord, now: Double) async throws -> RefreshRotationOutcome {
        try await write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT \(Self.refreshColumns) FROM refresh_tokens WHERE token_hash = ?", arguments: [tokenHash]) else {
                return .unknown
            }
            let current = Self.refreshToken(from: row)
            if current.revokedAt != nil { return .revoked }
            if current.usedAt != nil {
                try db.execute(
                    sql: "UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL",
                    arguments: [now, current.familyID])
                // What the family gave is ended with it: a thief who refreshed first keeps no access token.
                try Self.revokeOAuthAccessTokens(where: "family_id = ?", [current.familyID], now: now, db)
                return .reused(current)
            }
            if current.expiresAt <= now { return .expired }
            // Spend it; the write transaction serialises concurrent rotations,
            // and the condition makes a second spend impossible regardless.
            try db.execute(sql: "UPDATE refresh_tokens SET used_at = ? WHERE id = ? AND used_at IS NULL", arguments: [now, current.id])
            guard db.changesCount == 1 else { return .revoked }
            var successor = next
            successor.familyID = current.familyID
            successor.sessionID = current.sessionID
            successor.userID = current.userID
            successor.tenantID = current.tenantID
            try Self.insert(successor, db)
            var spent = current
            spent.usedAt = now
            return .rotated(previous: spent, next: successor)
        }
    }

    public func revokeRefreshTokens(sessionID: String, now: Double) async throws -> Int {
        try await write { db in
            try db.execute(sql: "UPDATE refresh_tokens SET revoked_at = ? WHERE session_id = ? AND revoked_at IS NULL", arguments: [now, sessionID])
            return db.changesCount
        }
    }

    public func revokeTokenID(_ jti: String, expiresAt: Double, now: Double) async throws {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO revoked_tokens (jti, expires_at, revoked_at) VALUES (?, ?, ?) ON CONFLICT (jti) DO NOTHING",
                arguments: [jti, expiresAt, now])
            if db.changesCount == 1 { try Self.record(.tokenRevoked(jti: jti, expiresAt: expiresAt), at: now, db) }
        }
    }

    public func isTokenIDRevoked(_ jti: String) async throws -> Bool {
        try await read { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM revoked_tokens WHERE jti = ?", arguments: [jti]) ?? false }
    }

    public func revokedTokenIDs(revokedSince since: Double, now: Double) async throws -> [(jti: String, expiresAt: Double, revokedAt: Double)] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT jti, expires_at, revoked_at FROM revoked_tokens WHERE revoked_at >= ? AND expires_at > ?", arguments: [since, now]
            ).map { (jti: $0["jti"], expiresAt: $0["expires_at"], revokedAt: $0["revoked_at"]) }
        }
    }

    public func deleteExpiredCredentials(before cutoff: Double) async throws -> Int {
        try await write { db in
            try db.execute(sql: "DELETE FROM revoked_tokens WHERE expires_at <= ?", arguments: [cutoff])
            var removed = db.changesCount
            try db.execute(sql: "DELETE FROM refresh_tokens WHERE expires_at <= ?", arguments: [cutoff])
            removed += db.changesCount
            // Every instance reads the feed twice a second; an hour-old change is history.
            try db.execute(sql: "DELETE FROM access_changes WHERE at <= ?", arguments: [cutoff - 3_600])
            removed += db.changesCount
            return removed
        }
    }
}
