import ConnectedAccounts
import EdgeHTTP
import HTTPTypes
import Hummingbird
import JOSE
import Logging
import SecurityGuard

/// `/.portcullis/connect/*`: a signed-in person connects a service (`connections`) once, the
/// gateway their OAuth client there.
///
/// `GET /.portcullis/connect/{name}` is a page that says what connecting gives and to whom, with a
/// button; its POST (same-origin, with a nonce bound to the browser's session cookie) starts the
/// code flow and sends the browser to the service. The service sends it back to
/// `GET /.portcullis/connect/callback`, which completes only the flow this browser started for
/// this person: a code can never land in another person's account.
struct ConnectRoutes: Sendable {
    let accounts: ConnectedAccountService
    /// This instance's cached connected tokens: a disconnect asked here drops them before it
    /// answers, not at the next tick of the access-change feed. (Its requests under way end at
    /// that tick, as every instance's do: ended here too, the feed's own echo would then end the
    /// requests that came after the answer and were being refused, with the wrong error.)
    let connectedTokens: ConnectedTokenCache
    let browser: BrowserSessionRoutes
    let clock: any TokenClock
    let logger: Logger

    static let prefix = "/.portcullis/connect"

    func register(on router: Router<GatewayRequestContext>) {
        // The callback first: `{name}` would otherwise take "callback".
        router.get(RouterPath(ConnectedAccountService.callbackPath)) { request, context in try await asPage { try await callback(request, context) } }
        router.get(RouterPath(Self.prefix + "/:name")) { request, context in try await asPage { try await page(request, context) } }
        router.post(RouterPath(Self.prefix + "/:name")) { request, context in try await asPage { try await start(request, context) } }
        router.post(RouterPath(Self.prefix + "/:name/disconnect")) { request, context in try await asPage { try await disconnect(request, context) } }
        router.get(RouterPath(Self.prefix + "/:name/connected")) { request, context in try await asPage { try await connectedPage(request, context) } }
    }

    /// A request these pages cannot read (its query, its rd) is answered with a page, as a person sees it.
    private func asPage(_ answer: () async throws -> Response) async throws -> Response {
        do {
            return try await answer()
        } catch let refusal as GatewayError where refusal.status == .badRequest || refusal.code == "connect_elicitation_other_person" {
            return Self.errorPage(refusal.status, refusal.code, refusal.message)
        }
    }

    /// Whether a POST comes from the gateway's own page on the public host: its `Origin` is the
    /// public origin (or absent or `null`, with `Sec-Fetch-Site: same-origin`), and it was sent to
    /// the public host. Stricter than sign-out's rule: an app on a route host could read a
    /// connect page's nonce from its own origin and post it, connecting an account without a
    /// click where the service approves at once.
    private func isFromPublicPage(_ request: Request) -> Bool {
        browser.publicHostRedirect(request) == nil && browser.isFromPublicOrigin(request)
    }

    /// The form's nonce: bound to the browser session's cookie and the connection, as the agents page's is.
    static func nonce(cookieValue: String, connection: String) throws -> String {
        String(try Digest.sha256Base64URL("portcullis connect\n" + connection + "\n" + cookieValue).prefix(32))
    }

    /// `/.portcullis/connect/NAME[PAGE]?rd=RD`: a connection's page, `rd` percent-encoded.
    static func path(_ name: String, _ page: String = "", rd: String) -> String {
        prefix + "/" + name + page + "?rd=" + BrowserSessionRoutes.queryEncoded(rd)
    }

    /// The connection a path names; a 404 page for any other name.
    private func connection(_ context: GatewayRequestContext) -> ConnectionDirectory.Connection? {
        context.parameters.get("name").flatMap { accounts.directory.connection(named: $0) }
    }

    /// Where the browser goes once connected: `rd` when the sign-in rules take it, else the agents page.
    private func returnTarget(_ request: Request) throws -> String {
        guard let rd = try BrowserSessionRoutes.query(request)["rd"] else { return AgentAccessPage.path }
        do {
            return try browser.checkedReturn(rd).target
        } catch {
            throw GatewayError(.badRequest, "redirect_invalid", "rd must be a path on this gateway, a route's host or an allowed origin")
        }
    }

    /// Checks the `elicitation` an MCP client's link carries, if any: it must be live and made for
    /// this person and connection. It is used up when the person connects (the store
    /// completes every elicitation of theirs at the connection then), not when they start: a
    /// connect abandoned at the service can be started again from the same link.
    ///
    /// - Throws: a refusal page's `GatewayError`: 400 `connect_elicitation_unknown` for a link unknown,
    ///   used or expired; 403 `connect_elicitation_other_person` for one made for someone else.
    private func checkElicitation(_ request: Request, owner: ConnectionTokenVault.Owner) async throws {
        guard let id = try BrowserSessionRoutes.query(request)["elicitation"] else { return }
        guard let found = try await accounts.elicitation(id: id, now: clock.now()) else {
            throw GatewayError(
                .badRequest, "connect_elicitation_unknown", "this link is unknown, used or more than ten minutes old; ask your agent to try again and open its new link")
        }
        guard found.userID == owner.userID, found.tenantID == owner.tenantID, found.connection == owner.connection else {
            logger.notice("connect link of another person", metadata: ["user_id": .string(owner.userID), "connection": .string(owner.connection)])
            throw GatewayError(
                .forbidden, "connect_elicitation_other_person",
                "this link was made for another person signed in here, or for another service: open the link your own agent gave you, in your own browser")
        }
    }

    /// `GET /.portcullis/connect/{name}[?rd=URL][&elicitation=ID]`: what connecting gives, and the
    /// button; an unsigned browser signs in first and comes back. A link an MCP client was given
    /// (`elicitation`) opens only for the person it was made for.
    func page(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        // On the public host only (where the callback comes back), as sign-in is.
        if let onPublicHost = browser.publicHostRedirect(request) { return onPublicHost }
        guard let connection = connection(context) else { return Self.notFound() }
        let rd = try returnTarget(request)
        let elicitationQuery = try BrowserSessionRoutes.query(request)["elicitation"].map { "&elicitation=" + BrowserSessionRoutes.queryEncoded($0) } ?? ""
        guard let (session, cookieValue) = try await browser.session(request, context) else {
            let here = Self.path(connection.settings.name, rd: rd) + elicitationQuery
            return Response(status: .seeOther, headers: [.location: "/.portcullis/sign_in?rd=" + BrowserSessionRoutes.queryEncoded(here), .cacheControl: "no-store"])
        }
        let settings = connection.settings
        let scopes = settings.scopes.isEmpty ? "<em>what the service grants by default</em>" : settings.scopes.map { "<code>\(RefusalPage.escaped($0))</code>" }.joined(separator: " ")
        let owner = ConnectionTokenVault.Owner(userID: session.caller.userID, tenantID: session.caller.tenantID, connection: settings.name)
        try await checkElicitation(request, owner: owner)
        let connected = try await accounts.account(for: owner) != nil
        let action = Self.path(settings.name, rd: rd) + elicitationQuery
        var response = SignInPages.response(
            .ok, title: "Connect \(settings.displayName)",
            body: """
                <p>Signed in as <strong>\(RefusalPage.escaped(BrowserSessionRoutes.shownName(session.caller)))</strong>.</p>
                <p>Connecting \(RefusalPage.escaped(settings.displayName)) lets the tools you use through this gateway act as you there, with: \(scopes).
                The gateway keeps its tokens sealed and sends them only to those tools; you can disconnect at any time on <a href="\(AgentAccessPage.path)">the agents page</a>.</p>
                \(connected ? "<p role=\"status\">Already connected; connecting again replaces the access the gateway holds.</p>" : "")
                <form method="post" action="\(RefusalPage.escaped(action))">
                <input type="hidden" name="nonce" value="\(RefusalPage.escaped(try Self.nonce(cookieValue: cookieValue, connection: settings.name)))">
                <button type="submit" id="connect">Connect \(RefusalPage.escaped(settings.displayName))</button>
                </form>
                """)
        // No form-action: CSP3 holds a form's whole redirect chain to it, and a service's authorization
        // endpoint may send the browser on to another origin of its own. The page carries nothing injected.
        response.headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
        return response
    }

    /// `POST /.portcullis/connect/{name}`: from the gateway's own page only; the flow is kept and
    /// the browser sent to the service.
    func start(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        guard let connection = connection(context) else { return Self.notFound() }
        guard isFromPublicPage(request) else {
            return Self.errorPage(.forbidden, "csrf_refused", "an account is connected from the gateway's own page only; open it again")
        }
        // Each start writes a flow and, at its callback, costs the service a code exchange: bounded per client, as sign-in is.
        try browser.admission.limit(.loginPerClient, key: browser.admission.clientKey(request, context))
        let rd = try returnTarget(request)
        guard let form = try? await BrowserSessionRoutes.form(request) else {
            return Self.errorPage(.badRequest, "request_invalid", "the form could not be read; open the connect page again")
        }
        guard let (session, cookieValue) = try await browser.session(request, context) else {
            return Self.errorPage(.unauthorized, "not_signed_in", "this browser is no longer signed in; sign in and open the connect page again")
        }
        guard FormNonce.matches(form["nonce"], try? Self.nonce(cookieValue: cookieValue, connection: connection.settings.name)) else {
            return Self.errorPage(.forbidden, "csrf_refused", "this did not come from this browser's own connect page; open it again")
        }
        let owner = ConnectionTokenVault.Owner(userID: session.caller.userID, tenantID: session.caller.tenantID, connection: connection.settings.name)
        try await checkElicitation(request, owner: owner)
        let url = try await accounts.start(connection, owner: owner, cookieHash: try BrowserSessionBook.hash(cookieValue), returnTo: rd, now: clock.now())
        return Response(status: .seeOther, headers: [.location: url, .cacheControl: "no-store"])
    }

    /// `GET /.portcullis/connect/callback?state=...&code=...`: completes the flow this browser
    /// started; the tokens are sealed and kept, and the browser is sent (303) to a page that says so.
    ///
    /// Sent on rather than answered here, so that the address left in the browser's history and
    /// address bar holds no code or state, and a reload shows the page again instead of refusing a
    /// spent callback.
    func callback(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try browser.admission.limit(.loginPerClient, key: browser.admission.clientKey(request, context))
        guard let query = try? BrowserSessionRoutes.query(request) else {
            return Self.errorPage(.badRequest, "request_invalid", "this way back from the service could not be read (a parameter named twice, or not percent-encoded UTF-8); start connecting again")
        }
        guard let state = query["state"], !state.isEmpty else {
            return Self.errorPage(.badRequest, "request_invalid", "this is the service's way back to the gateway and it came without its state; start connecting again")
        }
        guard let (session, cookieValue) = try await browser.session(request, context) else {
            return Self.errorPage(.unauthorized, "not_signed_in", "this browser is not signed in to the gateway; sign in, then start connecting again")
        }
        let completed: ConnectedAccountService.Completed
        do {
            completed = try await accounts.complete(
                state: state, code: query["code"], error: query["error"], iss: query["iss"], cookieHash: try BrowserSessionBook.hash(cookieValue), userID: session.caller.userID,
                tenantID: session.caller.tenantID, now: clock.now())
        } catch let error as ConnectError {
            logger.notice("connection refused", metadata: ["code": .string(error.code), "user_id": .string(session.caller.userID)])
            return Self.errorPage(HTTPResponse.Status(code: error.status), error.code, error.message)
        }
        logger.info(
            "account connected",
            metadata: ["connection": .string(completed.connection.name), "user_id": .string(session.caller.userID), "scope": .string(completed.account.scope)])
        let page = Self.path(completed.connection.name, "/connected", rd: completed.returnTo)
        return Response(status: .seeOther, headers: [.location: page, .cacheControl: "no-store"])
    }

    /// `GET /.portcullis/connect/{name}/connected?rd=URL`: where the callback sends the browser; says
    /// the service is connected, with a link on to `rd`. A person who has no account there (they
    /// disconnected since, or opened the address by hand) is sent to the connect page instead.
    func connectedPage(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        if let onPublicHost = browser.publicHostRedirect(request) { return onPublicHost }
        guard let connection = connection(context) else { return Self.notFound() }
        let rd = try returnTarget(request)
        guard let (session, _) = try await browser.session(request, context) else {
            return Self.errorPage(.unauthorized, "not_signed_in", "this browser is not signed in to the gateway; sign in to see your connected services on the agents page")
        }
        let owner = ConnectionTokenVault.Owner(userID: session.caller.userID, tenantID: session.caller.tenantID, connection: connection.settings.name)
        guard try await accounts.account(for: owner) != nil else {
            let connect = Self.path(connection.settings.name, rd: rd)
            return Response(status: .seeOther, headers: [.location: connect, .cacheControl: "no-store"])
        }
        return SignInPages.response(
            .ok, title: "\(connection.settings.displayName) connected",
            body: """
                <p>The tools you use through this gateway can now act as you at \(RefusalPage.escaped(connection.settings.displayName)).</p>
                <p><a id="continue" href="\(RefusalPage.escaped(rd))">Continue</a></p>
                """)
    }

    /// `POST /.portcullis/connect/{name}/disconnect`: from the agents page only (its nonce); the
    /// tokens are forgotten at once, and the service told where it can (RFC 7009).
    func disconnect(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        guard let name = context.parameters.get("name"), ConnectionSettings.isValidName(name) else { return Self.notFound() }
        // Sign-out's rule (the agents page may be on a route host): a disconnect gives nobody anything.
        if browser.crossSiteRefusal(request) != nil {
            return Self.errorPage(.forbidden, "csrf_refused", "an account is disconnected on the gateway's own agents page only; open it again")
        }
        guard let form = try? await BrowserSessionRoutes.form(request) else {
            return Self.errorPage(.badRequest, "request_invalid", "the form could not be read; open the agents page again")
        }
        guard let (session, cookieValue) = try await browser.session(request, context) else {
            return Self.errorPage(.unauthorized, "not_signed_in", "this browser is no longer signed in; sign in and open the agents page again")
        }
        guard FormNonce.matches(form["nonce"], try? AuthorizationServerRoutes.agentsNonce(cookieValue: cookieValue)) else {
            return Self.errorPage(.forbidden, "csrf_refused", "this did not come from this browser's own agents page; open it again")
        }
        let owner = ConnectionTokenVault.Owner(userID: session.caller.userID, tenantID: session.caller.tenantID, connection: name)
        let cache = connectedTokens
        let outcome = try await accounts.disconnect(owner, now: clock.now()) {
            cache.forget(userID: owner.userID, tenantID: owner.tenantID, connection: owner.connection)
        }
        var metadata: Logger.Metadata = ["connection": .string(name), "user_id": .string(owner.userID)]
        if case .failed(let why)? = outcome { metadata["service_revocation_failed"] = .string(why) }
        if outcome != nil { logger.info("account disconnected", metadata: metadata) }
        return Response(status: .seeOther, headers: [.location: AgentAccessPage.path + "?done=" + (outcome == nil ? "gone" : "disconnected"), .cacheControl: "no-store"])
    }

    static func notFound() -> Response {
        errorPage(.notFound, "connection_unknown", "no connection has that name; the operator lists them under connections in the configuration")
    }

    static func errorPage(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> Response {
        SignInPages.refusal(status, title: "Connecting failed", code: code, message: message)
    }
}
