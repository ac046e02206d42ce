import DataPlane
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

/// `/.portcullis/*`: a browser signs in (through a provider, or the gateway's own account form
/// when none is configured), is given the session cookie, reads who it is, and signs out.
///
/// Sign-in always runs on the public host, where the provider's callback comes back: a flow's
/// cookie must be there for the callback to read it. Each flow has a cookie of its own (several
/// tabs may sign in at once) holding a secret whose hash the flow keeps: the callback completes
/// only the flow whose browser holds it (no login CSRF, no flow finished in another browser).
struct BrowserSessionRoutes: Sendable {
    let providers: ProviderDirectory
    let trustedIssuers: TrustedIssuers?
    let signIn: ProviderSignIn?
    let store: any LoginFlowRepository & ProviderSessionRepository & ProviderUserRepository & OAuthRepository
    let book: BrowserSessionBook
    let cookie: SessionCookie
    let admission: Admission
    let runtime: RuntimeClient
    let accounts: AccountService
    let auth: AuthRoutes
    let table: LiveRouteTable
    let clock: any TokenClock
    let logger: Logger
    /// `gateway.public_url`, without a trailing `/`, and its host.
    let publicURL: String
    let publicHost: String?
    /// `{public_url}/api/auth/oidc/callback`.
    let redirectURI: String
    /// `gateway.login_return_origins` (or the public URL's origin): where `rd` may point besides route hosts.
    let returnOrigins: [String]
    let defaultTenant: String

    /// Flow cookies a browser may hold at once; a sign-in started past it clears them all (tabs long abandoned).
    static let maximumFlowCookies = 5

    func register(on router: Router<GatewayRequestContext>) {
        router.get("/.portcullis/sign_in") { request, context in try await start(request, context) }
        router.post("/.portcullis/sign_in") { request, context in try await asPage(request) { try await signInWithAccount(request, context) } }
        router.get(RouterPath(SignOutControl.path)) { request, context in try await signOutPage(request, context) }
        router.post(RouterPath(SignOutControl.path)) { request, context in try await asPage(request) { try await signOut(request, context) } }
        router.get("/.portcullis/userinfo") { request, context in try await userinfo(request, context) }
    }

    // MARK: Sign-in

    /// `GET /.portcullis/sign_in?rd=URL[&provider=NAME]`: starts a provider's sign-in, offers the
    /// providers to choose from, or shows the account form.
    func start(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        // On a route host: the same request on the public host, where the flow cookie must live.
        if let onPublicHost = publicHostRedirect(request) { return onPublicHost }
        try admission.limit(.loginPerClient, key: admission.clientKey(request, context))
        // A browser asked: a page says what is wrong, as for every refusal here.
        guard let query = try? Self.query(request) else {
            return SignInPages.failure(.badRequest, code: "invalid_request", message: "The address must name each parameter once, percent-encoded as UTF-8.")
        }
        let rd: SignInRedirect
        do {
            rd = try checkedReturn(query["rd"] ?? "/")
        } catch {
            return SignInPages.failure(.badRequest, code: "redirect_invalid", message: "The page to return to after signing in cannot be used: \(error.message)")
        }
        if providers.isEmpty { return SignInPages.accountForm(rd: rd.target) }
        let provider: ProviderDirectory.Provider
        if let name = query["provider"] {
            guard let named = providers.provider(named: name) else {
                return SignInPages.failure(.notFound, code: "provider_not_found", message: "No provider with that name is configured for sign-in.")
            }
            provider = named
        } else if providers.providers.count == 1, let only = providers.providers.first {
            provider = only
        } else {
            return SignInPages.providerChoice(providers.providers.map { ($0.name, $0.displayName) }, rd: rd.target)
        }
        guard let endpoints = trustedIssuers?.endpoints(issuer: provider.issuer) else {
            return SignInPages.failure(.serviceUnavailable, code: "issuer_unavailable", message: "The identity provider cannot be reached yet; try again shortly.")
        }
        // The flow's session: anonymous now, owned by the user once the callback completes it.
        let anonymous = try await runtime.session(admission.admit(SessionIntent(.createAnonymous)))
        let secret = Base64URL.encode(try SecureRandom.bytes(32))
        let begun: LoginStart
        do {
            begun = try LoginStart(
                provider: provider, endpoints: endpoints, redirectURI: redirectURI, sessionID: anonymous.sessionID, browserReturn: rd,
                loginChallenge: try LoginStart.hash(secret), now: clock.now())
        } catch let refusal as LoginStart.Refusal {
            throw GatewayError(.badRequest, refusal.code, refusal.message)
        }
        try await store.insertLoginFlow(begun.flow)
        var headers: HTTPFields = [.location: begun.authorizationURL, .cacheControl: "no-store", Self.referrerPolicy: "no-referrer"]
        // Past the cap, the flows of tabs long abandoned (their cookies) go; this one's is set after.
        let held = SessionCookie.pairs(request.headers[values: .cookie]).filter { $0.name.hasPrefix(cookie.flowPrefix) }
        if held.count >= Self.maximumFlowCookies {
            for pair in held { headers.append(HTTPField(name: .setCookie, value: cookie.clearing(named: String(pair.name)))) }
        }
        headers.append(
            HTTPField(
                name: .setCookie, value: cookie.settingFlow(Self.flowID(begun.flow.stateHash), value: secret, maxAge: Int(LoginStart.lifetime))))
        logger.info("browser sign-in started", metadata: ["provider": "\(provider.name)"])
        return Response(status: .found, headers: headers)
    }

    /// The part of a flow's state hash its cookie is named by.
    static func flowID(_ stateHash: String) -> String { String(stateHash.prefix(16)) }

    /// The provider's callback for a browser flow: the flow cookie proves this browser started
    /// it; the session is made, the cookie set, and the browser sent to `rd`.
    func completeProvider(_ result: ProviderSignIn.CallbackResult, _ request: Request) async throws -> Response {
        let flowCookie = cookie.flowName(Self.flowID(result.flow.stateHash))
        var cleared = HTTPFields()
        cleared.append(HTTPField(name: .setCookie, value: cookie.clearing(named: flowCookie)))
        func failure(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> Response {
            var response = SignInPages.failure(status, code: code, message: message)
            response.headers.append(contentsOf: cleared)
            return response
        }
        let loginCode: String
        switch result.outcome {
        case .success(let code): loginCode = code
        case .failure(let error):
            return failure(error == .accessDenied ? .forbidden : .badGateway, error.rawValue, Self.message(error))
        }
        let secret = SessionCookie.pairs(request.headers[values: .cookie]).first { $0.name == flowCookie }.map { String($0.value) }
        guard let secret, let signIn else {
            logger.notice("browser sign-in refused: the callback came to a browser without the flow's cookie")
            return failure(
                .badRequest, "flow_cookie_missing",
                "This sign-in was started in another browser, or its cookie has expired. Start the sign-in again from the page you wanted.")
        }
        let identity: ProviderIdentityRecord
        do {
            identity = try await signIn.complete(loginCode: loginCode, sessionID: result.flow.sessionID, loginVerifier: secret)
        } catch let refusal as ProviderSignIn.Refusal {
            logger.notice("browser sign-in refused", metadata: ["why": "\(refusal.code)"])
            return failure(.badRequest, "flow_cookie_mismatch", "This sign-in does not belong to this browser. Start the sign-in again.")
        }
        let userID = try AuthenticatedCaller.externalUserID(issuer: identity.issuer, subject: identity.subject)
        // The operator disabled this person (`users disable`): the provider vouching for them changes nothing.
        if try await store.providerUser(id: userID)?.disabled == true {
            logger.notice("browser sign-in refused: the user is disabled here", metadata: ["user_id": "\(userID)", "provider": "\(identity.provider)"])
            return failure(.forbidden, "account_disabled", Self.disabledMessage)
        }
        let principal = Principal(userID: userID, tenantID: identity.tenantID)
        let granted = try await runtime.session(admission.admit(SessionIntent(.upgrade, principal: principal, sessionID: result.flow.sessionID)))
        let now = clock.now()
        try await store.saveProviderSession(
            ProviderSessionRecord(sessionID: granted.sessionID, userID: userID, identity: identity, createdAt: now, expiresAt: now + book.maximumSeconds))
        // The provider is asked again while the session is in use (its refresh token), as the API's refreshes ask it.
        if identity.sealedRefreshToken != nil { try await store.scheduleProviderRecheck(sessionID: granted.sessionID, at: now + book.recheckSeconds) }
        auth.sessionOwners.remember(granted)
        var claims = Self.identityClaims(signIn.vault.open(identity.sealedIDToken, kind: .idToken, sessionID: granted.sessionID))
        // The provider's entry may vouch for its addresses (emails_verified), as for its tokens.
        if let trust = providers.provider(named: identity.provider)?.trust { claims = trust.vouchingForEmail(claims) }
        try await store.recordProviderUser(ProviderUserRecord(userID: userID, identity: identity, idTokenClaims: claims, at: now))
        let rd = String(result.flow.returnTo.dropFirst(LoginStart.browserReturnPrefix.count))
        var response = try await signedIn(
            sessionID: granted.sessionID, principal: principal, issuer: identity.issuer, subject: identity.subject, provider: identity.provider, claims: claims,
            rd: rd)
        response.headers.append(contentsOf: cleared)
        cleared = [:]
        logger.info("browser sign-in", metadata: ["user_id": "\(userID)", "session_id": "\(granted.sessionID)", "provider": "\(identity.provider)"])
        return response
    }

    /// What a person the operator disabled is told when they sign in through their provider.
    static let disabledMessage =
        "Your access through this gateway has been disabled by its operator. Your identity provider still knows you, but this gateway will not let you in until the operator enables you again."

    /// An ID token's claims, less the ones that belonged to its one sign-in (`nonce`, `at_hash`, `c_hash`).
    static func identityClaims(_ idToken: String?) -> JSONObject {
        guard let idToken, let jws = try? JWSCompact.parse(idToken), var claims = try? StrictJSONReader().parseObject(jws.payload) else { return [:] }
        for name in ["nonce", "at_hash", "c_hash"] { claims[name] = nil }
        return claims
    }

    /// `POST /.portcullis/sign_in` (the account form, when no provider is configured): the same
    /// checks and refusals as `POST /api/auth/login`, then the session cookie.
    func signInWithAccount(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        guard providers.isEmpty else {
            throw GatewayError(.methodNotAllowed, "method_not_allowed", "sign in through the identity provider: GET /.portcullis/sign_in")
        }
        if let refusal = crossSiteRefusal(request) { throw refusal }
        try admission.limit(.loginPerClient, key: admission.clientKey(request, context))
        let form = try await Self.form(request)
        let rd: SignInRedirect
        do {
            rd = try checkedReturn(form["rd"] ?? "/")
        } catch {
            return SignInPages.failure(.badRequest, code: "redirect_invalid", message: "The page to return to after signing in cannot be used: \(error.message)")
        }
        guard let username = form["username"], let password = form["password"], !username.isEmpty, !password.isEmpty else {
            return SignInPages.accountForm(rd: rd.target, error: "Enter your username and password.", status: .badRequest)
        }
        let tenantID = form["tenant"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultTenant
        try admission.limit(.loginPerUsername, key: tenantID + "/" + username)
        guard let user = try await accounts.authenticate(username: username, tenantID: tenantID, password: password) else {
            auth.metrics.loginFailed()
            logger.notice("browser sign-in refused", metadata: ["tenant_id": "\(JSONValue.clip(tenantID))"])
            return SignInPages.accountForm(rd: rd.target, error: GatewayError.invalidCredentials.message, status: .unauthorized)
        }
        let principal = Principal(userID: user.id, tenantID: user.tenantID)
        let granted = try await runtime.session(admission.admit(SessionIntent(.createOwned, principal: principal)))
        auth.sessionOwners.remember(granted)
        logger.info("browser sign-in", metadata: ["user_id": "\(user.id)", "session_id": "\(granted.sessionID)"])
        return try await signedIn(
            sessionID: granted.sessionID, principal: principal, issuer: nil, subject: nil, provider: nil,
            claims: Self.accountClaims(user), rd: rd.target,
            status: .seeOther)
    }

    /// What a browser session of one of the gateway's own accounts says of its person: its groups
    /// (`users groups`) too, carried as a provider's are, so a route's `groups` rule reads both alike.
    static func accountClaims(_ user: UserRecord) -> JSONObject {
        var claims: JSONObject = ["sub": .string(user.id), "tenant_id": .string(user.tenantID), "preferred_username": .string(user.username)]
        if !user.groups.isEmpty { claims["groups"] = .array(user.groups.map(JSONValue.string)) }
        return claims
    }

    /// Makes the browser session, sets its cookie, and sends the browser to `rd`.
    private func signedIn(
        sessionID: String, principal: Principal, issuer: String?, subject: String?, provider: String?, claims: JSONObject, rd: String,
        status: HTTPResponse.Status = .found
    ) async throws -> Response {
        let value = Base64URL.encode(try SecureRandom.bytes(32))
        let now = clock.now()
        let record = BrowserSessionRecord(
            cookieHash: try BrowserSessionBook.hash(value), sessionID: sessionID, userID: principal.userID, tenantID: principal.tenantID, issuer: issuer,
            subject: subject, provider: provider, claims: String(decoding: JSONWriter.bytes(.object(claims)), as: UTF8.self), createdAt: now, lastSeenAt: now,
            expiresAt: now + book.maximumSeconds)
        try await book.insert(record, cookieValue: value, claims: claims)
        return Response(
            status: status,
            headers: [
                .location: rd, .cacheControl: "no-store", Self.referrerPolicy: "no-referrer",
                .setCookie: cookie.setting(value, maxAge: Int(book.maximumSeconds)),
            ])
    }

    // MARK: Signed in

    /// The browser session of a request's cookie, when it has a live one.
    func session(_ request: Request, _ context: GatewayRequestContext) async throws -> (BrowserSession, cookieValue: String)? {
        guard case .one(let value) = cookie.sessionValue(in: request.headers[values: .cookie]) else { return nil }
        let now = clock.now()
        let found: BrowserSession?
        switch book.lookup(cookieValue: value, now: now) {
        case .live(let session): found = session
        case .ended: found = nil
        case .unknown:
            // A store read per cookie never met here: bounded per client, as on a route.
            if BrowserSessionBook.isWellFormed(value) { try admission.limit(.sessionCookieLookupPerClient, key: admission.clientKey(request, context)) }
            found = try await book.load(cookieValue: value, now: now)
        }
        guard let found else { return nil }
        // The gateway session behind it must still live (a logout, a back-channel logout or a disabled account ends it).
        let caller = found.caller
        let owned = try await auth.sessionOwners.isLive(
            found.record.sessionID, by: Principal(userID: caller.userID, tenantID: caller.tenantID), runtime: runtime, admission: admission)
        guard owned else {
            book.forget(cookieValue: value)
            return nil
        }
        return (found, value)
    }

    /// `GET /.portcullis/userinfo`: who the cookie signs in, for the app's own front end.
    func userinfo(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        guard let (session, _) = try await session(request, context) else {
            throw GatewayError(.unauthorized, "not_signed_in", "this browser is not signed in; a navigation to the app signs it in")
        }
        let values = IdentityFieldValues(session.caller)
        var body: JSONObject = [
            "user": .string(values.user), "tenant": .string(values.tenant), "email": .string(values.email), "expires_at": .number(session.record.expiresAt.rounded(.down)),
        ]
        if case .array(let groups)? = session.claims["groups"] { body["groups"] = .array(groups.filter { $0.stringValue != nil }) } else { body["groups"] = .array([]) }
        if !values.username.isEmpty { body["preferred_username"] = .string(values.username) }
        if !values.name.isEmpty { body["name"] = .string(values.name) }
        if !values.subject.isEmpty { body["sub"] = .string(values.subject) }
        return JSONBody.response(.object(body), noStore: true)
    }

    /// `GET /.portcullis/sign_out[?rd=URL]`: the page that says what signing out ends, with its
    /// button (the POST below); without a session, that the browser is signed out. Never a sign-out.
    func signOutPage(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        // A browser asked: a page says what is wrong, as sign-in's does.
        guard let query = try? Self.query(request) else {
            return SignInPages.failure(.badRequest, code: "invalid_request", message: "The address must name each parameter once, percent-encoded as UTF-8.")
        }
        let rd: SignInRedirect
        do {
            rd = try checkedReturn(query["rd"] ?? SignOutControl.signedOutTarget)
        } catch {
            return SignInPages.failure(.badRequest, code: "redirect_invalid", message: "The page to return to after signing out cannot be used: \(error.message)")
        }
        guard let (session, _) = try await session(request, context) else { return SignOutControl.signedOut(rd: rd.target) }
        return SignOutControl.confirmation(person: Self.shownName(session.caller), try await signOutControl(for: session, rd: rd.target))
    }

    /// What a sign-out control for `session` shows and needs: how many agents hold access
    /// through the person's consents, the provider they are signed out at too, where the button
    /// returns to, and the origins its redirects reach (the page's `form-action`).
    ///
    /// With a provider's session the button returns to `{public_url}/`, not `rd`: the provider
    /// sends the browser back only to a post-logout redirect URI registered with it, and that is
    /// the one its guide registers (docs/guides/identity-provider.md).
    func signOutControl(for session: BrowserSession, rd: String) async throws -> SignOutControl.Shape {
        let record = session.record
        let agents = try await store.oauthGrants(userID: record.userID).filter { $0.tenantID == record.tenantID }.count
        var shape = SignOutControl.Shape(agents: agents, provider: nil, returnTo: rd, formTargets: [])
        if let signIn, let providerSession = try await store.providerSession(sessionID: record.sessionID), providerSession.userID == record.userID {
            shape.provider = signIn.directory.provider(named: providerSession.identity.provider)?.displayName
            if let endSession = signIn.endSessionURL(providerSession, postLogoutRedirectURI: publicURL + "/"), let origin = ReturnTarget.origin(of: endSession) {
                shape.returnTo = "/"
                shape.formTargets.append(origin)
            }
        }
        let back = shape.returnTo
        if let origin = ReturnTarget.origin(of: back.hasPrefix("/") ? publicURL : back), !shape.formTargets.contains(origin) { shape.formTargets.append(origin) }
        return shape
    }

    /// How the gateway's pages name a signed-in person: their username, else their email, else their id.
    static func shownName(_ caller: AuthenticatedCaller) -> String {
        caller.claims["preferred_username"]?.stringValue ?? caller.claims["email"]?.stringValue ?? caller.userID
    }

    /// `POST /.portcullis/sign_out[?rd=URL]`: ends the session everywhere, clears the cookie, and
    /// sends the browser to the provider's end-session page (then `rd`) or to `rd`. Same-origin
    /// only: another site can never sign a user out (nor is a GET ever a sign-out).
    func signOut(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        if let refusal = crossSiteRefusal(request) { throw refusal }
        let query = try Self.query(request)
        let rd: SignInRedirect
        do {
            rd = try checkedReturn(query["rd"] ?? "/")
        } catch {
            throw GatewayError(.badRequest, "redirect_invalid", "rd cannot be used: \(error.message)")
        }
        var location = rd.target
        if let (session, value) = try await session(request, context) {
            try await book.end(session, cookieValue: value)
            let record = session.record
            if let providerSession = try await store.providerSession(sessionID: record.sessionID), providerSession.userID == record.userID {
                let back = rd.isRelative ? publicURL + rd.target : rd.target
                if let endSession = signIn?.endSessionURL(providerSession, postLogoutRedirectURI: back) { location = endSession }
                try await auth.providerEnding.end(providerSession, reason: "signed out")
            } else {
                let principal = Principal(userID: record.userID, tenantID: record.tenantID)
                do {
                    _ = try await runtime.session(admission.admit(SessionIntent(.revoke, principal: principal, sessionID: record.sessionID)))
                } catch let refusal as RuntimeRefusal where refusal.code == .sessionNotFound || refusal.code == .sessionForbidden {}
                auth.sessionEnded(record.sessionID, reason: "signed out")
            }
            logger.info("browser sign-out", metadata: ["user_id": "\(record.userID)", "session_id": "\(record.sessionID)"])
        }
        return Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store", .setCookie: cookie.clearing])
    }

    /// A form a person submitted is refused on a page, as every refusal of a sign-in is: the
    /// error's status and code, its sentence, and a link to start again. An app's `fetch` still gets JSON.
    private func asPage(_ request: Request, _ answer: () async throws -> Response) async throws -> Response {
        do {
            return try await answer()
        } catch {
            guard Self.isFormNavigation(request) else { throw error }
            let refusal = GatewayError(answering: error)
            var page = SignInPages.failure(refusal.status, code: refusal.code, message: refusal.message)
            if let seconds = refusal.retryAfter { page.headers[.retryAfter] = String(seconds) }
            return page
        }
    }

    /// Whether a `POST` is a browser's form submission a person sees the answer of (`Sec-Fetch-Mode:
    /// navigate`, or, from a browser that sends no `Sec-Fetch-Mode`, an `Accept` naming `text/html`).
    static func isFormNavigation(_ request: Request) -> Bool {
        BrowserSessionGate.isNavigation(
            method: "GET", fetchMode: request.headers[secFetchMode], accept: request.headers[values: .accept])
    }

    // MARK: Checks

    /// A request for `/.portcullis/sign_in` on another host than the public one: the same on the public host.
    func publicHostRedirect(_ request: Request) -> Response? {
        guard let publicHost, let authority = request.head.authority, let host = RouteHost.requestHost(authority[...]), host != publicHost[...] else {
            return nil
        }
        let target = request.uri.query.map { request.uri.path + "?" + $0 } ?? request.uri.path
        return Response(status: .found, headers: [.location: publicURL + target, .cacheControl: "no-store"])
    }

    /// `rd` checked: a path on the public host, or an https URL (http on loopback) on a route's
    /// host, the public host or a `login_return_origins` origin.
    func checkedReturn(_ text: String) throws(SignInRedirect.Refusal) -> SignInRedirect {
        try Self.checkedReturn(text, table: table.current, publicHost: publicHost, returnOrigins: returnOrigins)
    }

    /// `rd` checked against `table`'s route hosts, the public host and `returnOrigins`.
    static func checkedReturn(_ text: String, table: RouteTable, publicHost: String?, returnOrigins: [String]) throws(SignInRedirect.Refusal) -> SignInRedirect {
        try SignInRedirect.check(
            text, allowedOrigins: Set(returnOrigins),
            acceptsHost: { host in host == publicHost || table.servesHost(host[...]) })
    }

    /// The refusal of a state-changing request from another site: its `Origin` is not the
    /// gateway's public origin (or an allowed one), or it is absent or `null` and `Sec-Fetch-Site`
    /// is not `same-origin`.
    ///
    /// `Origin: null` is what a browser sends for a form posted from a page whose referrer policy
    /// is `no-referrer` (Fetch, "serializing a request origin"), the gateway's own pages before
    /// they said `same-origin`; `Sec-Fetch-Site` is set by the browser alone (no page can forge
    /// it), and a form from another site carries `same-site` or `cross-site` there.
    func crossSiteRefusal(_ request: Request) -> GatewayError? {
        let fetchSite = request.headers[Self.secFetchSite]?.lowercased()
        if let origin = request.headers[.origin], origin != "null" {
            if ReturnTarget.origin(of: publicURL) == origin || returnOrigins.contains(origin) || isOwnOrigin(origin, request) { return nil }
        } else if fetchSite == "same-origin" {
            return nil
        }
        return GatewayError(
            .forbidden, "csrf_refused", "sign-in and sign-out are accepted from the gateway's own pages only (Origin, or Sec-Fetch-Site: same-origin)")
    }

    /// Whether a form post comes from a page of the public origin itself: `Origin` the public
    /// URL's, or no `Origin` (or `null`) with `Sec-Fetch-Site: same-origin`. Stricter than
    /// `crossSiteRefusal`: no `login_return_origins`, no route host (the consent and connect pages').
    func isFromPublicOrigin(_ request: Request) -> Bool {
        if let origin = request.headers[.origin], origin != "null" { return origin == ReturnTarget.origin(of: publicURL) }
        return request.headers[Self.secFetchSite]?.lowercased() == "same-origin"
    }

    /// Whether `origin` is the request's own (`scheme://Host`), on the public host or a route's:
    /// an app on a route host signs its user out from its own pages.
    private func isOwnOrigin(_ origin: String, _ request: Request) -> Bool {
        guard let authority = request.head.authority?.lowercased(), let host = RouteHost.requestHost(authority[...]) else { return false }
        let table = table.current
        guard host == publicHost?[...] || table.servesHost(host) else { return false }
        let scheme = publicURL.lowercased().hasPrefix("https://") ? "https" : "http"
        let defaultPort = scheme == "https" ? ":443" : ":80"
        let bare = authority.hasSuffix(defaultPort) ? String(authority.dropLast(defaultPort.count)) : authority
        return origin.lowercased() == scheme + "://" + bare
    }

    static func message(_ error: ProviderSignIn.CallbackError) -> String {
        switch error {
        case .accessDenied: "The sign-in was declined at the identity provider."
        case .providerUnavailable: "The identity provider cannot be reached right now; try again shortly."
        default: "The identity provider's answer could not be used (\(error.rawValue)). Start the sign-in again."
        }
    }

    static func query(_ request: Request) throws -> [String: String] {
        guard let fields = FormEncoding.fields(Substring(request.uri.query ?? "")) else {
            throw GatewayError.invalidRequest("the query must name each parameter once, percent-encoded as UTF-8")
        }
        return fields
    }

    static func form(_ request: Request) async throws -> [String: String] {
        let contentType = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard contentType == "application/x-www-form-urlencoded" else {
            throw GatewayError.invalidRequest("the sign-in form is sent as application/x-www-form-urlencoded")
        }
        let bytes: ByteBuffer
        do {
            bytes = try await request.body.collect(upTo: 8 << 10)
        } catch {
            throw GatewayError(.contentTooLarge, "payload_too_large", "a sign-in form is limited to 8192 bytes")
        }
        guard let fields = FormEncoding.fields(Substring(String(decoding: bytes.readableBytesView, as: UTF8.self))) else {
            throw GatewayError.invalidRequest("the form must name each field once, percent-encoded as UTF-8")
        }
        return fields
    }

    /// `text` percent-encoded for a query value.
    static func queryEncoded(_ text: String) -> String { BrowserSessionGate.percentEncoded(text) }

    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
    static let secFetchMode = HTTPField.Name("Sec-Fetch-Mode")!
}
