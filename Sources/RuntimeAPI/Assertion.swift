import JOSE

/// Who is calling, as the gateway vouched for it in `X-Portcullis-Assertion`.
public struct RuntimeCaller: Sendable, Equatable {
    /// The user (`sub`), or `nil` for an anonymous caller.
    public let userID: String?
    /// The tenant (`tenant_id`), present exactly when `userID` is.
    public let tenantID: String?
    /// The session the gateway verified for this call, if any.
    public let sessionID: String?
    /// For a user of a trusted identity provider: its issuer (`idp_iss`) and subject (`idp_sub`).
    public let identityProvider: (issuer: String, subject: String)?
    /// The OAuth client the caller's token was issued to (`client_id`, RFC 9068), named to an MCP
    /// server so that it knows which agent calls; `nil` elsewhere.
    public let clientID: String?

    public init(
        userID: String?, tenantID: String?, sessionID: String?, identityProvider: (issuer: String, subject: String)? = nil, clientID: String? = nil
    ) {
        self.userID = userID
        self.tenantID = tenantID
        self.sessionID = sessionID
        self.identityProvider = identityProvider
        self.clientID = clientID
    }

    public static func == (lhs: RuntimeCaller, rhs: RuntimeCaller) -> Bool {
        lhs.userID == rhs.userID && lhs.tenantID == rhs.tenantID && lhs.sessionID == rhs.sessionID && lhs.clientID == rhs.clientID
            && lhs.identityProvider?.issuer == rhs.identityProvider?.issuer && lhs.identityProvider?.subject == rhs.identityProvider?.subject
    }

    public var isAnonymous: Bool { userID == nil }
}

/// The header that carries the gateway's assertion.
public enum AssertionHeader {
    public static let name = "X-Portcullis-Assertion"
    /// The JWT `typ` of an assertion.
    public static let type = "assertion+jwt"
}

/// Mints the gateway's identity assertions (the gateway side of the trust).
///
/// A JWT with `typ: assertion+jwt`, at most 60 s of life, `aud` = the
/// upstream's name, and `sub`, `tenant_id` and the verified `session_id` when
/// there are any; for a user of a trusted identity provider also `idp_iss` and
/// `idp_sub`, the provider's issuer and subject (`sub` is then `ext_...`, the
/// gateway's id for that pair). Signed with the gateway's active key.
public struct GatewayAssertionSigner: Sendable {
    public let keys: any SigningKeyProvider
    public let issuer: String
    public let lifetime: Double
    public let clock: any TokenClock

    public init(keys: any SigningKeyProvider, issuer: String, lifetime: Double = 60, clock: any TokenClock = SystemClock()) {
        self.keys = keys
        self.issuer = issuer
        self.lifetime = min(lifetime, 60)
        self.clock = clock
    }

    /// An assertion for one call to `audience`.
    public func assertion(audience: String, caller: RuntimeCaller) throws -> String {
        let key = try keys.currentSigningKey()
        let now = clock.now().rounded(.down)
        var claims: JSONObject = [
            "iss": .string(issuer), "aud": .string(audience), "iat": .number(now), "exp": .number(now + lifetime),
            "jti": .string(try SecureRandom.identifier(bytes: 12)),
        ]
        if let userID = caller.userID, let tenantID = caller.tenantID {
            claims["sub"] = .string(userID)
            claims["tenant_id"] = .string(tenantID)
        }
        if let sessionID = caller.sessionID { claims["session_id"] = .string(sessionID) }
        if let clientID = caller.clientID { claims["client_id"] = .string(clientID) }
        if let provider = caller.identityProvider {
            claims["idp_iss"] = .string(provider.issuer)
            claims["idp_sub"] = .string(provider.subject)
        }
        let header: JSONObject = ["alg": .string(key.algorithm.rawValue), "typ": .string(AssertionHeader.type), "kid": .string(key.kid)]
        return try JWSCompact.sign(header: header, payload: JSONWriter.bytes(.object(claims)), key: key)
    }
}
