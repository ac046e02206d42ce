import JOSE
import MCPResource
import SecurityGuard
import StateSurface

/// The authorization server's codes and tokens: a code made after consent, exchanged once for an
/// access token bound to one MCP resource and a rotating refresh token; refresh; revocation.
///
/// Everything it keeps is in the State Surface, so an authorization started on one instance may
/// finish on another.
public struct OAuthTokenService: Sendable {
    let store: any OAuthRepository & CredentialRepository
    let refreshTokens: RefreshTokenService
    let keys: any SigningKeyProvider
    /// The gateway's issuer: the `iss` of what it issues, and of its authorization responses.
    public let issuer: String
    let settings: AuthorizationServerSettings
    let clock: any TokenClock
    /// Fetches Client ID Metadata Documents (`nil`: `client_metadata_hosts` is empty).
    let clientMetadata: ClientMetadataFetcher?

    public init(
        store: any OAuthRepository & CredentialRepository, keys: any SigningKeyProvider, issuer: String, settings: AuthorizationServerSettings,
        refreshLifetime: Double, clock: any TokenClock = SystemClock(), clientMetadata: ClientMetadataFetcher? = nil
    ) {
        self.clientMetadata = clientMetadata
        self.store = store
        self.keys = keys
        self.issuer = issuer
        self.settings = settings
        self.clock = clock
        refreshTokens = RefreshTokenService(credentials: store, lifetime: refreshLifetime, clock: clock, tokenPrefix: RefreshTokenService.oauthPrefix)
    }

    /// Now, by the service's clock.
    public var now: Double { clock.now() }

    /// A registration lives this long after its last authorization.
    public static let registrationIdleLifetime: Double = 30 * 86_400
    /// A registration that no person has authorized yet lives ten minutes: long enough to sign in
    /// and consent, short enough that registrations nobody uses do not pile up.
    public static let unusedRegistrationLifetime: Double = 600

    /// The client with `clientID`: registered in the configuration, by itself (RFC 7591) and not
    /// expired, or described by the Client ID Metadata Document at `clientID`.
    ///
    /// - Throws: `UnredirectableAuthorizationError` for a metadata document that cannot be used.
    public func client(_ clientID: String) async throws -> RegisteredClient? {
        if let configured = settings.client(clientID) { return configured }
        if clientID.hasPrefix("https://") {
            guard let clientMetadata else {
                throw UnredirectableAuthorizationError(
                    "client_metadata_not_fetched", "the client_id is a metadata document's URL, and this gateway fetches none (authorization_server.client_metadata_hosts is empty)")
            }
            guard let url = ClientMetadataURL(clientID) else {
                throw UnredirectableAuthorizationError(
                    "client_metadata_url_invalid", "the client_id is not a metadata document's URL this gateway fetches: https, a host, a path other than /, no userinfo or fragment")
            }
            return try await clientMetadata.client(url, now: clock.now())
        }
        guard settings.dynamicRegistration, clientID.hasPrefix("dyn_"), clientID.utf8.count <= 64 else { return nil }
        return try await store.oauthClient(id: clientID, now: clock.now()).flatMap(RegisteredClient.init)
    }

    /// The client a token or revocation request comes from, authenticated (RFC 6749 section 2.3):
    /// a configured client with a secret must present it (Basic or in the form); any other client
    /// is public and must not present one. `nil` when the request names no client.
    ///
    /// - Throws: `OAuthError` `invalid_client` for a missing or wrong secret, or a secret sent by a public client.
    public func authenticate(_ authentication: ClientAuthentication) throws(OAuthError) -> String? {
        guard let clientID = authentication.clientID else {
            if authentication.secret != nil { throw OAuthError.invalidClient("client_secret was sent without client_id; send both, or use Authorization: Basic") }
            return nil
        }
        let configured = settings.client(clientID)
        if let secret = configured?.secret {
            guard authentication.secret != nil else {
                throw OAuthError.invalidClient("client \(clientID.prefix(80)) is confidential: authenticate with its secret (Authorization: Basic, or client_secret in the form)")
            }
            // Every candidate is compared, so the time taken does not say which one came close.
            let matched = authentication.presentedSecrets.map(secret.isMatched(by:)).contains(true)
            guard matched else { throw OAuthError.invalidClient("the client's secret is wrong") }
        } else if authentication.secret != nil {
            throw OAuthError.invalidClient("client \(clientID.prefix(80)) has no secret here (a public client): send client_id alone, and PKCE")
        }
        return clientID
    }

    /// Registers a public client (RFC 7591).
    ///
    /// - Throws: `OAuthError` `temporarily_unavailable` when `authorization_server.max_unused_registrations`
    ///   registrations nobody has used yet stand already (on every instance together).
    public func register(_ registration: ClientRegistration) async throws -> (RegisteredClient, issuedAt: Double) {
        let now = clock.now()
        let client = RegisteredClient(clientID: "dyn_" + (try SecureRandom.identifier(bytes: 16)), name: registration.name, redirectURIs: registration.redirectURIs, source: .dynamic)
        let stored = try await store.insertOAuthClient(
            OAuthClientRecord(
                clientID: client.clientID, name: client.name, redirectURIs: JSONWriter.string(.array(client.redirectURIs.map(JSONValue.string))), createdAt: now,
                expiresAt: now + Self.unusedRegistrationLifetime),
            unusedLimit: settings.maximumUnusedRegistrations, now: now)
        guard stored else {
            throw OAuthError(
                "temporarily_unavailable",
                "the gateway holds as many registrations nobody has used yet as it keeps; try again in a few minutes, or ask its operator to register the client")
        }
        return (client, now)
    }

    /// Makes the code an approved request is answered with; only its hash is kept.
    public func issueCode(for request: AuthorizationRequest, person: OAuthPerson) async throws -> String {
        let code = "ac_" + (try SecureRandom.identifier(bytes: 32))
        let now = clock.now()
        if request.client.source == .dynamic { try await store.extendOAuthClient(id: request.client.clientID, expiresAt: now + Self.registrationIdleLifetime) }
        try await store.insertOAuthCode(
            OAuthCodeRecord(
                codeHash: try Digest.sha256Base64URL(code), clientID: request.client.clientID, redirectURI: request.redirectURIGiven ? request.redirectURI : "",
                codeChallenge: request.challenge.value, resource: request.resource.identifier, scope: request.scopes.joined(separator: " "),
                userID: person.userID, tenantID: person.tenantID, sessionID: person.sessionID, claims: JSONWriter.string(.object(person.claims)),
                createdAt: now, expiresAt: now + settings.codeLifetime))
        return code
    }

    /// `grant_type=authorization_code`: the code, once, by its client, with its `redirect_uri`,
    /// its PKCE verifier and (when given) its resource.
    ///
    /// A code presented a second time revokes what the first exchange issued (its refresh family
    /// and its access token) and is refused.
    public func exchange(
        code: String?, clientID: String?, redirectURI: String?, verifier: String?, resource: String?, sessionIsLive: (_ sessionID: String, _ userID: String, _ tenantID: String) async throws -> Bool
    ) async throws -> OAuthTokenResponse {
        guard let code, !code.isEmpty else { throw OAuthError.invalidRequest("code is required") }
        guard let clientID, !clientID.isEmpty else { throw OAuthError.invalidRequest("client_id is required (public clients identify themselves)") }
        guard let verifier else { throw OAuthError.invalidRequest("code_verifier is required (PKCE)") }
        let familyID = try RefreshTokenService.newFamilyID()
        let tokenID = "at_" + (try SecureRandom.identifier(bytes: 16))
        let now = clock.now()
        let record: OAuthCodeRecord
        switch try await store.redeemOAuthCode(codeHash: try Digest.sha256Base64URL(code), familyID: familyID, accessTokenID: tokenID, now: now) {
        case .unknown:
            throw OAuthError.invalidGrant("the code is unknown or expired; start the authorization again")
        case .reused(let spent):
            // OAuth 2.1 §4.1.3: what the first exchange issued is revoked.
            if let family = spent.familyID { try await store.revokeRefreshFamily(family, now: now) }
            if let issued = spent.accessTokenID { try await store.revokeTokenID(issued, expiresAt: now + settings.accessTokenLifetime, now: now) }
            throw OAuthError.invalidGrant("the code was used before; what it gave is revoked, start the authorization again")
        case .redeemed(let redeemed):
            record = redeemed
        }
        // The code is spent whatever follows: a wrong client, redirect or verifier burns it.
        guard record.clientID == clientID else { throw OAuthError.invalidGrant("the code was issued to another client") }
        // Named at the authorization, it must be named again, the same; not named there, not here either.
        guard (redirectURI ?? "") == record.redirectURI else {
            throw OAuthError.invalidGrant("redirect_uri must be the one the authorization request named (or absent when it named none)")
        }
        guard PKCEChallenge(stored: record.codeChallenge).isMatched(by: verifier) else {
            throw OAuthError.invalidGrant("the code_verifier does not match the code_challenge")
        }
        if let resource, resource != record.resource {
            throw OAuthError.invalidTarget("resource must be the one the authorization was for (\(record.resource))")
        }
        guard try await sessionIsLive(record.sessionID, record.userID, record.tenantID) else {
            throw OAuthError.invalidGrant("the person's session ended (signed out or expired) before the code was exchanged; sign in again")
        }
        let family = OAuthFamilyRecord(
            familyID: familyID, clientID: record.clientID, resource: record.resource, scope: record.scope, userID: record.userID, tenantID: record.tenantID,
            sessionID: record.sessionID, claims: record.claims, createdAt: now)
        try await store.insertOAuthFamily(family)
        let refresh = try await refreshTokens.issue(sessionID: record.sessionID, userID: record.userID, tenantID: record.tenantID, familyID: familyID)
        // A second use between the redemption and now found no family to revoke: its mark on the
        // code says so, and what this exchange made is revoked here instead.
        if try await store.oauthCodeReused(codeHash: record.codeHash) {
            try await store.revokeRefreshFamily(familyID, now: clock.now())
            throw OAuthError.invalidGrant("the code was used twice; what it gave is revoked, start the authorization again")
        }
        return try await response(for: family, tokenID: tokenID, refreshToken: refresh.token)
    }

    /// `grant_type=refresh_token`: rotation with reuse detection (a spent token revokes its family).
    public func refresh(token: String?, clientID: String?, resource: String?, sessionIsLive: (_ sessionID: String, _ userID: String, _ tenantID: String) async throws -> Bool) async throws -> OAuthTokenResponse {
        guard let token, !token.isEmpty else { throw OAuthError.invalidRequest("refresh_token is required") }
        guard let clientID, !clientID.isEmpty else { throw OAuthError.invalidRequest("client_id is required (public clients identify themselves)") }
        let record: RefreshTokenRecord
        do {
            record = try await refreshTokens.peek(token)
        } catch is RefreshFailure {
            throw OAuthError.invalidGrant("the refresh token is unknown, expired or revoked; authorize again")
        }
        guard let family = try await store.oauthFamily(id: record.familyID) else {
            throw OAuthError.invalidGrant("the refresh token is unknown, expired or revoked; authorize again")
        }
        guard family.clientID == clientID else { throw OAuthError.invalidGrant("the refresh token was issued to another client") }
        if let resource, resource != family.resource { throw OAuthError.invalidTarget("resource must be the one the refresh token is for (\(family.resource))") }
        guard try await sessionIsLive(family.sessionID, family.userID, family.tenantID) else {
            try await store.revokeRefreshFamily(family.familyID, now: clock.now())
            throw OAuthError.invalidGrant("the person's session ended (signed out or expired); authorize again")
        }
        let next: IssuedRefreshToken
        do {
            next = try await refreshTokens.rotate(token)
        } catch RefreshFailure.reused {
            throw OAuthError.invalidGrant("the refresh token was used before; its family is revoked, authorize again")
        } catch is RefreshFailure {
            throw OAuthError.invalidGrant("the refresh token is unknown, expired or revoked; authorize again")
        }
        return try await response(for: family, tokenID: "at_" + (try SecureRandom.identifier(bytes: 16)), refreshToken: next.token)
    }

    /// The grant type of an Identity Assertion JWT Authorization Grant (RFC 7523 section 2.1).
    public static let jwtBearerGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    /// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` with an ID-JAG the caller verified
    /// and found unused: an access token for `person` at `resource`, with the scopes the
    /// provider granted that the resource offers (and the request asked for, when it named
    /// some), and no refresh token: no consent page, the company's provider decided.
    ///
    /// The family it makes has no session: the grant's end (`oauth revoke`, the client's removal)
    /// revokes the token, and the person's cut-off (`users disable`) refuses it.
    /// - Throws: `OAuthError` `invalid_client` when the client did not authenticate with a secret;
    ///   `invalid_grant` when it is not the grant's client, or the person was cut off or the grant
    ///   revoked while it was issued; `invalid_scope` without every scope the resource requires.
    public func issueForAssertion(
        clientID: String?, grantedTo: String, person: OAuthPerson, resource: MCPResource, granted: [String]?, requested: String?
    ) async throws -> OAuthTokenResponse {
        guard let clientID, settings.client(clientID)?.secret != nil else {
            throw OAuthError.invalidClient("an identity assertion grant is taken from a confidential client that authenticates (authorization_server.clients with client_secret_file)")
        }
        guard clientID == grantedTo else { throw OAuthError.invalidGrant("the assertion was issued to another client (its client_id is not the authenticated client's)") }
        var scopes = (granted ?? []).filter { resource.supportedScopes.contains($0) }
        if let requested {
            let asked = requested.split(separator: " ").map(String.init)
            scopes = scopes.filter { asked.contains($0) }
        }
        var unique: [String] = []
        for scope in scopes where !unique.contains(scope) { unique.append(scope) }
        // As the code flow: a token without the scopes its route requires would open nothing.
        if let missing = resource.scopes.first(where: { !unique.contains($0) }) {
            throw OAuthError.invalidScope("the assertion (or the request's scope) does not grant \(missing), which the MCP server requires; the provider must grant it")
        }
        let now = clock.now()
        let family = OAuthFamilyRecord(
            familyID: try RefreshTokenService.newFamilyID(), clientID: clientID, resource: resource.identifier, scope: unique.joined(separator: " "),
            userID: person.userID, tenantID: person.tenantID, sessionID: "", claims: JSONWriter.string(.object(person.claims)), createdAt: now)
        try await store.insertOAuthFamily(family)
        // Listed (`oauth grants`, the agents page) and revocable as a consent is; a consent the person gave stands as it was.
        if try await store.oauthGrant(userID: person.userID, tenantID: person.tenantID, clientID: clientID, resource: resource.identifier) == nil {
            try await store.upsertOAuthGrant(
                OAuthGrantRecord(
                    userID: person.userID, tenantID: person.tenantID, clientID: clientID, clientName: settings.client(clientID)?.name ?? clientID,
                    resource: resource.identifier, scope: family.scope, createdAt: now, updatedAt: now, byAssertion: true))
        }
        let tokenID = "at_" + (try SecureRandom.identifier(bytes: 16))
        guard try await store.recordAssertionAccessToken(tokenID: tokenID, familyID: family.familyID, expiresAt: now + settings.accessTokenLifetime + 60) else {
            throw OAuthError.invalidGrant("the person was cut off, or the grant revoked, while the token was being issued; nothing was issued")
        }
        return try await issued(for: family, tokenID: tokenID, refreshToken: nil)
    }

    /// RFC 7009: a refresh token ends its family; an access token of this server's is revoked by its id.
    /// Anything else is ignored (the answer is 200 whatever was sent, §2.2).
    ///
    /// - Parameter clientID: the client the request authenticated as (`authenticate`), if any.
    /// - Throws: `OAuthError` `invalid_client` for a confidential client's token revoked by
    ///   anyone but that client, authenticated (§2.1: the server checks the token was issued to the caller).
    public func revoke(token: String, clientID: String?, verifier: AccessTokenVerifier, resources: [String]) async throws {
        let now = clock.now()
        if token.hasPrefix(RefreshTokenService.oauthPrefix) {
            if let record = try? await refreshTokens.peek(token), let family = try await store.oauthFamily(id: record.familyID) {
                try checkRevoker(clientID, owner: family.clientID)
                try await store.revokeRefreshFamily(record.familyID, now: now)
            }
            return
        }
        for resource in resources {
            guard let verified = try? verifier.forAudience(resource).verify(token), let tokenID = verified.tokenID else { continue }
            if let owner = verified.clientID { try checkRevoker(clientID, owner: owner) }
            try await store.revokeTokenID(tokenID, expiresAt: verified.expiresAt, now: now)
            return
        }
    }

    /// A confidential client's token is revoked only by that client (authenticated); a public
    /// client's by whoever holds it (a public client cannot prove more).
    private func checkRevoker(_ clientID: String?, owner: String) throws(OAuthError) {
        guard settings.client(owner)?.secret != nil, clientID != owner else { return }
        throw OAuthError.invalidClient("the token belongs to a confidential client; revoke it as that client, with its secret")
    }

    /// An access token for a family's resource: `aud` the resource, `client_id` the client, the
    /// family's scopes and person.
    /// The token is recorded with its family and the person's session first, so that their end revokes it.
    func response(for family: OAuthFamilyRecord, tokenID: String, refreshToken: String) async throws -> OAuthTokenResponse {
        guard
            try await store.recordOAuthAccessToken(
                tokenID: tokenID, familyID: family.familyID, sessionID: family.sessionID, expiresAt: clock.now() + settings.accessTokenLifetime + 60, now: clock.now())
        else {
            throw OAuthError.invalidGrant("the person's session or this grant ended while the token was being issued; authorize again")
        }
        return try await issued(for: family, tokenID: tokenID, refreshToken: refreshToken)
    }

    /// The signed access token of a family whose token id is recorded, and the grant touched.
    func issued(for family: OAuthFamilyRecord, tokenID: String, refreshToken: String?) async throws -> OAuthTokenResponse {
        let stored = (try? StrictJSONReader().parseObject(Array(family.claims.utf8))) ?? [:]
        var claims: JSONObject = [:]
        for name in OAuthPerson.carriedClaims { if let value = stored[name] { claims[name] = value } }
        let issuer = AccessTokenIssuer(keys: keys, issuer: self.issuer, audience: family.resource, lifetime: settings.accessTokenLifetime, clock: clock)
        try await store.touchOAuthGrant(userID: family.userID, tenantID: family.tenantID, clientID: family.clientID, resource: family.resource, now: clock.now())
        let issued = try issuer.issue(subject: family.userID, tenantID: family.tenantID, clientID: family.clientID, scope: family.scope, additionalClaims: claims, tokenID: tokenID)
        return OAuthTokenResponse(
            accessToken: issued.token, expiresIn: Int(settings.accessTokenLifetime), refreshToken: refreshToken, scope: family.scope, resource: family.resource)
    }
}
