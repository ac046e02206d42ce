import EdgeHTTP
import HTTPTypes
import JOSE
import NIOCore
import NIOHTTP1
import Observability
import Resilience
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import TrafficCop

/// One `/api/auth/verify` decision made on the connection's event loop, as a proxied request is
/// admitted: no hop to the Swift concurrency pool unless memory cannot answer (a token not yet
/// verified, a revocation mirror behind, a session not in the local view).
///
/// The decision is the one Hummingbird's route makes, by the same parts: the original request
/// read by `ForwardAuthOriginal`, the route table's match, `AccessTokenAuthenticator`, the route's
/// policy, `SessionOwnershipView`, the assertion, and the 200's fields from `ForwardAuthAnswer`.
/// A browser's session cookie (an `auth: browser` route asked without a token) is decided here
/// too, as Hummingbird's route decides it: the session from memory (the store once per cookie
/// not met), the gateway session behind it, the cross-site rule with the original method, the
/// policy; without a session, a navigation is sent to sign in (nginx: 401 with
/// `X-Portcullis-Sign-In`; Caddy and Traefik: 302).
final class ForwardAuthExchange {
    /// The path forward-auth answers (exactly; any other spelling is Hummingbird's to answer).
    static let path = "/api/auth/verify"

    private let handler: ProxyFrontHandler
    private let plane: DataPlane
    private let proxies: ForwardAuthProxies
    private let head: HTTPRequestHead
    private let fields: RequestFields
    private let eventLoop: any EventLoop
    private let requestID: String
    private let started = ContinuousClock.now
    private var finished = false
    private var userID: String?
    private var userName: String?
    /// `gateway.allowed_origins` of the table the decision was made on (CORS on its answer).
    private var allowedOrigins: Set<String> = []
    /// What the proxy named: the original request, its host field (when given once) and the family read.
    private var original: ForwardAuthOriginal?
    private var originalHost: String?
    private var family = ForwardAuthHeaderFamily.nginx

    init(handler: ProxyFrontHandler, plane: DataPlane, proxies: ForwardAuthProxies, head: HTTPRequestHead, eventLoop: any EventLoop) {
        self.handler = handler
        self.plane = plane
        self.proxies = proxies
        self.head = head
        self.fields = RequestFields(head.headers)
        self.eventLoop = eventLoop
        self.requestID = handler.nextRequestID()
    }

    /// Decides, answering now or once the store has.
    func start(table: RouteTable) {
        allowedOrigins = table.allowedOrigins
        // The original-request fields are believed from the proxies in front only: anybody else
        // could name any request and learn, or obtain an assertion for, what it would get.
        guard let peer = handler.peerAddress, plane.admission.clientAddresses.isTrustedProxy(peer) else {
            return fail(
                GatewayError(
                    .forbidden, "forward_auth_untrusted_peer",
                    "forward-auth answers only the proxies listed in gateway.trusted_proxies; add the proxy's address there"))
        }
        let family = proxies.family(for: peer)
        self.family = family
        let headers = head.headers
        let values: (HTTPField.Name) -> [String] = { headers[$0.canonicalName] }
        let route: DataPlane.Route
        do throws(GatewayError) {
            let original = try ForwardAuthOriginal(family: family, values: values)
            // The data plane's own match, on the same table; by host too once a route is bound to one.
            let host = table.hasHostRoutes ? try ForwardAuthOriginal.host(family: family, values: values) : nil
            guard let (matched, _) = table.route(host: host, path: original.path) else {
                throw GatewayError(.notFound, "not_found", "no gateway.routes prefix serves \(PathRedaction.redactedPath(String(original.path)))\(host == nil ? "" : " on that host")")
            }
            // An MCP server's tokens are bound to it and checked by the data plane (audience, Origin,
            // the challenge naming its metadata): a proxy in front is never asked to admit them.
            guard !matched.isMCP else {
                throw GatewayError(
                    .notFound, "not_found",
                    "\(PathRedaction.redactedPath(String(original.path))) is an MCP server the gateway serves itself; forward-auth does not decide it: send its requests to the gateway")
            }
            guard matched.allowedMethodNames.contains(original.method.rawValue) else {
                throw GatewayError.methodNotAllowed(original.method.rawValue, path: PathRedaction.redactedPath(String(original.path)), allowed: matched.allowedMethodNames)
            }
            route = matched
            self.original = original
            originalHost = host ?? (try? ForwardAuthOriginal.host(family: family, values: values))
        } catch {
            return fail(error)
        }
        let token: String?
        do {
            token = try route.bearerToken(fromAuthorization: fields.authorization)
            if token == nil, !route.requiresToken { return allow(route: route, caller: nil, sessionID: nil) }
            if token == nil, route.acceptsSessionCookie { return startWithCookie(route: route) }
            if let caller = try plane.authenticator.authenticateInMemory(token, resource: nil) { return authenticated(caller, route: route) }
        } catch {
            return refused(error)
        }
        // The revocation mirror is stale, or the token not yet verified: the store answers.
        let authenticator = plane.authenticator
        then(eventLoop.makeFutureWithTask { try await authenticator.authenticate(token, resource: nil) }) { exchange, result in
            switch result {
            case .success(let caller): exchange.authenticated(caller, route: route)
            case .failure(let error): exchange.refused(error)
            }
        }
    }

    /// The client went away: nothing more is written, whatever the store answers.
    func clientGone() {
        finished = true
    }

    private func then<T: Sendable>(_ future: EventLoopFuture<T>, _ body: @escaping (ForwardAuthExchange, Result<T, any Error>) -> Void) {
        future.assumeIsolated().whenComplete { [self] result in body(self, result) }
    }

    private func refused(_ error: any Error) {
        if let failure = error as? AuthenticationFailure {
            CallerAuthentication.record(failure, in: plane.metrics)
            if let caller = failure.verifiedCaller { nameInAccessLog(caller) }
        }
        failed(error)
    }

    /// Answers `error` as the gateway answers it everywhere; one that is no refusal (the store's,
    /// say) is logged by its type and the request id, as the API's routes log it (never its text,
    /// which may quote values).
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
        guard !finished else { return }
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
            then(read) { exchange, result in
                switch result {
                case .success(true): exchange.allow(route: route, caller: caller, sessionID: sessionID)
                case .success(false): exchange.fail(Self.sessionForbidden)
                case .failure(let error): exchange.failed(error)
                }
            }
        }
    }

    // MARK: A browser's session cookie

    /// `auth: browser` asked without a token: the session cookie the proxy passed on.
    private func startWithCookie(route: DataPlane.Route) {
        let gate = plane.browser
        switch gate.cookie.sessionValue(in: head.headers["cookie"]) {
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
                // A store read per cookie never met here: bounded per client (behind the proxy, by X-Forwarded-For, as on the route).
                let client = plane.admission.clientAddresses.clientAddress(peer: handler.peerAddress, forwardedFor: head.headers["x-forwarded-for"])
                let load: EventLoopFuture<BrowserSession?>
                do {
                    load = try plane.loadBrowserSession(cookieValue: value, client: client, now: now, on: eventLoop)
                } catch {
                    return failed(error)
                }
                then(load) { exchange, result in
                    switch result {
                    case .success(let session?): exchange.signedIn(session, cookieValue: value, route: route)
                    case .success(nil): exchange.signInNeeded(route: route)
                    case .failure(let error): exchange.failed(error)
                    }
                }
            }
        }
    }

    /// A live browser session: the gateway session behind it must live, then the cross-site rule and the policy.
    private func signedIn(_ session: BrowserSession, cookieValue: String, route: DataPlane.Route) {
        guard !finished else { return }
        let caller = session.caller
        let sessionID = session.record.sessionID
        switch plane.sessionOwnership(sessionID, of: caller, on: eventLoop) {
        case .known(true):
            admitSignedIn(caller, sessionID: sessionID, route: route)
        case .known(false):
            sessionEnded(cookieValue, route: route)
        case .asking(let read):
            then(read) { exchange, result in
                switch result {
                case .success(true): exchange.admitSignedIn(caller, sessionID: sessionID, route: route)
                case .success(false): exchange.sessionEnded(cookieValue, route: route)
                case .failure(let error as RuntimeRefusal) where error.code == .sessionNotFound || error.code == .sessionForbidden:
                    exchange.sessionEnded(cookieValue, route: route)
                case .failure(let error): exchange.failed(error)
                }
            }
        }
    }

    private func admitSignedIn(_ caller: AuthenticatedCaller, sessionID: String, route: DataPlane.Route) {
        guard !finished else { return }
        // A cross-site request carrying the cookie is another site's doing, not the person's: it names nobody.
        if let method = original?.method.rawValue, !["GET", "HEAD", "OPTIONS"].contains(method),
            let refusal = plane.browser.crossSiteRefusal(
                origin: fields.origin, fetchSite: head.headers.first(name: "sec-fetch-site"), host: originalHost, allowedOrigins: route.allowedOrigins)
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

    /// No session: a navigation is sent to sign in (nginx's `error_page 401` reads `X-Portcullis-Sign-In`;
    /// Caddy and Traefik relay a 302), anything else is 401 JSON.
    private func signInNeeded(route: DataPlane.Route) {
        guard !finished, let original else { return }
        let refusal = GatewayError(.unauthorized, "token_missing", "sign in: no access token and no session cookie")
        let navigation = BrowserSessionGate.isNavigation(
            method: original.method.rawValue, fetchMode: head.headers.first(name: "sec-fetch-mode"), accept: head.headers["accept"])
        if navigation, let location = plane.browser.signInLocation(host: originalHost, path: original.path, query: original.query, provider: route.signIn) {
            if family == .forwarded { return answer(.found, fields: [("Location", location), ("Cache-Control", "no-store")]) }
            return fail(refusal, extra: [("X-Portcullis-Sign-In", location)])
        }
        fail(refusal)
    }

    /// The access line names the caller a verified token or live session proves, admitted or
    /// refused after (policy, cross-site rule, session's owner, revocation); never one unverified.
    private func nameInAccessLog(_ caller: AuthenticatedCaller) {
        userID = caller.userID
        userName = plane.accessLog.userName(caller.claims)
    }

    static let sessionForbidden = GatewayError(.forbidden, "session_forbidden", "the session belongs to another user or tenant")

    /// 200 with the assertion and the identity for the proxy to pass on.
    private func allow(route: DataPlane.Route, caller: AuthenticatedCaller?, sessionID: String?) {
        guard !finished else { return }
        if let caller { nameInAccessLog(caller) }
        let assertion: String
        do {
            assertion = try plane.runtime.assertions.assertion(
                audience: route.audience, caller: caller.map { RuntimeCaller($0, sessionID: sessionID) } ?? RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil))
        } catch {
            return fail(.noSigningKey)
        }
        let appCookie = ForwardAuthAnswer.appCookie(head.headers["cookie"])
        answer(.ok, fields: ForwardAuthAnswer.fields(assertion: assertion, caller: caller, route: route, appCookie: appCookie))
    }

    /// The refusal as the data plane answers one (`GatewayError.responseHead`), with `extra` fields.
    private func fail(_ error: GatewayError, extra: [(String, String)] = []) {
        guard !finished else { return }
        let body = ByteBuffer(bytes: JSONWriter.bytes(error.json))
        let close = ProxyExchange.wantsClose(head)
        let responseHead = error.responseHead(contentLength: body.readableBytes, close: close) { headers in
            for (name, value) in extra { headers.add(name: name, value: value) }
            decorate(&headers)
        }
        write(responseHead, body: body, close: close)
    }

    /// A bodiless answer of the gateway's own.
    private func answer(_ status: HTTPResponseStatus, fields: [(name: String, value: String)]) {
        let close = ProxyExchange.wantsClose(head)
        var headers = HTTPHeaders()
        headers.reserveCapacity(fields.count + 4)
        for field in fields { headers.add(name: field.name, value: field.value) }
        headers.add(name: "Content-Length", value: "0")
        if close { headers.add(name: "Connection", value: "close") }
        decorate(&headers)
        write(HTTPResponseHead(version: .http1_1, status: status, headers: headers), body: nil, close: close)
    }

    /// The request id, and the CORS answer for an origin gateway.allowed_origins lists (as the API's routes answer it).
    private func decorate(_ headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: "X-Request-Id", value: requestID)
        if let origin = fields.origin, allowedOrigins.contains(origin) {
            headers.replaceOrAdd(name: "Access-Control-Allow-Origin", value: origin)
            headers.replaceOrAdd(name: "Vary", value: "Origin")
        }
    }

    /// Writes the answer (a HEAD's without its body), records it, and frees the connection for the next request.
    private func write(_ responseHead: HTTPResponseHead, body: ByteBuffer?, close: Bool) {
        finished = true
        let status = responseHead.status
        handler.writeToClient(.head(responseHead), flush: false)
        if let body, head.method != .HEAD { handler.writeBytesToClient(body) }
        handler.flushClient()
        let nanoseconds = (ContinuousClock.now - started).nanoseconds
        plane.metrics.request(route: Self.path, method: head.method.rawValue, status: Int(status.code), nanoseconds: nanoseconds)
        plane.accessLog.record(
            requestID: requestID, method: head.method.rawValue, route: Self.path, path: Self.path, status: Int(status.code), nanoseconds: nanoseconds,
            protocol: "HTTP/1.1", userID: userID, userName: userName)
        handler.decisionFinished(closeConnection: close)
    }
}
