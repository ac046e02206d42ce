import JOSE

/// An Identity Assertion JWT Authorization Grant (ID-JAG) a company's provider issued, checked:
/// which client may act for whom, at which MCP server.
public struct VerifiedIdentityAssertionGrant: Sendable, Equatable {
    /// The person, as a provider sign-in names them: (issuer, subject) and the tenant.
    public let identity: ExternalIdentity
    /// The client the provider issued it to (`client_id`).
    public let clientID: String
    /// The MCP server it is for (`resource`), when named.
    public let resource: String?
    /// The scopes it grants (`scope`, space-separated), when named.
    public let scopes: [String]?
    /// Its `jti`, and until when it could be presented (its `exp` plus the leeway): the id is
    /// remembered that long, so it is used once.
    public let tokenID: String
    public let usableUntil: Double
    /// The claims, with `email` vouched for as the issuer's settings say (`emails_verified`).
    public let claims: JSONObject
}

/// The outcome of checking an ID-JAG.
public enum IdentityAssertionGrantVerification: Sendable, Equatable {
    case verified(VerifiedIdentityAssertionGrant)
    /// Not a grant the gateway takes, with the reason.
    case refused(TokenValidationError)
    /// The issuer's keys cannot be had now.
    case unavailable(String)
}

extension TrustedIssuers {
    /// The issuers whose ID-JAGs the authorization server takes (`enterprise_authorization: true`).
    public var enterpriseAuthorizationIssuers: [String] {
        configuration.issuers.filter(\.enterpriseAuthorization).map(\.issuer)
    }

    /// Checks `assertion`, an ID-JAG presented to the gateway's authorization server `audience`
    /// (its issuer): from an issuer marked `enterprise_authorization`; `typ` `oauth-id-jag+jwt`;
    /// signed with that issuer's keys and algorithms; `iss` exactly; `aud` the gateway's issuer,
    /// with or without a trailing slash; `exp` and `iat` (within the issuer's
    /// `max_token_lifetime_seconds`); `sub`, `jti` and `client_id`; the subject and tenant as the
    /// issuer's settings map them. Whether the `jti` was seen before, the client, the resource and
    /// the person are the caller's checks.
    public func verifyIdentityAssertionGrant(_ assertion: String, audience: String) async -> IdentityAssertionGrantVerification {
        let jws: JWSCompact
        let claims: JSONObject
        do {
            jws = try JWSCompact.parse(assertion)
            claims = try StrictJSONReader().parseObject(jws.payload)
        } catch let error as TokenValidationError {
            return .refused(error)
        } catch {
            return .refused(TokenValidationError(.malformed, "the assertion's claims are not a strict JSON object"))
        }
        guard let issuer = claims["iss"]?.stringValue, let keys = keys(of: issuer), keys.issuer.enterpriseAuthorization else {
            return .refused(TokenValidationError(.wrongIssuer, "the assertion's issuer is not one whose grants this gateway takes (trust.issuers with enterprise_authorization)"))
        }
        let policy = keys.identityAssertionGrantPolicy(audience: audience)
        var outcome = keys.verify(jws, claims: claims, policy: policy)
        if case .keysMayHaveChanged = outcome {
            guard await refreshForUnknownKey(issuer: issuer) else { return .unavailable("the keys of \(issuer) could not be fetched in time") }
            outcome = keys.verify(jws, claims: claims, policy: policy)
        }
        switch outcome {
        case .verified(let identity, let verified):
            return Self.identityAssertionGrant(verified.claims, identity: identity, leeway: policy.leeway)
        case .refused(let error): return .refused(error)
        case .unavailable(let message): return .unavailable(message)
        case .tenantNotAllowed(let message): return .refused(TokenValidationError(.invalidClaim, message))
        case .keysMayHaveChanged: return .refused(TokenValidationError(.unknownKey, "\(issuer) publishes no key with the assertion's kid"))
        }
    }

    /// The grant's own members, checked for type: `jti` and `client_id` non-empty strings,
    /// `resource` a string when present, `scope` a space-separated string when present, and `aud`
    /// one audience.
    static func identityAssertionGrant(_ claims: JSONObject, identity: ExternalIdentity, leeway: Double) -> IdentityAssertionGrantVerification {
        // One authorization server: an assertion addressed to several could be redeemed at each.
        switch claims["aud"] {
        case .string?: break
        case .array(let audiences)? where audiences.count == 1: break
        default: return .refused(TokenValidationError(.invalidClaim, "the assertion's aud must name this authorization server alone"))
        }
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= 256 else {
            return .refused(TokenValidationError(.invalidClaim, "the assertion's jti must be a non-empty string of at most 256 bytes"))
        }
        guard let clientID = claims["client_id"]?.stringValue, !clientID.isEmpty else {
            return .refused(TokenValidationError(.invalidClaim, "the assertion's client_id must be a non-empty string"))
        }
        var resource: String?
        if let value = claims["resource"] {
            guard let text = value.stringValue, !text.isEmpty else {
                return .refused(TokenValidationError(.invalidClaim, "the assertion's resource must be one MCP server's URL, a string"))
            }
            resource = text
        }
        var scopes: [String]?
        if let value = claims["scope"] {
            guard let text = value.stringValue else { return .refused(TokenValidationError(.invalidClaim, "the assertion's scope must be a space-separated string")) }
            scopes = text.split(separator: " ").map(String.init)
        }
        return .verified(
            VerifiedIdentityAssertionGrant(
                identity: identity, clientID: clientID, resource: resource, scopes: scopes, tokenID: jti,
                usableUntil: (claims["exp"]?.numberValue ?? 0) + leeway, claims: claims))
    }
}
