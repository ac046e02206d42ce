import JOSE
import StateSurface

/// A refresh token just issued: the secret itself (give it to the client once) and its record.
public struct IssuedRefreshToken: Sendable {
    /// `rt_` + 43 base64url characters of 32 random bytes. A secret: never log it.
    public let token: String
    public let record: RefreshTokenRecord
}

/// Why a refresh was refused. Reuse also revoked the family; the caller revokes the session.
public enum RefreshFailure: Error, Sendable, Equatable {
    case unknown
    case expired
    case revoked
    /// A spent token came back: the family is revoked; the session must be too.
    case reused(sessionID: String, userID: String, tenantID: String)
}

/// Opaque, rotating refresh tokens stored by hash.
public struct RefreshTokenService: Sendable {
    public let credentials: any CredentialRepository
    /// Lifetime of a refresh token (default 30 days); each rotation starts a new one.
    public let lifetime: Double
    public let clock: any TokenClock

    /// The prefix of the gateway API's refresh tokens (`/api/auth/refresh`).
    public static let prefix = "rt_"
    /// The prefix of the authorization server's (OAuth clients'): another kind, so that neither
    /// endpoint takes the other's (an agent's refresh token never becomes an API token).
    public static let oauthPrefix = "rto_"

    /// This service's kind of token: `prefix` or `oauthPrefix`.
    public let tokenPrefix: String

    public init(credentials: any CredentialRepository, lifetime: Double = 30 * 86_400, clock: any TokenClock = SystemClock(), tokenPrefix: String = Self.prefix) {
        self.credentials = credentials
        self.lifetime = lifetime
        self.clock = clock
        self.tokenPrefix = tokenPrefix
    }

    /// The stored form of a token: SHA-256, base64url.
    public static func hash(_ token: String) throws -> String {
        try Digest.sha256Base64URL(token)
    }

    func mint(sessionID: String, userID: String, tenantID: String, familyID: String) throws -> IssuedRefreshToken {
        let now = clock.now()
        let token = tokenPrefix + (try SecureRandom.identifier(bytes: 32))
        let record = RefreshTokenRecord(
            id: "rtk_" + (try SecureRandom.identifier(bytes: 12)), tokenHash: try Self.hash(token), familyID: familyID, sessionID: sessionID,
            userID: userID, tenantID: tenantID, createdAt: now, expiresAt: now + lifetime)
        return IssuedRefreshToken(token: token, record: record)
    }

    /// Starts a new family at login.
    /// Revokes every refresh token of a session (it ended: logout, revocation, reuse).
    @discardableResult
    public func revoke(sessionID: String) async throws -> Int {
        try await credentials.revokeRefreshTokens(sessionID: sessionID, now: clock.now())
    }

    public func issue(sessionID: String, userID: String, tenantID: String, familyID: String? = nil) async throws -> IssuedRefreshToken {
        let issued = try mint(sessionID: sessionID, userID: userID, tenantID: tenantID, familyID: try familyID ?? Self.newFamilyID())
        try await credentials.insertRefreshToken(issued.record)
        return issued
    }

    /// A new family's id.
    public static func newFamilyID() throws -> String { "rtf_" + (try SecureRandom.identifier(bytes: 12)) }

    func isWellFormed(_ token: String) -> Bool {
        token.hasPrefix(tokenPrefix) && token.utf8.count == tokenPrefix.utf8.count + 43
            && Base64URL.decode(String(token.dropFirst(tokenPrefix.utf8.count)))?.count == 32
    }

    /// The record of a live, unspent `token`, without spending it (to check its
    /// session first). A spent token is returned too: `rotate` then treats it as reuse.
    ///
    /// - Throws: `RefreshFailure.unknown`, `.expired` or `.revoked`.
    public func peek(_ token: String) async throws -> RefreshTokenRecord {
        guard isWellFormed(token), let record = try await credentials.refreshToken(hash: try Self.hash(token)) else {
            throw RefreshFailure.unknown
        }
        if record.revokedAt != nil { throw RefreshFailure.revoked }
        if record.usedAt == nil, record.expiresAt <= clock.now() { throw RefreshFailure.expired }
        return record
    }

    /// Spends `token` and returns its successor in the same family.
    ///
    /// - Throws: `RefreshFailure`; `.reused` has already revoked the family.
    public func rotate(_ token: String) async throws -> IssuedRefreshToken {
        guard isWellFormed(token) else { throw RefreshFailure.unknown }
        let next = try mint(sessionID: "", userID: "", tenantID: "", familyID: "")
        switch try await credentials.rotateRefreshToken(tokenHash: try Self.hash(token), next: next.record, now: clock.now()) {
        case .rotated(_, let successor):
            return IssuedRefreshToken(token: next.token, record: successor)
        case .reused(let record):
            throw RefreshFailure.reused(sessionID: record.sessionID, userID: record.userID, tenantID: record.tenantID)
        case .revoked:
            throw RefreshFailure.revoked
        case .expired:
            throw RefreshFailure.expired
        case .unknown:
            throw RefreshFailure.unknown
        }
    }
}
