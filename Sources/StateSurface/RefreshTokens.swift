import GRDB

/// One row of `refresh_tokens`: a refresh token stored by its hash, never in clear.
public struct RefreshTokenRecord: Sendable, Equatable {
    public var id: String
    /// SHA-256 of the token, base64url.
    public var tokenHash: String
    /// Every rotation of one login shares a family; reuse revokes the family.
    public var familyID: String
    public var sessionID: String
    public var userID: String
    public var tenantID: String
    public var createdAt: Double
    public var expiresAt: Double
    public var usedAt: Double?
    public var revokedAt: Double?

    public init(
        id: String, tokenHash: String, familyID: String, sessionID: String, userID: String, tenantID: String, createdAt: Double,
        expiresAt: Double, usedAt: Double? = nil, revokedAt: Double? = nil
    ) {
        self.id = id
        self.tokenHash = tokenHash
        self.familyID = familyID
        self.sessionID = sessionID
        self.userID = userID
        self.tenantID = tenantID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.usedAt = usedAt
        self.revokedAt = revokedAt
    }
}

/// What presenting a refresh token found.
public enum RefreshRotationOutcome: Sendable, Equatable {
    /// The token was live: it is now spent and `next` replaces it.
    case rotated(previous: RefreshTokenRecord, next: RefreshTokenRecord)
    /// The token had been spent already: its whole family is now revoked.
    case reused(RefreshTokenRecord)
    /// Revoked earlier (logout, reuse, operator).
    case revoked
    case expired
    case unknown
}

/// Refresh tokens and revoked access-token ids.
public protocol CredentialRepository: Sendable {
    func insertRefreshToken(_ record: RefreshTokenRecord) async throws
    /// The record of the token with `tokenHash`, in any state; nothing changes.
    func refreshToken(hash tokenHash: String) async throws -> RefreshTokenRecord?
    /// In one transaction: spend the token with `tokenHash` and store `next`
    /// (whose hash and id the caller chose), or detect reuse and revoke the family.
    /// Two concurrent calls with one token: exactly one rotates.
    func rotateRefreshToken(tokenHash: String, next: RefreshTokenRecord, now: Double) async throws -> RefreshRotationOutcome
    /// Revokes every refresh token of a session; returns how many.
    @discardableResult
    func revokeRefreshTokens(sessionID: String, now: Double) async throws -> Int
    /// Records an access token's `jti` as revoked until `expiresAt`.
    func revokeTokenID(_ jti: String, expiresAt: Double, now: Double) async throws
    func isTokenIDRevoked(_ jti: String) async throws -> Bool
    /// Revoked ids recorded at or after `since` whose tokens have not expired at `now`: `(jti, expiresAt, revokedAt)`.
    func revokedTokenIDs(revokedSince since: Double, now: Double) async throws -> [(jti: String, expiresAt: Double, revokedAt: Double)]
    /// A cheap read that fails when the store cannot answer (for readiness probes).
    func ping() async throws
    /// Forgets revoked ids whose tokens have expired anyway, and dead refresh tokens.
    @discardableResult
    func deleteExpiredCredentials(before cutoff: Double) async throws -> Int
}

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
        try await pool.write { db in try Self.insert(record, db) }
    }

    public func refreshToken(hash tokenHash: String) async throws -> RefreshTokenRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.refreshColumns) FROM refresh_tokens WHERE token_hash = ?", arguments: [tokenHash])
                .map(Self.refreshToken(from:))
        }
    }

    public func rotateRefreshToken(tokenHash: String, next: RefreshTokenRecord, now: Double) async throws -> RefreshRotationOutcome {
        try await pool.write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT \(Self.refreshColumns) FROM refresh_tokens WHERE token_hash = ?", arguments: [tokenHash]) else {
                return .unknown
            }
            let current = Self.refreshToken(from: row)
            if current.revokedAt != nil { return .revoked }
            if current.usedAt != nil {
                try db.execute(
                    sql: "UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL",
                    arguments: [now, current.familyID])
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
        try await pool.write { db in
            try db.execute(sql: "UPDATE refresh_tokens SET revoked_at = ? WHERE session_id = ? AND revoked_at IS NULL", arguments: [now, sessionID])
            return db.changesCount
        }
    }

    public func revokeTokenID(_ jti: String, expiresAt: Double, now: Double) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO revoked_tokens (jti, expires_at, revoked_at) VALUES (?, ?, ?) ON CONFLICT (jti) DO NOTHING",
                arguments: [jti, expiresAt, now])
        }
    }

    public func isTokenIDRevoked(_ jti: String) async throws -> Bool {
        try await pool.read { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM revoked_tokens WHERE jti = ?", arguments: [jti]) ?? false }
    }

    public func revokedTokenIDs(revokedSince since: Double, now: Double) async throws -> [(jti: String, expiresAt: Double, revokedAt: Double)] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT jti, expires_at, revoked_at FROM revoked_tokens WHERE revoked_at >= ? AND expires_at > ?", arguments: [since, now]
            ).map { (jti: $0["jti"], expiresAt: $0["expires_at"], revokedAt: $0["revoked_at"]) }
        }
    }

    public func deleteExpiredCredentials(before cutoff: Double) async throws -> Int {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM revoked_tokens WHERE expires_at <= ?", arguments: [cutoff])
            var removed = db.changesCount
            try db.execute(sql: "DELETE FROM refresh_tokens WHERE expires_at <= ?", arguments: [cutoff])
            removed += db.changesCount
            return removed
        }
    }
}
