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
    /// The token had been spent already: its whole family is now revoked, with the access tokens
    /// recorded for it (`recordOAuthAccessToken`), in the same step.
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
