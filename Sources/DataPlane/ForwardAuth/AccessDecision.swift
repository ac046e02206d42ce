import EdgeHTTP
import HTTPTypes
import JOSE
import MCPResource
import NIOCore
import NIOHTTP1
import Observability
import Resilience
import Traces
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import TrafficCop

/// The one access decision an edge in front is answered with (forward-auth, Envoy's ext_authz),
/// made on an event loop as a proxied request is admitted: no hop to the Swift concurrency pool
/// unless memory cannot answer (a token not yet verified, a revocation mirror behind, a session
/// not in the local view).
///
/// By the data plane's own parts: the route table's match, `AccessTokenAuthenticator`, the
/// route's policy, `SessionOwnershipView`, the browser session and its cross-site rule, the
/// assertion, and the identity fields of `ForwardAuthAnswer`. The askers differ only in how they
/// read the question and how they spell the verdict.
package final class AccessDecision {
    private let plane: DataPlane
    private let question: AccessQuestion
    private let fields: RequestFields
    private let eventLoop: any EventLoop
    private let requestID: String
    private var completion: ((AccessVerdict) -> Void)?
    /// The user a verified token or live session proves, for the asker's access line (admitted or refused).
    package private(set) var userID: String?
    package private(set) var userName: String?
    /// The route matched, once it is (for the asker's log and metadata).
    package private(set) var route: DataPlane.Route?
    /// The decision's span (`tracing`), the child of the original request's trace; `nil` when tracing is off.
    private var span: DecisionSpan?

    package init(plane: DataPlane, question: AccessQuestion, eventLoop: any EventLoop, requestID: String) {
        self.plane = plane
        self.question = question
        self.fields = RequestFields(question.headers)
        self.eventLoop = eventLoop
        self.requestID = requestID
    }

    /// Decides on `table`, calling `completion` once: now, or once the store has answered.
    package func decide(table: RouteTable, completion: @escaping (AccessVerdict) -> Void) {
        self.completion = completion
        if let tracer = plane.tracer { startSpan(tracer) }
        let path = question.path
        let host = table.hasHostRoutes ? question.host : nil
        guard let (matched, _) = table.route(host: host, path: path) else {
            return fail(GatewayError(.notFound, "not_found", "no gateway.routes prefix serves \(PathRedaction.redactedPath(String(path)))\(host == nil ? "" : " on that host")"))
        }
        route = matched
        if matched.isMCP, question.asker == .forwardAuth {
            // An MCP server's tokens are bound to it and checked by the data plane (audience, Origin,
            // the challenge naming its metadata): a proxy in front is never asked to admit them.
            return fail(
                GatewayError(
                    .notFound, "not_found",
                    "\(PathRedaction.redactedPath(String(path))) is an MCP server the gateway serves itself; forward-auth does not decide it: send its requests to the gateway"))
        }
        guard matched.allowedMethodNames.contains(question.method.rawValue) else {
            return fail(GatewayError.methodNotAllowed(question.method.rawValue, path: PathRedaction.redactedPath(String(path)), allowed: matched.allowedMethodNames))
        }
        if matched.isMCP, let mcp = matched.mcp {
            // A page of another origin never reaches an MCP server (the transport's rule against DNS rebinding).
            if fields.origin != nil, !mcp.admitsOrigin(fields.origin, allowed: matched.allowedOrigins) {
                return fail(
                    GatewayError(
                        .forbidden, "origin_refused",
                        "this MCP server is called from its own origin (\(mcp.origin)) or one gateway.allowed_origins lists, not from \(fields.origin ?? "")"))
            }
            // Rules per tool are decided on the call's body, and the lists they filter are answers (on a
            // POST's or on the GET stream's): a check carries neither.
            if let policy = matched.mcpPolicy, policy.filtersAnyList {
                return fail(
                    GatewayError(
                        .forbidden, "mcp_rules_need_gateway",
                        "this MCP route has rules per tool, prompt or resource, decided on each call's body and on the lists it answers, which an external check never sees; send this route's requests through the gateway itself"))
            }
        }
        if question.asker == .extAuthz {
            if let refusal = Self.needsGateway(matched, method: question.method) { return fail(refusal) }
        }
        let token: String?
        do {
            token = try matched.bearerToken(fromAuthorization: fields.authorization)
            if token == nil, !matched.requiresToken { return allow(route: matched, caller: nil, sessionID: nil) }
            if token == nil, matched.acceptsSessionCookie { return startWithCookie(route: matched) }
            if let caller = try plane.authenticator.authenticateInMemory(token, resource: matched.mcpIdentifier) {
                return authenticated(caller, route: matched)
            }
        } catch {
            return refused(error)
        }
        // The revocation mirror is stale, or the token not yet verified: the store answers.
        let (authenticator, resource) = (plane.authenticator, matched.mcpIdentifier)
        then(eventLoop.makeFutureWithTask { try await authenticator.authenticate(token, resource: resource) }, call: .tokenCheck) { decision, result in
            switch result {
            case .success(let caller): decision.authenticated(caller, route: matched)
            case .failure(let error): decision.refused(error)
            }
        }
    }

    /// What only the gateway's own proxy can do for a request, refused when an Envoy asks: the
    /// person's credential sent upstream (`upstream_credential`), and the WebDAV methods whose
    /// `Destination` or `Depth` the proxy decides as it decides the target.
    static func needsGateway(_ route: DataPlane.Route, method: HTTPRequest.Method) -> GatewayError? {
        if route.upstreamCredential != nil {
            return GatewayError(
                .forbidden, "upstream_credential_needs_gateway",
                "this route sends the person's own credential upstream (upstream_credential), which only the gateway's proxy does; send this route's requests through the gateway itself")
        }
        if ["COPY", "MOVE", "PROPFIND", "LOCK"].contains(method.rawValue) {
            return GatewayError(
                .forbidden, "webdav_needs_gateway",
                "\(method.rawValue) names other resources (Destination, Depth) that the gateway's proxy decides as it decides the path; send WebDAV requests through the gateway itself")
        }
        return nil
    }

    /// The asker went away: `completion` is not called, whatever the store answers.
    package func cancel() {
        completion = nil
        endSpan(nil)
    }

    /// Runs `body` on the loop once `future` completes; traced, `call` names the span of the wait.
    private func then<T: Sendable>(_ future: EventLoopFuture<T>, call: ExchangeTrace.Call, _ body: @escaping (AccessDecision, Result<T, any Error>) -> Void) {
        guard let span, let tracer = plane.tracer else {
            return future.assumeIsolated().whenComplete { [self] result in body(self, result) }
        }
        let wait = tracer.startClientSpan(call.rawValue, parent: span.span)
        future.assumeIsolated().whenComplete { [self] result in
            wait.end(after: result)
            body(self, result)
        }
    }

    private func refused(_ error: any Error) {
        if let failure = error as? AuthenticationFailure {
            CallerAuthentication.record(failure, in: plane.metrics)
            if let caller = failure.verifiedCaller { nameInAccessLog(caller) }
        }
        failed(error)
    }

    /// Refuses with `error` as the gateway answers it everywhere; one that is no refusal (the
    /// store's, say) is logged by its type and the request id, as the API's routes log it (never
    /// its text, which may quote values).
    private func failed(_ error: any Error) {
        switch error {
        case is GatewayError, is RuntimeRefusal, is AdmissionRefusal, is AuthenticationFailure, is DependencyCircuit.Refusal:
            break
        default:
            plane.logger.error("request failed", metadata: ["request_id": "\(requestID)", "error_type": "\(String(reflecting: type(of: error)))"])
        }
        fail(GatewayError(answering: error))
    }

    /// The route's policy, then the session the request names (in memory, else the Runtime's answer).
    private func authenticated(_ caller: AuthenticatedCaller, route: DataPlane.Route) {
        guard completion != nil else { return }
        nameInAccessLog(caller)
        if let refusal = plane.policyRefusal(route, caller: caller, hasSession: fields.sessionID != nil, requestID: requestID) { return fail(refusal) }
        guard let named = fields.sessionID else { return allow(route: route, caller: caller, sessionID: nil) }
        let sessionID: String
        do {
            sessionID = try GatewayError.checkedSessionID(named)
        } catch {
            return failed(error)
        }
        switch plane.sessionOwnership(sessionID, of: caller, on: eventLoop) {
        case .known(true):
            allow(route: route, caller: caller, sessionID: sessionID)
        case .known(false):
            fail(Self.sessionForbidden)
        case .asking(let read):
            then(read, call: .sessionRead) { decision, result in
                switch result {
                case .success(true): decision.allow(route: route, caller: caller, sessionID: sessionID)
                case .success(false): decision.fail(Self.sessionForbidden)
                case .failure(let error): decision.failed(error)
                }
            }
        }
    }

    // MARK: A browser's session cookie

    /// `auth: browser` asked without a token: the session cookie the asker passed on.
    private func startWithCookie(route: DataPlane.Route) {
        let gate = plane.browser
        switch gate.cookie.sessionValue(in: question.headers["cookie"]) {
        case .none:
            signInNeeded(route: route)
        case .several:
            // Sent twice (one planted by another host under the domain, say): refused, never a sign-in loop.
            fail(
                GatewayError(
                    .badRequest, "session_cookie_ambiguous",
                    "the request carries the session cookie \(gate.cookie.name) more than once; clear this site's cookies and sign in again"))
        case .one(let value):
            let now = gate.clock.now()
            // The lookup keeps a live session from its idle limit, as a proxied request's does.
            switch gate.book.lookup(cookieValue: value, now: now) {
            case .live(let session):
                signedIn(session, cookieValue: value, route: route)
            case .ended:
                signInNeeded(route: route)
            case .unknown:
                // Not the gateway's form: no session (the route answers it so too).
                guard BrowserSessionBook.isWellFormed(value) else { return signInNeeded(route: route) }
                // A store read per cookie never met here: bounded per client, as on the route.
                let load: EventLoopFuture<BrowserSession?>
                do {
                    load = try plane.loadBrowserSession(cookieValue: value, client: question.clientAddress, now: now, on: eventLoop)
                } catch {
                    return failed(error)
                }
                then(load, call: .browserSessionRead) { decision, result in
                    switch result {
                    case .success(let session?): decision.signedIn(session, cookieValue: value, route: route)
                    case .success(nil): decision.signInNeeded(route: route)
                    case .failure(let error): decision.failed(error)
                    }
                }
            }
        }
    }

    /// A live browser session: the gateway session behind it must live, then the cross-site rule and the policy.
    private func signedIn(_ session: BrowserSession, cookieValue: String, route: DataPlane.Route) {
        guard completion != nil else { return }
        let caller = session.caller
        let sessionID = session.record.sessionID
        switch plane.sessionOwnership(sessionID, of: caller, on: eventLoop) {
        case .known(true):
            admitSignedIn(caller, sessionID: sessionID, route: route)
        case .known(false):
            sessionEnded(cookieValue, route: route)
        case .asking(let read):
            then(read, call: .sessionRead) { decision, result in
                switch result {
                case .success(true): decision.admitSignedIn(caller, sessionID: sessionID, route: route)
                case .success(false): decision.sessionEnded(cookieValue, route: route)
                case .failure(let error as RuntimeRefusal) where error.code == .sessionNotFound || error.code == .sessionForbidden:
                    decision.sessionEnded(cookieValue, route: route)
                case .failure(let error): decision.failed(error)
                }
            }
        }
    }

    private func admitSignedIn(_ caller: AuthenticatedCaller, sessionID: String, route: DataPlane.Route) {
        guard completion != nil else { return }
        // A cross-site request carrying the cookie is another site's doing, not the person's: it names nobody.
        if !["GET", "HEAD", "OPTIONS"].contains(question.method.rawValue),
            let refusal = plane.browser.crossSiteRefusal(
                origin: fields.origin, fetchSite: question.headers.first(name: "sec-fetch-site"), host: question.host, allowedOrigins: route.allowedOrigins)
        {
            return fail(refusal)
        }
        nameInAccessLog(caller)
        if let refusal = plane.policyRefusal(route, caller: caller, hasSession: true, requestID: requestID) { return fail(refusal) }
        allow(route: route, caller: caller, sessionID: sessionID)
    }

    /// The gateway session behind a cookie ended (a logout, the provider's, a disabled account): forgotten, and sign in again.
    private func sessionEnded(_ cookieValue: String, route: DataPlane.Route) {
        plane.browser.book.forget(cookieValue: cookieValue)
        signInNeeded(route: route)
    }

    /// No session: 401, with where a navigation signs in.
    private func signInNeeded(route: DataPlane.Route) {
        let refusal = GatewayError(.unauthorized, "token_missing", "sign in: no access token and no session cookie")
        let navigation = BrowserSessionGate.isNavigation(
            method: question.method.rawValue, fetchMode: question.headers.first(name: "sec-fetch-mode"), accept: question.headers["accept"])
        let location = navigation ? plane.browser.signInLocation(host: question.host, path: question.path, query: question.query, provider: route.signIn) : nil
        finish(.denied(refusal, signIn: location))
    }

    /// The access line names the caller a verified token or live session proves, admitted or
    /// refused after (policy, cross-site rule, session's owner, revocation); never one unverified.
    private func nameInAccessLog(_ caller: AuthenticatedCaller) {
        userID = caller.userID
        userName = plane.accessLog.userName(caller.claims)
    }

    static let sessionForbidden = GatewayError(.forbidden, "session_forbidden", "the session belongs to another user or tenant")

    /// Admitted, with the assertion and the identity for the upstream.
    private func allow(route: DataPlane.Route, caller: AuthenticatedCaller?, sessionID: String?) {
        guard completion != nil else { return }
        if let caller { nameInAccessLog(caller) }
        let assertion: String
        do {
            assertion = try plane.runtime.assertions.assertion(
                audience: route.audience,
                caller: caller.map { RuntimeCaller($0, sessionID: sessionID, namingClient: route.isMCP) } ?? RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil))
        } catch {
            return fail(.noSigningKey)
        }
        let appCookie = ForwardAuthAnswer.appCookie(question.headers["cookie"])
        let fields = ForwardAuthAnswer.fields(assertion: assertion, caller: caller, route: route, appCookie: appCookie)
        finish(.allowed(AccessGrant(route: route, caller: caller, sessionID: sessionID, fields: fields)))
    }

    /// Refused; an MCP route's 401 (and scope refusal) names where to get a token (RFC 9728 §5.1).
    private func fail(_ error: GatewayError) {
        var error = error
        if let route, route.isMCP, question.asker == .extAuthz, let mcp = route.mcp, error.status == .unauthorized || error.insufficientScope != nil {
            error.resourceMetadata = mcp.metadataURL
            if error.challengeScope == nil { error.challengeScope = mcp.scope }
        }
        finish(.denied(error, signIn: nil))
    }

    private func finish(_ verdict: AccessVerdict) {
        guard let completion else { return }
        self.completion = nil
        endSpan(verdict)
        completion(verdict)
    }

    /// A span named for the asker and the original method (`ext_authz GET`), the original
    /// request's trace continued: its `traceparent` is among the question's fields.
    private func startSpan(_ tracer: RequestTracer) {
        let asker = question.asker == .forwardAuth ? "forward_auth" : "ext_authz"
        // The asker is a trusted proxy (forward-auth's) or a configured caller (ext_authz's): its trace is
        // continued, its own span's when it names one (Envoy's check), else the original request's.
        let fields =
            question.askerTrace?.traceparent != nil
            ? question.askerTrace ?? TraceContextFields()
            : TraceContextFields.screened(traceparents: question.headers["traceparent"], tracestates: question.headers["tracestate"])
        span = DecisionSpan.start(
            tracer, asker: asker, method: question.method.rawValue, path: question.path, host: question.host, clientAddress: question.clientAddress,
            requestID: requestID, continuing: fields)
    }

    /// Ends the span with the verdict: `allowed`, or the refusal's code and status.
    private func endSpan(_ verdict: AccessVerdict?) {
        guard let span else { return }
        self.span = nil
        let outcome: DecisionSpan.Outcome
        switch verdict {
        case .allowed: outcome = .allowed
        case .denied(let error, _): outcome = .refused(code: error.code, status: Int(error.status.code))
        case nil: outcome = .askerGone
        }
        span.end(outcome, routePrefix: route?.prefix, userID: userID)
    }
}
