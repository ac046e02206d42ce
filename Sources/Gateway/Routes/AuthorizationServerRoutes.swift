import AuthorizationServer
import ConnectedAccounts
import DataPlane
import EdgeHTTP
import HTTPTypes
import Hummingbird
import JOSE
import Logging
import MCPResource
import ProviderLogin
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import ProviderLogin
import StateSurface
import TrafficCop
import TrustedIssuers

/// `/api/auth/oauth/*`: the gateway as the OAuth 2.1 authorization server (authorization with
/// consent, token, revocation). The checks are `AuthorizationServer`'s; this is the HTTP around them.
///
/// The person signs in with the browser session of `auth: browser` (the gateway's accounts or a
/// provider), then consents once per client, resource and scopes.
struct AuthorizationServerRoutes: Sendable {
    let settings: AuthorizationServerSettings
    let tokens: OAuthTokenService
    let store: any OAuthRepository
    let browser: BrowserSessionRoutes
    /// Re-checks a provider's sign-in an agent uses, when it is due (`nil`: no provider sign-in).
    let recheck: ProviderRecheck?
    let table: LiveRouteTable
    let verifier: AccessTokenVerifier
    /// People's connected accounts, listed on the agents page.
    let connections: ConnectedAccountService
    /// The trusted issuers, whose identity assertion grants it takes where `enterprise_authorization` says so.
    let trusted: TrustedIssuers?
    /// Provider users (an assertion's person) and the single-use ids of assertions.
    let people: any ProviderUserRepository & ProviderSessionRepository
    let logger: Logger

    func register(on router: Router<GatewayRequestContext>) {
        router.get(RouterPath(AuthorizationServerMetadata.authorizationPath)) { request, context in try await authorize(request, context) }
        router.post(RouterPath(AuthorizationServerMetadata.consentPath)) { request, context in try await consent(request, context) }
        router.post(RouterPath(AuthorizationServerMetadata.tokenPath)) { request, context in try await token(request, context) }
        router.post(RouterPath(AuthorizationServerMetadata.revocationPath)) { request, context in try await revoke(request, context) }
        router.post(RouterPath(AuthorizationServerMetadata.registrationPath)) { request, context in try await register(request, context) }
        registerAgentAccess(on: router)
    }

    /// The rate limit of the endpoints a client calls without a person: register, token, revoke.
    func limit(_ request: Request, _ context: GatewayRequestContext) throws {
        let admission = browser.admission
        try admission.limit(.oauthPerClient, key: admission.clientKey(request, context))
    }

    /// `POST /api/auth/oauth/register` (RFC 7591, with `dynamic_registration: true`): a public client.
    func register(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        guard settings.dynamicRegistration else {
            throw GatewayError(.notFound, "not_found", "this gateway does not take client registrations; its operator registers clients under authorization_server.clients")
        }
        try limit(request, context)
        try browser.admission.limit(.registrationPerClient, key: browser.admission.clientKey(request, context))
        let body: JSONObject
        do {
            let bytes = try await request.body.collect(upTo: 8 << 10)
            body = try StrictJSONReader().parseObject(Array(buffer: bytes))
        } catch {
            return Self.tokenError(OAuthError("invalid_client_metadata", "the registration must be one strict JSON object of at most 8 KiB"))
        }
        do {
            let (client, issuedAt) = try await tokens.register(try ClientRegistration(body))
            logger.info("client registered", metadata: ["client_id": .string(client.clientID)])
            return JSONBody.response(ClientRegistration.response(for: client, issuedAt: issuedAt), status: .created, noStore: true)
        } catch let error as OAuthError {
            if error.code == "temporarily_unavailable" {
                logger.warning(
                    "client registration refused: authorization_server.max_unused_registrations registrations nobody has used stand already",
                    metadata: ["limit": .stringConvertible(settings.maximumUnusedRegistrations)])
            }
            return Self.tokenError(error)
        }
    }

    /// The MCP resources in force, by canonical URL.
    func resource(_ identifier: String) -> MCPResource? {
        table.current.routes.lazy.compactMap(\.mcp).first { $0.identifier == identifier }
    }

    var resourceIdentifiers: [String] { table.current.routes.compactMap(\.mcp?.identifier) }

    // MARK: Authorization

    /// `GET /api/auth/oauth/authorize`: checks the request, sends an unsigned browser to sign in,
    /// shows the consent page (or skips it for a consent already given), and answers with a code.
    func authorize(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        guard let parameters = try? BrowserSessionRoutes.query(request) else {
            return Self.errorPage(.badRequest, code: "request_invalid", message: "the authorization request must name each parameter once, percent-encoded as UTF-8")
        }
        let checked: AuthorizationRequest
        switch try await validated(parameters, request, context) {
        case .page(let page): return page
        case .redirect(let redirect): return redirect
        case .valid(let valid): checked = valid
        }
        guard let (session, cookieValue) = try await browser.session(request, context) else {
            if checked.prompt.contains("none") {
                return promptNoneRefusal(checked, error: "login_required", description: "the person is not signed in")
            }
            // Sign in first, then back here with the same request.
            return Self.signInFirst(request)
        }
        // Reusing the session for an agent is use: a provider re-check that is due runs first, and a
        // person the provider refuses signs in again (and is refused there) instead of a click.
        if let recheck, session.record.userID.hasPrefix("ext_"), try await recheck.checkInUse(sessionID: session.record.sessionID) == .ended {
            return Self.signInFirst(request)
        }
        let person = Self.person(session)
        let grant = try await store.oauthGrant(userID: person.userID, tenantID: person.tenantID, clientID: checked.client.clientID, resource: checked.resource.identifier)
        // A grant the company's provider made (an identity assertion's) is no consent of the person's.
        let remembered = grant.flatMap { $0.byAssertion ? nil : $0.scope.split(separator: " ").map(String.init) } ?? []
        // A consent given before stands in for a click only where the redirect identifies the
        // client (RFC 8252 §8.6), and not when the client asks for the page (prompt=consent).
        if checked.scopes.allSatisfy(remembered.contains), checked.redirectIdentifiesClient, !checked.prompt.contains("consent") {
            return try await approved(checked, person: person)
        }
        if checked.prompt.contains("none") {
            return promptNoneRefusal(checked, error: "consent_required", description: "the person must allow this on the consent page")
        }
        return ConsentPage.page(
            for: checked, parameters: parameters, person: session.caller, remembered: remembered, nonce: try Self.consentNonce(cookieValue: cookieValue),
            returnTo: request.uri.path + "?" + (request.uri.query ?? ""))
    }

    /// A 303 to sign in, back to this very authorization request afterwards.
    static func signInFirst(_ request: Request) -> Response {
        let rd = request.uri.path + "?" + (request.uri.query ?? "")
        return Response(status: .seeOther, headers: [.location: "/.portcullis/sign_in?rd=" + BrowserSessionRoutes.queryEncoded(rd), .cacheControl: "no-store"])
    }

    /// `prompt=none` when a page would be needed: the error goes back to a configured client; a
    /// self-registered or metadata-document client gets the gateway's own page instead, as for any
    /// error before consent, or anyone could make the gateway a redirector to whatever URI they
    /// registered, without a click (RFC 9700 §4.11.2).
    func promptNoneRefusal(_ request: AuthorizationRequest, error: String, description: String) -> Response {
        guard request.client.source == .configured else {
            return Self.errorPage(.badRequest, code: error, message: description + "; start again from the application")
        }
        return Self.redirect(to: request.redirectURI, ["error": error, "error_description": description, "state": request.state, "iss": tokens.issuer])
    }

    /// The consent form's nonce: bound to the browser session (its cookie is HttpOnly, so a page of
    /// another origin, even same-site, can neither read nor make it).
    static func consentNonce(cookieValue: String) throws -> String {
        String(try Digest.sha256Base64URL("portcullis consent\n" + cookieValue).prefix(32))
    }

    /// Whether a consent post comes from the gateway's own page: `Origin` the public URL's, or no
    /// `Origin` (or `null`) with `Sec-Fetch-Site: same-origin`. Stricter than sign-in's rule: no
    /// `login_return_origins`, no route host.
    func isFromConsentPage(_ request: Request) -> Bool {
        browser.isFromPublicOrigin(request)
    }

    /// `POST /api/auth/oauth/consent`: the person's answer, from the gateway's own page only.
    func consent(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        guard isFromConsentPage(request) else {
            return Self.errorPage(.forbidden, code: "csrf_refused", message: "consent is given on the gateway's own page only; start again from the application")
        }
        guard let form = try? await BrowserSessionRoutes.form(request) else {
            return Self.errorPage(.badRequest, code: "request_invalid", message: "the consent form could not be read; start again from the application")
        }
        var parameters = form
        let decision = parameters.removeValue(forKey: "decision")
        let nonce = parameters.removeValue(forKey: "consent_nonce")
        let checked: AuthorizationRequest
        switch try await validated(parameters, request, context) {
        case .page(let page): return page
        case .redirect(let redirect): return redirect
        case .valid(let valid): checked = valid
        }
        guard let (session, cookieValue) = try await browser.session(request, context) else {
            return Self.errorPage(.unauthorized, code: "not_signed_in", message: "this browser is no longer signed in; start again from the application")
        }
        guard FormNonce.matches(nonce, try? Self.consentNonce(cookieValue: cookieValue)) else {
            return Self.errorPage(.forbidden, code: "csrf_refused", message: "this consent was not given on this browser's own page; start again from the application")
        }
        guard decision == "allow" else {
            return Self.redirect(to: checked.redirectURI, ["error": "access_denied", "error_description": "the person declined", "state": checked.state, "iss": tokens.issuer])
        }
        let person = Self.person(session)
        let now = tokens.now
        let earlier = try await store.oauthGrant(userID: person.userID, tenantID: person.tenantID, clientID: checked.client.clientID, resource: checked.resource.identifier)
        var scopes = earlier.flatMap { $0.byAssertion ? nil : $0.scope.split(separator: " ").map(String.init) } ?? []
        for scope in checked.scopes where !scopes.contains(scope) { scopes.append(scope) }
        try await store.upsertOAuthGrant(
            OAuthGrantRecord(
                userID: person.userID, tenantID: person.tenantID, clientID: checked.client.clientID, clientName: checked.client.name,
                resource: checked.resource.identifier, scope: scopes.joined(separator: " "), createdAt: earlier?.createdAt ?? now, updatedAt: now, byAssertion: false))
        logger.info(
            "consent given",
            metadata: ["user_id": .string(person.userID), "client_id": .string(checked.client.clientID), "resource": .string(checked.resource.identifier)])
        return try await approved(checked, person: person)
    }

    /// The code, sent back to the client with `state` and `iss` (RFC 9207).
    func approved(_ request: AuthorizationRequest, person: OAuthPerson) async throws -> Response {
        let code = try await tokens.issueCode(for: request, person: person)
        return Self.redirect(to: request.redirectURI, ["code": code, "state": request.state, "iss": tokens.issuer])
    }

    enum Validation {
        case valid(AuthorizationRequest)
        case page(Response)
        case redirect(Response)
    }

    /// Both steps of the request's checks: the client and redirect (an error is a page), then the rest (an error goes back).
    func validated(_ parameters: [String: String], _ request: Request, _ context: GatewayRequestContext) async throws -> Validation {
        let client: RegisteredClient
        let redirectURI: String
        // A metadata document is fetched on anybody's say-so: as rate limited as registration.
        if parameters["client_id"]?.hasPrefix("https://") == true { try limit(request, context) }
        let found: RegisteredClient?
        do {
            found = try await parameters["client_id"].asyncMap(tokens.client) ?? nil
        } catch let refusal as UnredirectableAuthorizationError {
            return .page(Self.errorPage(.badRequest, code: refusal.code, message: refusal.message))
        }
        do {
            (client, redirectURI) = try AuthorizationRequest.redirectTarget(parameters, repeated: [], client: found)
        } catch {
            return .page(Self.errorPage(.badRequest, code: error.code, message: error.message))
        }
        do {
            return .valid(try AuthorizationRequest(parameters, repeated: [], client: client, redirectURI: redirectURI, resource: resource))
        } catch {
            // A client nobody vouches for (self-registered, or a metadata document on a wildcard host)
            // could otherwise make the gateway a redirector to any URI it registered (RFC 9700 §4.11.2).
            guard client.source == .configured else {
                return .page(Self.errorPage(.badRequest, code: error.code, message: error.description))
            }
            return .redirect(Self.redirect(to: redirectURI, ["error": error.code, "error_description": error.description, "state": parameters["state"], "iss": tokens.issuer]))
        }
    }

    static func person(_ session: BrowserSession) -> OAuthPerson {
        var claims: JSONObject = [:]
        for name in OAuthPerson.carriedClaims { if let value = session.claims[name] { claims[name] = value } }
        // An address the provider did not verify is not carried: the MCP server could take it for the person's.
        if !EmailDomains.isVerified(claims) { claims["email"] = nil }
        if let issuer = session.record.issuer, let subject = session.record.subject {
            claims["idp_iss"] = .string(issuer)
            claims["idp_sub"] = .string(subject)
        }
        return OAuthPerson(userID: session.record.userID, tenantID: session.record.tenantID, sessionID: session.record.sessionID, claims: claims)
    }

    // MARK: Token and revocation

    /// `POST /api/auth/oauth/token` (form): `authorization_code` or `refresh_token`.
    func token(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try limit(request, context)
        let form: [String: String]
        do {
            form = try await Self.tokenForm(request)
        } catch let error as OAuthError {
            return Self.tokenError(error)
        }
        let sessions = browser.auth.sessionOwners
        let (runtime, admission) = (browser.runtime, browser.admission)
        let recheck = self.recheck
        let sessionIsLive: (String, String, String) async throws -> Bool = { sessionID, userID, tenantID in
            // An agent's refresh is use of the person's session: a provider re-check that is due runs
            // before the answer, and a refusal there ends the session (and this refresh) everywhere.
            if let recheck, userID.hasPrefix("ext_"), try await recheck.checkInUse(sessionID: sessionID) == .ended { return false }
            // The person's session must still be theirs and live: a sign-out or expiry ends the agent's access too.
            return try await sessions.isLive(sessionID, by: Principal(userID: userID, tenantID: tenantID), runtime: runtime, admission: admission)
        }
        let usedBasic = Self.triesBasic(request)
        do {
            let authentication = try ClientAuthentication(authorization: request.headers[.authorization], form: form)
            let clientID = try tokens.authenticate(authentication)
            let answer: OAuthTokenResponse
            switch form["grant_type"] {
            case "authorization_code":
                answer = try await tokens.exchange(
                    code: form["code"], clientID: clientID, redirectURI: form["redirect_uri"], verifier: form["code_verifier"], resource: form["resource"],
                    sessionIsLive: sessionIsLive)
            case "refresh_token":
                answer = try await tokens.refresh(token: form["refresh_token"], clientID: clientID, resource: form["resource"], sessionIsLive: sessionIsLive)
            case OAuthTokenService.jwtBearerGrantType:
                answer = try await assertionGrant(form, clientID: clientID)
            case nil:
                throw OAuthError.invalidRequest("grant_type is required (authorization_code, refresh_token, or \(OAuthTokenService.jwtBearerGrantType))")
            case let other?:
                throw OAuthError(
                    "unsupported_grant_type", "grant_type \(other.prefix(40)) is not supported; use authorization_code, refresh_token, or \(OAuthTokenService.jwtBearerGrantType)")
            }
            var response = JSONBody.response(answer.json, noStore: true)
            response.headers[HTTPField.Name("Pragma")!] = "no-cache"
            return response
        } catch let error as OAuthError {
            return Self.tokenError(error, basic: usedBasic)
        }
    }

    /// `POST /api/auth/oauth/revoke` (form, RFC 7009): 200 whatever the token was.
    func revoke(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try limit(request, context)
        let form: [String: String]
        do {
            form = try await Self.tokenForm(request)
        } catch let error as OAuthError {
            return Self.tokenError(error)
        }
        // RFC 7009 2.1: a confidential client authenticates; a public one names itself, or nothing.
        let clientID: String?
        do {
            clientID = try tokens.authenticate(try ClientAuthentication(authorization: request.headers[.authorization], form: form))
        } catch {
            return Self.tokenError(error, basic: Self.triesBasic(request))
        }
        guard let token = form["token"], !token.isEmpty else { return Self.tokenError(.invalidRequest("token is required")) }
        do {
            try await tokens.revoke(token: token, clientID: clientID, verifier: verifier, resources: resourceIdentifiers)
        } catch let error as OAuthError {
            return Self.tokenError(error, basic: Self.triesBasic(request))
        }
        return Response(status: .ok, headers: [.cacheControl: "no-store", .contentLength: "0"])
    }

    /// The token endpoint's form: `application/x-www-form-urlencoded`, each parameter once, at most 8 KiB.
    static func tokenForm(_ request: Request) async throws -> [String: String] {
        let contentType = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard contentType == "application/x-www-form-urlencoded" else {
            throw OAuthError.invalidRequest("the body must be application/x-www-form-urlencoded (RFC 6749 §3.2)")
        }
        guard let bytes = try? await request.body.collect(upTo: 8 << 10), let fields = FormEncoding.fields(Substring(String(buffer: bytes))) else {
            throw OAuthError.invalidRequest("the form must be at most 8 KiB and name each parameter once, percent-encoded as UTF-8")
        }
        return fields
    }

    /// Whether the client tried `Authorization: Basic`.
    static func triesBasic(_ request: Request) -> Bool {
        ClientAuthentication.isBasic(request.headers[.authorization])
    }

    /// The error's answer; an `invalid_client` of a client that tried `Authorization: Basic`
    /// carries `WWW-Authenticate: Basic` (RFC 6749 section 5.2).
    static func tokenError(_ error: OAuthError, basic: Bool = false) -> Response {
        let status: HTTPResponse.Status =
            switch error.code {
            case "invalid_client": .unauthorized
            case "temporarily_unavailable": .serviceUnavailable
            default: .badRequest
            }
        var response = JSONBody.response(["error": .string(error.code), "error_description": .string(error.description)], status: status, noStore: true)
        response.headers[HTTPField.Name("Pragma")!] = "no-cache"
        if status == .serviceUnavailable { response.headers[.retryAfter] = "60" }
        if basic, error.code == "invalid_client" { response.headers[.wwwAuthenticate] = #"Basic realm="portcullis", charset="UTF-8""# }
        return response
    }

    // MARK: Answers

    /// A 303 to `uri` with `parameters` added to its query (those with a value).
    static func redirect(to uri: String, _ parameters: [String: String?]) -> Response {
        let query = parameters.compactMap { name, value in value.map { name + "=" + BrowserSessionRoutes.queryEncoded($0) } }.sorted().joined(separator: "&")
        let separator = uri.contains("?") ? "&" : "?"
        return Response(status: .seeOther, headers: [.location: uri + separator + query, .cacheControl: "no-store", BrowserSessionRoutes.referrerPolicy: "no-referrer"])
    }

    /// The gateway's own page for a request that cannot go back to its client.
    static func errorPage(_ status: HTTPResponse.Status, code: String, message: String) -> Response {
        SignInPages.refusal(status, title: "Authorization failed", code: code, message: message)
    }
}
