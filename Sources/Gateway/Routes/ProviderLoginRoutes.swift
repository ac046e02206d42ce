import EdgeHTTP
import HTTPTypes
import Hummingbird
import JOSE
import Logging
import ProviderLogin
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import StateSurface
import TrafficCop
import TrustedIssuers

/// `/api/auth/providers` and `/api/auth/oidc/*`: signing the browser in through a trusted
/// provider (the OpenID Connect code flow, RFC 7636's PKCE always), and the provider's
/// back-channel logout.
struct ProviderLoginRoutes: Sendable {
    let directory: ProviderDirectory
    let trustedIssuers: TrustedIssuers?
    /// `nil` when no provider is configured for sign-in.
    let signIn: ProviderSignIn?
    let store: any LoginFlowRepository & ProviderSessionRepository & ProviderUserRepository
    let admission: Admission
    let runtime: RuntimeClient
    let body: JSONBody
    let auth: AuthRoutes
    let clock: any TokenClock
    let logger: Logger
    /// `{public_url}/api/auth/oidc/callback`.
    let redirectURI: String
    /// The origins a sign-in may return to.
    let returnOrigins: [String]
    /// How long a provider session's record is kept: the gateway's refresh-token lifetime.
    let sessionLifetime: Double
    /// Browser sign-ins (`/.portcullis/sign_in`) come back through the same callback.
    let browser: BrowserSessionRoutes

    func register(on router: Router<GatewayRequestContext>) {
        router.get("/api/auth/providers") { _, _ in providers() }
        router.post("/api/auth/oidc/:name/start") { request, context in try await start(request, context) }
        router.get("/api/auth/oidc/callback") { request, context in try await callback(request, context) }
        router.post("/api/auth/oidc/complete") { request, context in try await complete(request, context) }
        router.post("/api/auth/oidc/backchannel-logout") { request, context in try await backChannelLogout(request, context) }
    }

    /// The providers users may sign in through, in configuration order (an empty list when none).
    func providers() -> Response {
        let list: [JSONValue] = directory.providers.map { provider in
            ["name": .string(provider.name), "display_name": .string(provider.displayName), "issuer": .string(provider.issuer)]
        }
        return JSONBody.response(["providers": .array(list)])
    }

    /// Starts a sign-in: checks the anonymous session, keeps the flow, answers the provider's authorization URL.
    func start(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try admission.limit(.loginPerClient, key: admission.clientKey(request, context))
        let name = context.parameters.get("name") ?? ""
        guard let provider = directory.provider(named: name) else {
            throw GatewayError(.notFound, "provider_not_found", "no provider named \(JSONValue.clip(name)) is configured for sign-in; GET /api/auth/providers lists them")
        }
        let body = try await body.object(request)
        let sessionID = try GatewayError.checkedSessionID(try body.optionalString("session_id"))
        let returnTo = try body.requiredString("return_to")
        let challenge = try body.requiredString("login_challenge")
        guard let endpoints = trustedIssuers?.endpoints(issuer: provider.issuer) else { throw Self.providerUnavailable }
        // The session is upgraded at the end of the flow: it must be anonymous now (an owned one cannot change hands).
        let signedIn = GatewayError(.conflict, "session_conflict", "the session is signed in already; start a sign-in from an anonymous session")
        do {
            let session = try await runtime.session(admission.admit(SessionIntent(.read, principal: nil, sessionID: sessionID)))
            guard session.state == .anonymous else { throw signedIn }
        } catch let refusal as RuntimeRefusal where refusal.code == .sessionForbidden {
            // Read without an owner, an owned session is forbidden: it is signed in.
            throw signedIn
        }
        let start: LoginStart
        do {
            start = try LoginStart(
                provider: provider, endpoints: endpoints, redirectURI: redirectURI, sessionID: sessionID, returnTo: returnTo,
                loginChallenge: challenge, returnOrigins: returnOrigins, now: clock.now())
        } catch let refusal as LoginStart.Refusal {
            throw GatewayError(.badRequest, refusal.code, refusal.message)
        }
        try await store.insertLoginFlow(start.flow)
        logger.info("provider sign-in started", metadata: ["provider": "\(provider.name)"])
        return JSONBody.response(["authorization_url": .string(start.authorizationURL)], noStore: true)
    }

    static var providerUnavailable: GatewayError {
        var error = GatewayError(
            .serviceUnavailable, "issuer_unavailable", "the provider's discovery document has not been read yet, or names no sign-in endpoints; try again shortly")
        error.retryAfter = 5
        return error
    }

    /// The provider's redirect back: 303 to the flow's `return_to` with a login code or an error
    /// in the fragment; 400 when the state names no live flow (there is nowhere safe to go).
    func callback(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try admission.limit(.loginPerClient, key: admission.clientKey(request, context))
        guard let signIn else { throw Self.stateInvalid("no provider is configured for sign-in") }
        guard let query = FormEncoding.fields(Substring(request.uri.query ?? "")) else {
            throw GatewayError.invalidRequest("the callback's query must name each parameter once, percent-encoded as UTF-8")
        }
        let result: ProviderSignIn.CallbackResult
        do {
            result = try await signIn.callbackResult(query)
        } catch let refusal as ProviderSignIn.Refusal {
            throw GatewayError(.badRequest, refusal.code, refusal.message)
        }
        // A browser's sign-in: completed here, with the flow's cookie, into the session cookie.
        if result.flow.returnTo.hasPrefix(LoginStart.browserReturnPrefix) { return try await browser.completeProvider(result, request) }
        let location = result.location
        // The code is in the fragment, which no server sees; no-store and no referrer keep it out of caches and other sites' logs.
        return Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store", Self.referrerPolicy: "no-referrer"])
    }

    /// A valid field name: the unwrap cannot fail.
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!

    static func stateInvalid(_ why: String) -> GatewayError {
        GatewayError(.badRequest, "state_invalid", "this sign-in is unknown, was used already or has expired (\(why)); start the sign-in again")
    }

    /// Redeems a login code: upgrades the session in place and answers as `POST /api/auth/login` does.
    func complete(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try admission.limit(.loginPerClient, key: admission.clientKey(request, context))
        let body = try await body.object(request)
        let loginCode = try body.requiredString("login_code")
        let sessionID = try GatewayError.checkedSessionID(try body.optionalString("session_id"))
        let verifier = try body.requiredString("login_verifier")
        guard let signIn else {
            throw GatewayError(.badRequest, "login_code_invalid", "no provider is configured for sign-in, so no login code is valid")
        }
        let identity: ProviderIdentityRecord
        do {
            identity = try await signIn.complete(loginCode: loginCode, sessionID: sessionID, loginVerifier: verifier)
        } catch let refusal as ProviderSignIn.Refusal {
            throw GatewayError(.badRequest, refusal.code, refusal.message)
        }
        let userID = try AuthenticatedCaller.externalUserID(issuer: identity.issuer, subject: identity.subject)
        if try await store.providerUser(id: userID)?.disabled == true {
            logger.notice("login through a provider refused: the user is disabled here", metadata: ["user_id": "\(userID)", "provider": "\(identity.provider)"])
            throw GatewayError(.forbidden, "account_disabled", BrowserSessionRoutes.disabledMessage)
        }
        let principal = Principal(userID: userID, tenantID: identity.tenantID)
        // The same compare-and-set as a password login: a session upgraded meanwhile is refused, never shared.
        let granted = try await runtime.session(admission.admit(SessionIntent(.upgrade, principal: principal, sessionID: sessionID)))
        let now = clock.now()
        try await store.saveProviderSession(
            ProviderSessionRecord(sessionID: granted.sessionID, userID: userID, identity: identity, createdAt: now, expiresAt: now + sessionLifetime))
        let idToken = signIn.vault.open(identity.sealedIDToken, kind: .idToken, sessionID: granted.sessionID)
        try await store.recordProviderUser(
            ProviderUserRecord(userID: userID, identity: identity, idTokenClaims: BrowserSessionRoutes.identityClaims(idToken), at: now))
        auth.sessionOwners.remember(granted)
        let refresh = try await auth.refreshTokens.issue(sessionID: granted.sessionID, userID: userID, tenantID: identity.tenantID)
        logger.info(
            "login through a provider",
            metadata: ["user_id": "\(userID)", "tenant_id": "\(identity.tenantID)", "session_id": "\(granted.sessionID)", "provider": "\(identity.provider)"])
        return try await auth.tokenResponse(
            principal: principal, sessionID: granted.sessionID, refreshToken: refresh.token,
            external: ExternalIdentity(issuer: identity.issuer, subject: identity.subject, tenantID: identity.tenantID))
    }

    /// OpenID Connect Back-Channel Logout 1.0: the provider says a session (`sid`) or a user
    /// (`sub`) signed out; every gateway session of it ends on every instance.
    func backChannelLogout(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        func refused(_ message: String) -> GatewayError { GatewayError(.badRequest, "invalid_request", message) }
        // Before anything is read or verified: each token costs a signature check and a store write.
        try admission.limit(.backChannelLogoutPerClient, key: admission.clientKey(request, context))
        let contentType = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard contentType == "application/x-www-form-urlencoded" else {
            throw refused("the logout token is sent as a form (Content-Type: application/x-www-form-urlencoded, field logout_token)")
        }
        let bytes: ByteBuffer
        do {
            bytes = try await request.body.collect(upTo: 16 << 10)
        } catch {
            throw GatewayError(.contentTooLarge, "payload_too_large", "a back-channel logout request is limited to 16384 bytes")
        }
        guard let form = FormEncoding.fields(Substring(String(decoding: bytes.readableBytesView, as: UTF8.self))), let token = form["logout_token"],
            !token.isEmpty
        else { throw refused("the form must carry logout_token once") }
        let jws: JWSCompact
        let claims: JSONObject
        do {
            jws = try JWSCompact.parse(token)
            claims = try StrictJSONReader().parseObject(jws.payload)
        } catch {
            throw refused("the logout token is not a signed JWT with a strict JSON object of claims")
        }
        guard let issuer = claims["iss"]?.stringValue, let provider = directory.providers.first(where: { $0.issuer == issuer }),
            let trustedIssuers
        else { throw refused("the logout token's iss is not a provider users sign in through") }
        let verified: VerifiedLogoutToken
        switch await trustedIssuers.verifyLogoutToken(jws, claims: claims, issuer: issuer, clientID: provider.settings.clientID) {
        case .verified(let token): verified = token
        case .refused(let error):
            logger.notice("back-channel logout refused", metadata: ["provider": "\(provider.name)", "why": "\(error.reason.rawValue)"])
            throw refused("the logout token was refused (\(error.reason.rawValue)): \(error.message)")
        case .unavailable: throw Self.providerUnavailable
        }
        // Once only, across instances: the id is remembered as long as the token could be used.
        let replayKey = try LoginStart.hash(verified.issuer + "\n" + verified.tokenID)
        guard try await store.rememberLogoutToken(id: replayKey, expiresAt: verified.usableUntil, now: clock.now()) else {
            throw refused("this logout token was used already")
        }
        let sessions = try await store.providerSessions(issuer: issuer, providerSessionID: verified.providerSessionID, subject: verified.subject)
        let ending = auth.providerEnding
        for session in sessions { try await ending.end(session, reason: "signed out at the provider") }
        logger.info("back-channel logout", metadata: ["provider": "\(provider.name)", "sessions": "\(sessions.count)"])
        return Response(status: .ok, headers: [.cacheControl: "no-store"])
    }
}
