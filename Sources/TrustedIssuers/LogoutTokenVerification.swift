import JOSE

/// A back-channel logout token, checked: whom the provider logged out.
public struct VerifiedLogoutToken: Sendable, Equatable {
    public let issuer: String
    /// The provider's session that ended (`sid`), when named.
    public let providerSessionID: String?
    /// The user whose sessions ended (`sub`), when named.
    public let subject: String?
    /// The token's `jti`.
    public let tokenID: String
    /// Until when the token could be presented again: its `exp`, or `iat` plus the window
    /// when it has none (its id must be remembered that long).
    public let usableUntil: Double
}

/// The outcome of checking a logout token.
public enum LogoutTokenVerification: Sendable, Equatable {
    case verified(VerifiedLogoutToken)
    case refused(TokenValidationError)
    /// The issuer's keys cannot be had now.
    case unavailable(String)
}

extension TrustedIssuers {
    /// How old a logout token's `iat` may be: providers without `exp` are bounded by it.
    public static let logoutTokenWindow: Double = 300
    /// The event a logout token must carry (Back-Channel Logout 1.0, 2.4).
    static let backChannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"

    /// Checks `token`, a back-channel logout token sent for the gateway's client `clientID` of
    /// `issuer`, as OpenID Connect Back-Channel Logout 1.0 section 2.6 says: the signature with
    /// the issuer's keys and algorithms, `iss` exactly, `aud` holding `clientID`, `iat` within
    /// the last five minutes (and `exp` when present), a `jti`, the `events` member with the
    /// back-channel logout event, `sid` and/or `sub`, and no `nonce`. An ID token never passes
    /// (no `events`; maybe a `nonce`). Whether the `jti` was seen before is the caller's check.
    public func verifyLogoutToken(_ jws: JWSCompact, claims: JSONObject, issuer: String, clientID: String) async -> LogoutTokenVerification {
        guard let keys = keys(of: issuer) else { return .refused(TokenValidationError(.wrongIssuer, "the issuer is not trusted")) }
        let policy = keys.logoutTokenPolicy(clientID: clientID)
        var outcome = keys.verify(jws, claims: claims, policy: policy, identity: false)
        if case .keysMayHaveChanged = outcome {
            guard await refreshForUnknownKey(issuer: issuer) else { return .unavailable("the keys of \(issuer) could not be fetched in time") }
            outcome = keys.verify(jws, claims: claims, policy: policy, identity: false)
        }
        switch outcome {
        case .verified:
            return Self.logoutToken(claims, issuer: issuer, now: keys.clock.now(), leeway: policy.leeway)
        case .refused(let error): return .refused(error)
        case .unavailable(let message): return .unavailable(message)
        case .tenantNotAllowed(let message): return .refused(TokenValidationError(.invalidClaim, message))
        case .keysMayHaveChanged: return .refused(TokenValidationError(.unknownKey, "\(issuer) publishes no key with the logout token's kid"))
        }
    }

    /// The logout-token rules the signature and policy checks do not cover.
    static func logoutToken(_ claims: JSONObject, issuer: String, now: Double, leeway: Double) -> LogoutTokenVerification {
        guard let iat = claims["iat"]?.numberValue, let jti = claims["jti"]?.stringValue, !jti.isEmpty else {
            return .refused(TokenValidationError(.missingClaim, "the logout token needs a numeric iat and a non-empty jti"))
        }
        guard now - iat <= logoutTokenWindow + leeway else {
            return .refused(TokenValidationError(.expired, "the logout token was issued more than \(Int(logoutTokenWindow)) s ago"))
        }
        guard case .object(let events)? = claims["events"], case .object? = events[backChannelLogoutEvent] else {
            return .refused(TokenValidationError(.missingClaim, "the logout token has no events member with \(backChannelLogoutEvent)"))
        }
        let sid = claims["sid"]
        let sub = claims["sub"]
        guard sid != nil || sub != nil else { return .refused(TokenValidationError(.missingClaim, "the logout token names neither sid nor sub")) }
        guard sid == nil || !(sid?.stringValue ?? "").isEmpty, sub == nil || !(sub?.stringValue ?? "").isEmpty else {
            return .refused(TokenValidationError(.invalidClaim, "the logout token's sid and sub must be non-empty strings"))
        }
        let usableUntil = max(claims["exp"]?.numberValue ?? 0, iat + logoutTokenWindow) + leeway
        return .verified(
            VerifiedLogoutToken(issuer: issuer, providerSessionID: sid?.stringValue, subject: sub?.stringValue, tokenID: jti, usableUntil: usableUntil))
    }
}
