import DataPlane
import EdgeHTTP
import HTTPTypes
import Hummingbird
import JOSE
import Observability
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import Traces
import TrafficCop

/// `/api/auth/verify`: forward-auth for a proxy in front (nginx `auth_request`, Caddy
/// `forward_auth`, Traefik `forwardAuth`): the decision a proxied request would get, for a
/// request described by the proxy's headers, without forwarding anything.
struct ForwardAuthRoutes: Sendable {
    /// The routes in force (a reload may change them), read once per decision.
    let table: LiveRouteTable
    let authentication: CallerAuthentication
    let admission: Admission
    let runtime: RuntimeClient
    let sessionOwners: SessionOwnershipView
    let metrics: GatewayMetrics
    /// Which names carry the original request, per proxy (`gateway.forward_auth`).
    let proxies: ForwardAuthProxies
    /// Browser sessions, for `auth: browser` routes asked without a token.
    let browser: BrowserSessionRoutes
    let gate: BrowserSessionGate

    static let path = "/api/auth/verify"

    func register(on router: Router<GatewayRequestContext>) {
        // Any method: nginx's auth_request sends the original method's subrequest as GET; Caddy and Traefik keep it.
        for method in [HTTPRequest.Method.get, .head, .post, .put, .patch, .delete, .options] {
            router.on(RouterPath(Self.path), method: method) { request, context in
                guard let span = CurrentRouteSpan.current?.span else { return try await verify(request, context) }
                do {
                    let response = try await verify(request, context)
                    // Not 200: a navigation without a session sent to sign in (401 or 302), as the event loop records it.
                    span.set { $0[TraceAttribute.decision] = response.status == .ok ? "allowed" : "token_missing" }
                    return response
                } catch {
                    // As the client's JSON `error` says; anything else is answered 503 unavailable.
                    let code = RequestObservationMiddleware.refusal(error)?.code ?? "unavailable"
                    span.set { $0[TraceAttribute.decision] = code }
                    throw error
                }
            }
        }
    }

    /// Names the request's span as forward-auth's decision on the original request.
    private func describeSpan(_ request: Request, _ context: GatewayRequestContext, original: ForwardAuthOriginal, host: String?, family: ForwardAuthHeaderFamily) {
        guard let current = CurrentRouteSpan.current else { return }
        current.markDecision()
        let span = current.span
        let headers = request.headers
        let named = host ?? (try? ForwardAuthOriginal.host(family: family) { headers[values: $0] })
        DecisionSpan.describe(
            span, asker: "forward_auth", method: original.method.rawValue, path: original.path, host: named, clientAddress: admission.clientAddress(request, context),
            requestID: nil)
    }

    /// The route and the user on the decision's span, once known (`tracing` on, this request recorded).
    static func noteOnSpan(routePrefix: String? = nil, userID: String? = nil) {
        guard let span = CurrentRouteSpan.current?.span else { return }
        DecisionSpan.note(span, routePrefix: routePrefix, userID: userID)
    }

    /// 200 with the identity for the proxy to pass on, or the refusal the route itself would answer.
    func verify(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        // The original-request fields are believed from the proxies in front only: anybody else
        // could name any request and learn, or obtain an assertion for, what it would get.
        guard let peer = context.peerAddress, admission.clientAddresses.isTrustedProxy(peer) else {
            throw GatewayError(
                .forbidden, "forward_auth_untrusted_peer",
                "forward-auth answers only the proxies listed in gateway.trusted_proxies; add the proxy's address there")
        }
        let family = proxies.family(for: peer)
        let headers = request.headers
        let values: (HTTPField.Name) -> [String] = { headers[values: $0] }
        let original = try ForwardAuthOriginal(family: family, values: values)
        let (path, method) = (original.path, original.method)
        let table = table.current
        // The data plane's own match, on the same table; by host too once a route is bound to one.
        let host = table.hasHostRoutes ? try ForwardAuthOriginal.host(family: family, values: values) : nil
        describeSpan(request, context, original: original, host: host, family: family)
        guard let (route, _) = table.route(host: host, path: path) else {
            throw GatewayError(.notFound, "not_found", "no gateway.routes prefix serves \(PathRedaction.redactedPath(String(path)))\(host == nil ? "" : " on that host")")
        }
        // An MCP server's tokens are bound to it and checked by the data plane (audience, Origin,
        // the challenge naming its metadata): a proxy in front is never asked to admit them.
        guard route.mcp == nil else {
            throw GatewayError(
                .notFound, "not_found",
                "\(PathRedaction.redactedPath(String(path))) is an MCP server the gateway serves itself; forward-auth does not decide it: send its requests to the gateway")
        }
        Self.noteOnSpan(routePrefix: route.prefix)
        guard route.allowedMethodNames.contains(method.rawValue) else {
            throw GatewayError.methodNotAllowed(method.rawValue, path: PathRedaction.redactedPath(String(path)), allowed: route.allowedMethodNames)
        }
        let authorization = request.headers[.authorization]
        let token: String?
        do {
            token = try route.bearerToken(fromAuthorization: authorization)
        } catch let failure as AuthenticationFailure {
            // Counted as every refused token is (the event loop's decisions count it too).
            CallerAuthentication.record(failure, in: metrics)
            throw failure
        }
        if token == nil, !route.requiresToken {
            let assertion = try assertion(for: route, caller: RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil))
            // Every identity field, empty: a proxy that copies a field the answer lacks may send its
            // own placeholder, or the client's copy, upstream instead (Caddy 2.6).
            return Response(status: .ok, headers: Self.identityFields(assertion: assertion, caller: nil, route: route, appCookie: Self.appCookie(request)))
        }
        if token == nil, route.acceptsSessionCookie {
            return try await verifyBrowser(request, context, route: route, path: path, method: method, host: host, family: family)
        }
        let caller = try await authentication.requireCaller(request)
        Self.noteOnSpan(userID: caller.userID)
        let sessionHeader = request.headers[Header.sessionID]
        if let policy = route.policy,
            let refusal = policy.refusal(claims: caller.claims, tenantID: caller.tenantID, issuer: caller.external?.issuer, hasSession: sessionHeader != nil)
        {
            metrics.policyRefused()
            logRefusal(refusal, route: route, caller: caller)
            throw GatewayError(refusedBy: refusal)
        }
        var sessionID: String? = nil
        if let sessionHeader {
            let checked = try GatewayError.checkedSessionID(sessionHeader)
            var owned = sessionOwners.isOwned(checked, by: caller.userID, tenantID: caller.tenantID)
            if owned == nil {
                let principal = Principal(userID: caller.userID, tenantID: caller.tenantID)
                owned = try await sessionOwners.askRuntime(checked, by: principal, runtime: runtime, admission: admission)
            }
            guard owned == true else { throw GatewayError(.forbidden, "session_forbidden", "the session belongs to another user or tenant") }
            sessionID = checked
        }
        let assertion = try assertion(for: route, caller: RuntimeCaller(caller, sessionID: sessionID))
        return Response(status: .ok, headers: Self.identityFields(assertion: assertion, caller: caller, route: route, appCookie: Self.appCookie(request)))
    }

    /// The request's `Cookie` without the gateway's cookies, for the proxy to send the app.
    static func appCookie(_ request: Request) -> String {
        ForwardAuthAnswer.appCookie(request.headers[values: .cookie])
    }

    /// An `auth: browser` route asked without a token: the session cookie the proxy passed on.
    ///
    /// Signed in: the cross-site rule (with the original method, and the `Origin` the proxy passed
    /// on), the policy, then 200 with the identity. Not signed in, for a navigation: nginx is
    /// answered 401 with `X-Portcullis-Sign-In` (its `error_page 401` sends the browser there),
    /// Caddy and Traefik a 302 they relay; anything else 401 JSON.
    func verifyBrowser(
        _ request: Request, _ context: GatewayRequestContext, route: DataPlane.Route, path: Substring, method: HTTPRequest.Method, host: String?,
        family: ForwardAuthHeaderFamily
    ) async throws -> Response {
        let headers = request.headers
        let originalHost = host ?? (try? ForwardAuthOriginal.host(family: family) { headers[values: $0] })
        // Sent twice (one planted by another host under the domain, say): refused as on the data plane, never a sign-in loop.
        if case .several = gate.cookie.sessionValue(in: request.headers[values: .cookie]) {
            throw GatewayError(
                .badRequest, "session_cookie_ambiguous",
                "the request carries the session cookie \(gate.cookie.name) more than once; clear this site's cookies and sign in again")
        }
        guard let (session, _) = try await browser.session(request, context) else {
            let refusal = GatewayError(.unauthorized, "token_missing", "sign in: no access token and no session cookie")
            let navigation = BrowserSessionGate.isNavigation(
                method: method.rawValue, fetchMode: request.headers[Header.fetchMode], accept: request.headers[values: .accept])
            let query = request.headers[family.uriField].flatMap { uri in uri.firstIndex(of: "?").map { uri[uri.index(after: $0)...] } }
            if navigation, let location = gate.signInLocation(host: originalHost, path: path, query: query, provider: route.signIn) {
                if family == .forwarded {
                    return Response(status: .found, headers: [.location: location, .cacheControl: "no-store"])
                }
                var response = refusal.response()
                response.headers[Header.signIn] = location
                return response
            }
            throw refusal
        }
        let caller = session.caller
        Self.noteOnSpan(userID: caller.userID)
        if !["GET", "HEAD", "OPTIONS"].contains(method.rawValue),
            let refusal = gate.crossSiteRefusal(
                origin: request.headers[.origin], fetchSite: request.headers[Header.fetchSite], host: originalHost, allowedOrigins: route.allowedOrigins)
        {
            throw refusal
        }
        if let policy = route.policy, let refusal = policy.refusal(claims: caller.claims, tenantID: caller.tenantID, issuer: caller.external?.issuer, hasSession: true) {
            metrics.policyRefused()
            logRefusal(refusal, route: route, caller: caller)
            throw GatewayError(refusedBy: refusal)
        }
        let assertion = try assertion(for: route, caller: RuntimeCaller(caller, sessionID: session.record.sessionID))
        return Response(status: .ok, headers: Self.identityFields(assertion: assertion, caller: caller, route: route, appCookie: Self.appCookie(request)))
    }

    /// What would have passed (a claim rule's), for the operator's log alone.
    private func logRefusal(_ refusal: RoutePolicy.Refusal, route: DataPlane.Route, caller: AuthenticatedCaller) {
        guard let detail = refusal.detail else { return }
        browser.logger.notice("route refused", metadata: ["route": "\(route.template)", "user_id": "\(caller.userID)", "why": "\(detail)"])
    }

    /// A 200's fields (`ForwardAuthAnswer`, which the event loop's decisions answer with too).
    static func identityFields(assertion: String, caller: AuthenticatedCaller?, route: DataPlane.Route? = nil, appCookie: String = "") -> HTTPFields {
        var fields = HTTPFields()
        for field in ForwardAuthAnswer.fields(assertion: assertion, caller: caller, route: route, appCookie: appCookie) {
            if let name = HTTPField.Name(field.name) { fields.append(HTTPField(name: name, value: field.value)) }
        }
        return fields
    }

    /// The header names read and written here (valid field names: the unwraps cannot fail).
    enum Header {
        static let sessionID = HTTPField.Name("X-Session-Id")!
        /// Where a navigation without a session signs in (nginx's `error_page 401` reads it).
        static let signIn = HTTPField.Name("X-Portcullis-Sign-In")!
        static let fetchMode = HTTPField.Name("Sec-Fetch-Mode")!
        static let fetchSite = HTTPField.Name("Sec-Fetch-Site")!
    }

    private func assertion(for route: DataPlane.Route, caller: RuntimeCaller) throws -> String {
        do {
            return try runtime.assertions.assertion(audience: route.audience, caller: caller)
        } catch {
            throw GatewayError.noSigningKey
        }
    }
}
