import JOSE
import StateSurface

/// Why a presented access token was not accepted.
public enum AuthenticationFailure: Error, Sendable, Equatable {
    /// No token was presented.
    case missing
    /// A `ses_` session id was presented as the token.
    case sessionIDGiven
    /// A refresh token was presented as the access token.
    case refreshTokenGiven
    /// The verifier refused it.
    case invalid(TokenValidationError)
    /// It was valid but has been revoked (logout, or its account was disabled).
    case revoked

    /// One sentence a person can act on; never repeats the token.
    public var message: String {
        switch self {
        case .missing: "this needs an access token: send Authorization: Bearer <access_token>"
        case .sessionIDGiven: "a session_id was sent where an access token is expected; send the access_token from login"
        case .refreshTokenGiven: "a refresh token was sent where an access token is expected; exchange it at /api/auth/refresh"
        case .invalid(let error): "the access token was refused (\(error.reason.rawValue)): \(error.message)"
        case .revoked: "the access token was revoked (logged out, or the account was disabled); log in again"
        }
    }
}

/// The caller an access token proved.
public struct AuthenticatedCaller: Sendable, Equatable {
    public let userID: String
    public let tenantID: String
    public let clientID: String?
    /// `jti`, to revoke the token at logout.
    public let tokenID: String
    /// `iat`: compared with the account's not-before.
    public let issuedAt: Double
    public let expiresAt: Double

    public init(userID: String, tenantID: String, clientID: String?, tokenID: String, issuedAt: Double, expiresAt: Double) {
        self.userID = userID
        self.tenantID = tenantID
        self.clientID = clientID
        self.tokenID = tokenID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

/// Checks a presented access token: the JOSE verifier (or the cache of
/// tokens it recently passed), then, on every use, the revoked token ids and
/// the account's not-before.
public struct AccessTokenAuthenticator: Sendable {
    public let verifier: AccessTokenVerifier
    public let revocations: RevocationList
    public let cache: VerifiedTokenCache?

    public init(verifier: AccessTokenVerifier, revocations: RevocationList, cache: VerifiedTokenCache? = nil) {
        self.verifier = verifier
        self.revocations = revocations
        self.cache = cache
    }

    /// The token from an `Authorization` header value: `Bearer <token>` (scheme case-insensitive).
    ///
    /// - Returns: `nil` when there is no header; throws `.invalid` for another scheme.
    public static func bearerToken(fromAuthorization value: String?) throws(AuthenticationFailure) -> String? {
        guard let value, !value.isEmpty else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw .invalid(TokenValidationError(.malformed, "the Authorization header must be \"Bearer <access_token>\""))
        }
        return String(parts[1]).trimmingSpaces()
    }

    /// Verifies `token` and checks it is not revoked.
    ///
    /// - Throws: `AuthenticationFailure`; storage failures are rethrown as they are
    ///   (the caller answers 503 for them, never 401).
    public func authenticate(_ token: String?) async throws -> AuthenticatedCaller {
        let caller = try verified(token)
        if try await revocations.isRevoked(caller) { throw AuthenticationFailure.revoked }
        return caller
    }

    /// The same check without suspending, for callers on an event loop: the
    /// verifier's work is CPU only, and revocation is answered from the mirror.
    ///
    /// - Returns: the caller, or `nil` when the mirror is stale and only the
    ///   store can say whether the token was revoked (use `authenticate`).
    public func authenticateInMemory(_ token: String?) throws(AuthenticationFailure) -> AuthenticatedCaller? {
        let caller = try verified(token)
        guard let revoked = revocations.isRevokedInMemory(caller) else { return nil }
        if revoked { throw .revoked }
        return caller
    }

    /// The caller a token proves (cache or verifier), before revocation.
    func verified(_ token: String?) throws(AuthenticationFailure) -> AuthenticatedCaller {
        guard let token, !token.isEmpty else { throw .missing }
        if token.hasPrefix("ses_") { throw .sessionIDGiven }
        if token.hasPrefix(RefreshTokenService.prefix) { throw .refreshTokenGiven }
        let now = verifier.clock.now()
        if let cached = cache?.caller(for: token, now: now) { return cached }
        let verified: VerifiedAccessToken
        do {
            verified = try verifier.verify(token)
        } catch {
            throw .invalid(error)
        }
        guard let tenantID = verified.tenantID, let tokenID = verified.tokenID, let issuedAt = verified.claims["iat"]?.numberValue else {
            throw .invalid(TokenValidationError(.missingClaim, "the access token lacks tenant_id, jti or iat"))
        }
        let caller = AuthenticatedCaller(
            userID: verified.subject, tenantID: tenantID, clientID: verified.clientID, tokenID: tokenID, issuedAt: issuedAt,
            expiresAt: verified.expiresAt)
        cache?.insert(caller, for: token, now: now)
        return caller
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        var slice = Substring(self)
        while slice.last == " " || slice.last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
