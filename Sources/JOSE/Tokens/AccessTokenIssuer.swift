/// Supplies the key that signs new tokens.
public protocol SigningKeyProvider: Sendable {
    /// The current signing key.
    ///
    /// - Throws: `KeyError` when no key is active.
    func currentSigningKey() throws -> JWSKey
}

/// A freshly minted access token.
public struct IssuedAccessToken: Sendable {
    /// The compact JWS. A secret: never log it.
    public let token: String
    public let tokenID: String
    public let expiresAt: Double
    public let keyID: String
}

/// Mints RFC 9068 access tokens (`typ: at+jwt`) with the active key.
///
/// Claims: `iss`, `sub`, `aud`, `exp`, `iat`, `nbf`, `jti` (16 random bytes),
/// `client_id`, `tenant_id` and optionally `scope`. The token never carries a
/// `session_id`; asking for one is an error.
public struct AccessTokenIssuer: Sendable {
    public let keys: any SigningKeyProvider
    public let issuer: String
    public let audience: String
    /// Lifetime of issued tokens in seconds (DESIGN.md: 15 minutes).
    public let lifetime: Double
    public let clock: any TokenClock

    /// Claims the issuer sets itself and callers may not override.
    public static let registeredClaims: Set<String> = ["iss", "sub", "aud", "exp", "iat", "nbf", "jti", "client_id", "tenant_id", "scope"]

    public init(keys: any SigningKeyProvider, issuer: String, audience: String, lifetime: Double = 900, clock: any TokenClock = SystemClock()) {
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
        self.lifetime = lifetime
        self.clock = clock
    }

    /// Mints a token for `subject`.
    ///
    /// - Parameters:
    ///   - additionalClaims: extra claims; registered names and `session_id` are refused.
    ///   - tokenID: the `jti`, when the caller must know it before the token exists (a fresh random one otherwise).
    public func issue(
        subject: String, tenantID: String, clientID: String, scope: String? = nil, additionalClaims: JSONObject = JSONObject(), tokenID: String? = nil
    ) throws -> IssuedAccessToken {
        guard !subject.isEmpty else { throw TokenIssueError("the subject (sub) must not be empty") }
        for member in additionalClaims.members {
            if member.name == "session_id" {
                throw TokenIssueError("an access token must never carry a session_id; send the session_id separately")
            }
            if Self.registeredClaims.contains(member.name) {
                throw TokenIssueError("the claim \"\(member.name)\" is set by the issuer and cannot be overridden")
            }
        }
        let key = try keys.currentSigningKey()
        let now = clock.now().rounded(.down)
        let jti = try tokenID ?? SecureRandom.identifier(bytes: 16)
        var claims: JSONObject = [
            "iss": .string(issuer), "sub": .string(subject), "aud": .string(audience),
            "exp": .number(now + lifetime), "iat": .number(now), "nbf": .number(now), "jti": .string(jti),
            "client_id": .string(clientID), "tenant_id": .string(tenantID),
        ]
        if let scope { claims["scope"] = .string(scope) }
        for member in additionalClaims.members { claims[member.name] = member.value }
        let header: JSONObject = ["alg": .string(key.algorithm.rawValue), "typ": "at+jwt", "kid": .string(key.kid)]
        let token = try JWSCompact.sign(header: header, payload: JSONWriter.bytes(.object(claims)), key: key)
        return IssuedAccessToken(token: token, tokenID: jti, expiresAt: now + lifetime, keyID: key.kid)
    }
}

/// A request to mint a token that breaks the token rules.
public struct TokenIssueError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
