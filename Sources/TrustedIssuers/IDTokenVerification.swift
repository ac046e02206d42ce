import JOSE

/// An ID token a provider returned at its token endpoint for this gateway's sign-in, checked.
public struct VerifiedIDToken: Sendable, Equatable {
    /// The user as the gateway knows a provider's users: (issuer, subject) and the tenant.
    public let identity: ExternalIdentity
    /// The provider's session (`sid`), which a back-channel logout may name.
    public let providerSessionID: String?
    public let expiresAt: Double
}

/// The outcome of checking an ID token (OpenID Connect Core 3.1.3.7).
public enum IDTokenVerification: Sendable, Equatable {
    case verified(VerifiedIDToken)
    /// Not a valid ID token for this sign-in, with the reason.
    case refused(TokenValidationError)
    /// The issuer's keys cannot be had now.
    case unavailable(String)
    /// Valid, but it names a tenant its issuer may not produce.
    case tenantNotAllowed(String)
}

extension TrustedIssuers {
    /// Checks `token`, the ID token `issuer` returned for a sign-in that sent `nonce`, as
    /// OpenID Connect Core 3.1.3.7 says: the signature with the issuer's keys and algorithms
    /// (an unknown `kid` fetches the keys again, as for access tokens), `iss` exactly, `aud`
    /// holding `clientID` (and `azp` naming it when `aud` holds others, or whenever present),
    /// `exp`, `iat` within the leeway and the issuer's `max_token_lifetime_seconds`, and `nonce`.
    ///
    /// `nonce` is `nil` for an ID token a refresh returned (OpenID Connect Core 12.2): no nonce
    /// was sent, so none is compared; the caller compares its `sub` with the sign-in's.
    public func verifyIDToken(_ token: String, issuer: String, clientID: String, nonce: String?) async -> IDTokenVerification {
        guard let keys = keys(of: issuer) else { return .refused(TokenValidationError(.wrongIssuer, "the issuer is not trusted")) }
        let jws: JWSCompact
        let claims: JSONObject
        do {
            jws = try JWSCompact.parse(token)
            claims = try StrictJSONReader().parseObject(jws.payload)
        } catch let error as TokenValidationError {
            return .refused(error)
        } catch {
            return .refused(TokenValidationError(.malformed, "the ID token's claims are not a strict JSON object"))
        }
        let policy = keys.idTokenPolicy(clientID: clientID)
        var outcome = keys.verify(jws, claims: claims, policy: policy)
        if case .keysMayHaveChanged = outcome {
            guard await refreshForUnknownKey(issuer: issuer) else { return .unavailable("the keys of \(issuer) could not be fetched in time") }
            outcome = keys.verify(jws, claims: claims, policy: policy)
        }
        switch outcome {
        case .verified(let identity, _):
            if let problem = Self.idTokenProblem(claims, clientID: clientID, nonce: nonce) { return .refused(problem) }
            return .verified(
                VerifiedIDToken(identity: identity, providerSessionID: claims["sid"]?.stringValue, expiresAt: claims["exp"]?.numberValue ?? 0))
        case .refused(let error): return .refused(error)
        case .unavailable(let message): return .unavailable(message)
        case .tenantNotAllowed(let message): return .tenantNotAllowed(message)
        case .keysMayHaveChanged:
            return .refused(TokenValidationError(.unknownKey, "\(issuer) publishes no key with the ID token's kid"))
        }
    }

    /// What the access-token rules do not cover: `nonce` (required, exactly this sign-in's) and `azp`.
    static func idTokenProblem(_ claims: JSONObject, clientID: String, nonce: String?) -> TokenValidationError? {
        if let nonce {
            guard let sent = claims["nonce"]?.stringValue else {
                return TokenValidationError(.missingClaim, "the ID token has no nonce; it was not made for this sign-in")
            }
            guard sent == nonce else { return TokenValidationError(.invalidClaim, "the ID token's nonce is not the one this sign-in sent") }
        }
        if case .array(let audiences)? = claims["aud"], audiences.count > 1, claims["azp"] == nil {
            return TokenValidationError(.missingClaim, "the ID token names several audiences and no azp")
        }
        if let azp = claims["azp"], azp.stringValue != clientID {
            return TokenValidationError(.invalidClaim, "the ID token's azp is not this gateway's client_id")
        }
        return nil
    }
}
