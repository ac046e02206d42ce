import AuthorizationServer
import JOSE
import Logging
import SecurityGuard
import StateSurface
import TrafficCop
import TrustedIssuers

extension AuthorizationServerRoutes {
    /// The prefix of an ID-JAG's single-use key: its ids never meet a logout token's.
    static let assertionReplayPrefix = "id-jag\n"

    /// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` with an Identity Assertion JWT
    /// Authorization Grant (the Enterprise-Managed Authorization extension of MCP): the company's
    /// provider decided that this client may act for this person at this MCP server, so the token
    /// is issued with no consent page. Every refusal is its own OAuth error and log line; the
    /// assertion itself is never logged.
    func assertionGrant(_ form: [String: String], clientID: String?) async throws -> OAuthTokenResponse {
        guard let trusted, !trusted.enterpriseAuthorizationIssuers.isEmpty else {
            throw OAuthError("unsupported_grant_type", "this gateway takes no identity assertion grants (no trust.issuers entry has enterprise_authorization)")
        }
        guard let assertion = form["assertion"], !assertion.isEmpty else { throw OAuthError.invalidRequest("assertion is required (the ID-JAG)") }
        // The client first: an unauthenticated caller learns nothing of the assertion.
        guard let clientID, settings.client(clientID)?.secret != nil else {
            refused("client_not_confidential", clientID: clientID)
            throw OAuthError.invalidClient(
                "an identity assertion grant is taken from a confidential client that authenticates (authorization_server.clients with client_secret_file)")
        }
        let grant: VerifiedIdentityAssertionGrant
        switch await trusted.verifyIdentityAssertionGrant(assertion, audience: tokens.issuer) {
        case .verified(let verified): grant = verified
        case .refused(let error):
            refused(error.reason.rawValue, clientID: clientID)
            throw OAuthError.invalidGrant("the assertion was refused (\(error.reason.rawValue)): \(error.message)")
        case .unavailable(let message):
            logger.warning("identity assertion grant: issuer keys unavailable", metadata: ["client_id": .string(clientID), "why": .string(message)])
            throw OAuthError("temporarily_unavailable", "the assertion's issuer keys cannot be had now; try again shortly")
        }
        let issuer = grant.identity.issuer
        guard grant.clientID == clientID else {
            refused("client_mismatch", clientID: clientID, issuer: issuer)
            throw OAuthError.invalidGrant("the assertion was issued to another client (its client_id is not the authenticated client's)")
        }
        guard let named = grant.resource else {
            refused("resource_missing", clientID: clientID, issuer: issuer)
            throw OAuthError.invalidGrant("the assertion names no resource; the provider must issue it for one MCP server")
        }
        guard let resource = resource(named) else {
            refused("resource_unknown", clientID: clientID, issuer: issuer)
            throw OAuthError.invalidTarget("the assertion's resource is no MCP server of this gateway")
        }
        if let asked = form["resource"], asked != named {
            refused("resource_mismatch", clientID: clientID, issuer: issuer)
            throw OAuthError.invalidTarget("resource must be the assertion's (\(named))")
        }
        let userID = try AuthenticatedCaller.externalUserID(issuer: issuer, subject: grant.identity.subject)
        let now = tokens.now
        let known = try await people.providerUser(id: userID)
        if let known, known.disabled {
            refused("person_disabled", clientID: clientID, issuer: issuer, userID: userID)
            throw OAuthError.invalidGrant("the person is disabled at this gateway; its operator can enable them again")
        }
        // Once only, on every instance: remembered as long as the assertion could be presented.
        let replayKey = try Digest.sha256Base64URL(Self.assertionReplayPrefix + issuer + "\n" + grant.tokenID)
        guard try await people.rememberPresentedAssertion(id: replayKey, expiresAt: grant.usableUntil, now: now) else {
            refused("replayed", clientID: clientID, issuer: issuer, userID: userID)
            throw OAuthError.invalidGrant("this assertion was used already; ask the provider for a new one")
        }
        var claims: JSONObject = [:]
        for name in OAuthPerson.carriedClaims { if let value = grant.claims[name] { claims[name] = value } }
        if !EmailDomains.isVerified(claims) { claims["email"] = nil }
        claims["idp_iss"] = .string(issuer)
        claims["idp_sub"] = .string(grant.identity.subject)
        // Known as a provider sign-in would make them known: `users find` and `users disable` name them.
        try await people.recordProviderUser(
            ProviderUserRecord(
                userID: userID, issuer: issuer, subject: grant.identity.subject, tenantID: grant.identity.tenantID, assertionClaims: claims, known: known, at: now))
        let person = OAuthPerson(userID: userID, tenantID: grant.identity.tenantID, sessionID: "", claims: claims)
        let answer: OAuthTokenResponse
        do {
            answer = try await tokens.issueForAssertion(
                clientID: clientID, grantedTo: grant.clientID, person: person, resource: resource, granted: grant.scopes, requested: form["scope"])
        } catch let error as OAuthError {
            refused(error.code == "invalid_scope" ? "scope_insufficient" : "ended_while_issuing", clientID: clientID, issuer: issuer, userID: userID)
            throw error
        }
        logger.info(
            "identity assertion grant accepted",
            metadata: ["client_id": .string(clientID), "issuer": .string(issuer), "user_id": .string(userID), "resource": .string(named), "scope": .string(answer.scope)])
        return answer
    }

    /// One line for each refusal, naming why (never the assertion).
    private func refused(_ reason: String, clientID: String?, issuer: String? = nil, userID: String? = nil) {
        var metadata: Logger.Metadata = ["reason": .string(reason)]
        if let clientID { metadata["client_id"] = .string(String(clientID.prefix(80))) }
        if let issuer { metadata["issuer"] = .string(issuer) }
        if let userID { metadata["user_id"] = .string(userID) }
        logger.notice("identity assertion grant refused", metadata: metadata)
    }
}
