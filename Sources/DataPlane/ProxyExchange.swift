import EdgeHTTP
import HTTPTypes
import JOSE
import MCPPolicy
import MCPResource
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Observability
import Traces
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import TrafficCop

/// One proxied request on the event loop: authenticate, vouch for the named
/// session, sign (or reuse) the assertion, stream the request to a pooled
/// upstream connection and the answer back, with back-pressure both ways.
///
/// The proxy's rules, on its only path: Bearer required; hop-by-hop,
/// `Authorization`, `Host`, `Expect` and every identity header variant
/// removed; the assertion and `X-Forwarded-*` added; `access_token` removed
/// from the query; 405 on a method no route answers, 413 on size; JSON
/// 502/503/504; a request id, one log line and the metrics. These upstreams
/// are other services, never the Runtime (whose public operations are each
/// admitted by the Traffic Cop). Token checks suspend only when the
/// revocation mirror is stale, session checks only when the ownership view
/// does not know the session.
final class ProxyExchange: UpstreamConnectionDelegate {
    unowned let handler: any ProxyExchangeHost
    /// A host nothing else keeps alive (an HTTP/2 route stream, `HTTP2RouteStream`, whose
    /// connection lets go of it when the stream closes), kept by its exchange for as long as the
    /// exchange is: `handler`, unowned, cannot. A channel handler host lives as long as its connection.
    var retainedHost: (any ProxyExchangeHost)?
    let route: DataPlane.Route
    /// The request head as NIO's decoder or the front (`PlainRequestHead`) read it (the target normalised): never converted.
    let head: HTTPRequestHead
    /// The fields of `head` the exchange acts on, read once.
    let fields: RequestFields
    /// The normalised path, without the query.
    let path: Substring
    /// The part of `path` below the route's prefix.
    let remainder: Substring
    let query: Substring?
    let requestID: String
    let started = ContinuousClock.now
    let plane: DataPlane

    private(set) var requestEnded = false
    private(set) var pendingBody: [ByteBuffer] = []
    private(set) var bodyBytes = 0
    var upstream: UpstreamConnection?
    /// The stream to an HTTP/2 upstream (`protocol: h2c` or `h2`), instead of `upstream`.
    var upstreamStream: UpstreamStream?
    /// The request head for an HTTP/2 upstream, until its stream opens.
    private var upstreamRequestHead: HTTPRequestHead?
    /// The upstream answer's trailers (an HTTP/2 upstream's), relayed with its end.
    private var answerTrailers: HTTPHeaders?
    /// The channel the upstream's answer comes on, whichever protocol.
    var upstreamChannel: (any Channel)? { upstream?.channel ?? upstreamStream?.channel }
    /// The loop's upstream pool, held here: a connection that arrives after the client left goes back
    /// to it without touching the handler (unowned, and gone with the client's connection).
    private var pool: UpstreamPool?
    /// The request head for the upstream, as bytes, until a connection takes it.
    private var upstreamRequest: ByteBuffer?
    /// The body goes upstream in chunks (the client's did: its length is not known).
    private var upstreamChunked = false
    var upstreamKeepAlive = false
    var responseStarted = false
    /// The answer's body goes to the client in chunks (the upstream's length is not known, the client speaks HTTP/1.1).
    private(set) var relayChunked = false
    /// The client's connection closes after this answer.
    var closesClient = false
    /// The client sent `Expect: 100-continue` and waits for the gateway's word before its body.
    private(set) var expectsContinue = false
    private(set) var finished = false
    /// The caller was signed in by the session cookie (not a token): its answer varies by `Cookie`.
    var authenticatedByCookie = false
    /// The verified caller's user id, for the access log line (`nil`: anonymous, or refused before their token verified).
    var userID: String?
    /// The caller's name for the access log (`logging.access_user_name`), beside `userID`.
    var userName: String?
    /// The caller's token at the route's connected service (`upstream_credential`), once looked up:
    /// sent as `Authorization: Bearer`, never logged.
    var upstreamBearer: String?
    /// The route's credential was asked for (once a request): found, it is `upstreamBearer`; not,
    /// the request was refused or goes on without one (an MCP `initialize`).
    var upstreamCredentialLookedUp = false
    /// A COPY's or MOVE's `Destination`, decided and in the upstream's namespace (`WebDAVDestination`);
    /// the client's own never goes upstream.
    private var webDAVDestination: String?
    var status = 0
    /// The upstream's answer (or 502/503/504 for its failure), for the proxied-request metrics; `nil` when it was never asked.
    private var upstreamStatus: Int?
    private var upstreamNanoseconds: Int64 = 0
    /// When the upstream must have answered by (the handler's deadline check reads it).
    var deadline: NIODeadline?
    /// The call's `grpc-timeout`, when it is sooner than the gateway's own wait for the upstream.
    private var callDeadline: TimeAmount?
    /// The request asked to become a WebSocket (`RouteUpgradeOffer`): the upstream is asked for the
    /// upgrade, and its 101 turns both connections into a tunnel.
    let webSocket: Bool
    /// The tunnel, once the upstream answered 101.
    var tunnel: Tunnel?
    /// Whom a WebSocket's tunnel speaks for, and the session it was opened in: the keys its
    /// registration is closed by (logout, back-channel logout, a disabled account).
    var tunnelCaller: AuthenticatedCaller?
    var tunnelSessionID: String?
    /// A WebSocket's place in `DataPlane.tunnels`, from its admission (before the upstream is asked):
    /// a session ending while the handshake is under way refuses it.
    var tunnelRegistration: UInt64?
    /// Closes the tunnel when its credential ends (the token's `exp`, the cookie session's `max_hours`).
    var tunnelExpiry: Scheduled<Void>?
    /// The request's spans (`tracing`); `nil` when tracing is off.
    var trace: ExchangeTrace?
    /// The MCP part of the exchange (`MCPExchangeState`), made on an MCP route only: one pointer
    /// on every other request, which the fields below read through.
    var mcpState: MCPExchangeState?
    var mcp: MCPExchangeState {
        if let mcpState { return mcpState }
        let made = MCPExchangeState()
        mcpState = made
        return made
    }
    var mcpAwaiting: (caller: AuthenticatedCaller, sessionID: String?)? {
        get { mcpState?.awaiting }
        set { if newValue != nil || mcpState != nil { mcp.awaiting = newValue } }
    }
    var mcpCall: MCPCallFields? {
        get { mcpState?.call }
        set {
            let decided = newValue != nil
            if decided || mcpState != nil { (mcp.call, mcp.isDecided) = (newValue, decided) }
        }
    }
    /// `mcpCall != nil`, without copying the call out to ask.
    var mcpDecided: Bool { mcpState?.isDecided ?? false }
    var startedTraceparent: String? {
        get { mcpState?.startedTraceparent }
        set { if newValue != nil || mcpState != nil { mcp.startedTraceparent = newValue } }
    }
    var listFilter: MCPListFilter? {
        get { mcpState?.listFilter }
        set { if newValue != nil || mcpState != nil { mcp.listFilter = newValue } }
    }
    var heldAnswer: (head: UpstreamResponseHead, bytes: [UInt8])? {
        get { mcpState?.heldAnswer }
        set { if newValue != nil || mcpState != nil { mcp.heldAnswer = newValue } }
    }
    var eventFilter: MCPEventStreamFilter? {
        get { mcpState?.eventFilter }
        set { if newValue != nil || mcpState != nil { mcp.eventFilter = newValue } }
    }
    var rewrittenLength: Int? {
        get { mcpState?.rewrittenLength }
        set { if newValue != nil || mcpState != nil { mcp.rewrittenLength = newValue } }
    }
    var mcpEvents: SSEEventBoundary? {
        get { mcpState?.events }
        set { if newValue != nil || mcpState != nil { mcp.events = newValue } }
    }
    var mcpEndPending: Scheduled<Void>? {
        get { mcpState?.endPending }
        set { if newValue != nil || mcpState != nil { mcp.endPending = newValue } }
    }

    init(
        handler: any ProxyExchangeHost, eventLoop: any EventLoop, route: DataPlane.Route, head: HTTPRequestHead, path: Substring, remainder: Substring,
        query: Substring?, webSocket: Bool = false
    ) {
        self.webSocket = webSocket
        self.handler = handler
        self.eventLoop = eventLoop
        self.plane = handler.plane
        self.route = route
        self.head = head
        fields = RequestFields(head.headers)
        self.path = path
        self.remainder = remainder
        self.query = query
        requestID = handler.nextRequestID()
        if let tracer = plane.tracer {
            // A caller's trace is continued from a trusted proxy (or from anyone with tracing.continue_any_caller).
            let followsCaller =
                tracer.followsAnyCaller
                || (head.headers.contains(name: "traceparent") && handler.peerAddress.map(plane.admission.clientAddresses.isTrustedProxy) == true)
            trace = ExchangeTrace(tracer: tracer, head: head, route: route, path: path, requestID: requestID, followsCaller: followsCaller)
        }
    }

    /// The connection's loop, where the exchange lives (kept here: the handler's context is gone once it is removed).
    let eventLoop: any EventLoop

    /// Runs `body` on the event loop with this exchange once `future` completes
    /// (the exchange, like its handler, lives on that loop only); traced, `call` names the span of
    /// the wait (a read of the store, the Runtime or a provider that memory could not answer).
    func then<T: Sendable>(_ future: EventLoopFuture<T>, call: ExchangeTrace.Call? = nil, _ body: @escaping (ProxyExchange, Result<T, any Error>) -> Void) {
        guard let call, let trace else {
            return future.assumeIsolated().whenComplete { [self] result in body(self, result) }
        }
        guard let span = trace.startCall(call) else {
            return future.assumeIsolated().whenComplete { [self] result in body(self, result) }
        }
        future.assumeIsolated().whenComplete { [self] result in
            span.end(after: result)
            body(self, result)
        }
    }

    // MARK: Admission

    func start() {
        // Every exchange starts here: a route with no upstream never reaches the upstream code below.
        guard !route.forwardAuthOnly else {
            return fail(
                GatewayError(
                    .notFound, "not_found",
                    "\(PathRedaction.redactedPath(String(path))) is decided for a proxy in front (forward-auth) and has no upstream here; send it through that proxy"))
        }
        guard route.methods.contains(head.method) else {
            return fail(.methodNotAllowed(head.method.rawValue, path: PathRedaction.redactedPath(String(path)), allowed: route.allowedMethodNames))
        }
        if head.method == .COPY || head.method == .MOVE || (head.method == .DELETE && route.speaksWebDAV) {
            // The source: a folder holding another route's files is acted on with them.
            let source = WebDAVDestination.upstreamPath(route: route, path: path, remainder: remainder)
            if WebDAVDestination.coversAnotherRoute(source, route: route, table: plane.table.current) {
                let refusal = WebDAVDestination.reachesAnotherRoute
                return fail(GatewayError(.forbidden, refusal.code, refusal.message))
            }
        }
        if head.method == .PROPFIND || head.method == .LOCK, route.speaksWebDAV, !WebDAVDestination.isShallow(head.headers["depth"]) {
            // Depth: infinity (a PROPFIND's or LOCK's default) lists or locks all a folder holds, another route's files too.
            let target = WebDAVDestination.upstreamPath(route: route, path: path, remainder: remainder)
            if WebDAVDestination.coversAnotherRoute(target, route: route, table: plane.table.current) {
                return fail(
                    GatewayError(
                        .forbidden, "depth_refused",
                        "this folder holds another route's files upstream; a \(head.method.rawValue) of it with Depth: infinity would reach them: send Depth: 0 or 1"))
            }
        }
        if head.method == .COPY || head.method == .MOVE {
            do throws(WebDAVDestination.Refusal) {
                webDAVDestination = try WebDAVDestination.rewritten(
                    head.headers["destination"], requestHost: fields.host, route: route, table: plane.table.current,
                    upstream: (route.origin.usesTLS ? "https://" : "http://") + upstreamHost)
            } catch {
                return fail(GatewayError(error.forbidden ? .forbidden : .badRequest, error.code, error.message))
            }
        }
        if route.grpcOnly, GRPCRequest.contentType(fields.contentType) == nil {
            return fail(
                GatewayError(.unsupportedMediaType, "grpc_required", "this route carries gRPC only: send the call with content-type application/grpc"))
        }
        // One decimal number (HTTP/1.1's parser holds to it; HTTP/2's reads it with Int, which takes "+5"),
        // since an upstream gets it as it came.
        if let length = fields.contentLength, length.isEmpty || !length.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            return fail(.invalidRequest("content-length must be one decimal number"), closeClient: true)
        }
        if let length = fields.contentLength.flatMap(Int.init), length > plane.maximumBodyBytes {
            return fail(Self.tooLarge(plane.maximumBodyBytes), closeClient: true)
        }
        if let expectation = fields.expect {
            // The gateway answers the expectation itself (after admission, in `proceed`) and never forwards it.
            guard expectation.lowercased() == "100-continue" else {
                return fail(
                    GatewayError(.expectationFailed, "expectation_failed", "only Expect: 100-continue is supported; send the request without that Expect header"),
                    closeClient: true)
            }
            expectsContinue = true
        }
        // An MCP server: a page of another origin never reaches it (the transport's rule against DNS rebinding).
        if route.isMCP, fields.origin != nil, let mcp = route.mcp, !mcp.admitsOrigin(fields.origin, allowed: route.allowedOrigins) {
            return fail(
                GatewayError(
                    .forbidden, "origin_refused",
                    "this MCP server is called from its own origin (\(mcp.origin)) or one gateway.allowed_origins lists, not from \(fields.origin ?? "")"))
        }
        let token: String?
        do {
            token = try route.bearerToken(fromAuthorization: fields.authorization)
            // `auth: none`: a request without a token goes on as anonymous; one that sends a token has it checked.
            if token == nil, !route.requiresToken { return proceed(nil, sessionID: nil) }
            // `auth: browser`: without a token, the session cookie (or a sign-in for a navigation).
            if token == nil, route.acceptsSessionCookie { return startWithCookie() }
            if let caller = try plane.authenticator.authenticateInMemory(token, resource: route.mcpIdentifier) {
                return authenticated(caller)
            }
        } catch {
            return refused(error)
        }
        // The revocation mirror is stale: only the store can answer.
        let (authenticator, resource) = (plane.authenticator, route.mcpIdentifier)
        then(eventLoop.makeFutureWithTask { try await authenticator.authenticate(token, resource: resource) }, call: .tokenCheck) { exchange, result in
            switch result {
            case .success(let caller): exchange.authenticated(caller)
            case .failure(let error): exchange.refused(error)
            }
        }
    }

    func refused(_ error: any Error) {
        if let failure = error as? AuthenticationFailure {
            CallerAuthentication.record(failure, in: plane.metrics)
            if let caller = failure.verifiedCaller { nameInAccessLog(caller) }
        }
        fail(GatewayError(answering: error))
    }

    private func authenticated(_ caller: AuthenticatedCaller) {
        guard !finished else { return }
        nameInAccessLog(caller)
        // The route's policy, from the verified token's claims (the cache holds them): before any session read.
        if let refusal = plane.policyRefusal(route, caller: caller, hasSession: fields.sessionID != nil, requestID: requestID) { return fail(refusal) }
        guard let named = fields.sessionID else { return proceed(caller, sessionID: nil) }
        let sessionID: String
        do {
            sessionID = try GatewayError.checkedSessionID(named)
        } catch {
            return fail(GatewayError(answering: error))
        }
        switch plane.sessionOwnership(sessionID, of: caller, on: eventLoop) {
        case .known(true):
            proceed(caller, sessionID: sessionID)
        case .known(false):
            fail(GatewayError(.forbidden, "session_forbidden", "the session belongs to another user or tenant"))
        case .asking(let read):
            then(read, call: .sessionRead) { exchange, result in
                switch result {
                case .success(true): exchange.proceed(caller, sessionID: sessionID)
                case .success(false):
                    exchange.fail(GatewayError(.forbidden, "session_anonymous", "the named session is anonymous; log in with it before using it here"))
                case .failure(let error): exchange.fail(GatewayError(answering: error))
                }
            }
        }
    }

    /// The access line names the caller a verified token proves, admitted or refused after (by the
    /// route's policy, the session's owner, revocation); never one an unverified token claims.
    func nameInAccessLog(_ caller: AuthenticatedCaller) {
        userID = caller.userID
        userName = plane.accessLog.userName(caller.claims)
    }

    // MARK: Upstream

    /// Forwards the request; `caller` is `nil` only on an `auth: none` route asked without a token
    /// (its assertion then names no user).
    func proceed(_ caller: AuthenticatedCaller?, sessionID: String?) {
        // An MCP route decides on what is called before anything is forwarded: a POST waits for its body.
        if route.isMCP, !mcpDecided, let policy = route.mcpPolicy, let caller {
            return admitMCP(policy, caller: caller, sessionID: sessionID)
        }
        // A route that acts as the caller at a connected service: their token there first.
        if let credential = route.upstreamCredential, !upstreamCredentialLookedUp {
            return lookUpCredential(credential, caller: caller, sessionID: sessionID)
        }
        guard !finished, handler.context != nil, let pool = handler.pool, let headBuffers = handler.headBuffers else { return }
        self.pool = pool
        if let caller { nameInAccessLog(caller) }
        if webSocket {
            (tunnelCaller, tunnelSessionID) = (caller, sessionID)
            registerTunnel()
        } else if upstreamBearer != nil, tunnelRegistration == nil, let caller {
            registerExchange(of: caller)
        }
        let assertion: String
        do {
            assertion = try plane.runtime.assertions.assertion(
                audience: route.audience, caller: caller.map { RuntimeCaller($0, sessionID: sessionID, namingClient: route.isMCP) }
                    ?? RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil))
        } catch {
            return fail(.noSigningKey)
        }
        if let mcpState, !mcpState.forwardedRequestIDs.isEmpty, let caller { mcpState.forwardedAs = (caller, sessionID) }
        let overHTTP2 = route.origin.transport != .http1
        if overHTTP2 {
            guard !webSocket else {
                return fail(.invalidRequest("this route's upstream speaks HTTP/2: the gateway carries no WebSocket to it; open the socket on an http1 route"))
            }
            trace?.startUpstream(route.origin, method: head.method)
            upstreamRequestHead = upstreamHTTP2Head(assertion: assertion, caller: caller)
        } else {
            trace?.startUpstream(route.origin, method: head.method)
            // The request head as one buffer, in the loop's kept storage.
            upstreamRequest = headBuffers.upstreamRequest.write(minimumCapacity: 256 + assertion.utf8.count + 48 * head.headers.count) { request in
                writeUpstreamHead(assertion: assertion, caller: caller, into: &request)
            }
        }
        if expectsContinue && !requestEnded && bodyBytes == 0 {
            // Admitted: the client may send its body now (RFC 9110 §10.1.1), as nginx answers it.
            handler.writeToClient(.head(HTTPResponseHead(version: .http1_1, status: .continue)), flush: true)
        }
        // A gRPC call's own deadline, when sooner, bounds the wait for the answer's head.
        callDeadline = fields.grpcTimeout.flatMap(GRPCRequest.timeout).flatMap { $0 < plane.upstreamTimeout ? $0 : nil }
        deadline = .now() + (callDeadline ?? plane.upstreamTimeout)
        handler.watchDeadline()
        if overHTTP2 {
            return plane.http2Pool(for: eventLoop).openStream(to: route.origin) { [self] result in
                switch result {
                case .success(let stream): connected(stream)
                case .failure: fail(GatewayError(.serviceUnavailable, "upstream_unavailable", "the upstream cannot be reached; try again shortly"), upstreamStatus: 503)
                }
            }
        }
        if let connection = pool.idleConnection(to: route.origin) { return connected(connection) }
        pool.acquire(route.origin) { [self] result in
            switch result {
            case .success(let connection): connected(connection)
            case .failure: fail(GatewayError(.serviceUnavailable, "upstream_unavailable", "the upstream cannot be reached; try again shortly"), upstreamStatus: 503)
            }
        }
    }

    /// The request head for the upstream, written into `request` (empty): request line, the client's
    /// forwardable fields as they came, then the gateway's own (no HTTPHeaders built, no codec).
    /// The client's address: the peer's, or the first untrusted one of `X-Forwarded-For` behind `gateway.trusted_proxies`.
    var clientAddress: String {
        plane.admission.clientAddresses.clientAddress(peer: handler.peerAddress, forwardedFor: head.headers["x-forwarded-for"])
    }

    private func writeUpstreamHead(assertion: String, caller: AuthenticatedCaller?, into request: inout ByteBuffer) {
        request.writeString(head.method.rawValue)
        request.writeStaticString(" ")
        writeTarget(into: &request)
        request.writeStaticString(" HTTP/1.1\r\n")
        forEachUpstreamField(assertion: assertion, caller: caller) { name, value in HTTP1Bytes.writeField(name, value, into: &request) }
        // The opening handshake's own fields (Sec-WebSocket-*) went as they came; the upgrade is asked again, hop by hop.
        if webSocket { request.writeStaticString("Connection: Upgrade\r\nUpgrade: websocket\r\n") }
        if let length = fields.contentLength {
            HTTP1Bytes.writeField("Content-Length", length, into: &request)
        } else if fields.hasTransferEncoding {
            request.writeStaticString("Transfer-Encoding: chunked\r\n")
            upstreamChunked = true
        }
        request.writeStaticString("\r\n")
    }

    /// The fields every upstream request carries, whichever protocol: the client's forwardable
    /// fields as they came (never an identity field's name, never the gateway's cookies), then the
    /// gateway's own: `Host`, the assertion, the identity fields, `X-Forwarded-*`.
    func forEachUpstreamField(assertion: String, caller: AuthenticatedCaller?, _ emit: (String, String) -> Void) {
        let configuredNames = route.identityFieldNames
        for (name, value) in head.headers where HeaderScreen.isForwardable(name, connectionListed: fields.connectionListed) {
            // A name some route sets as an identity field, in any spelling, is never the client's to send.
            if !configuredNames.isEmpty, configuredNames.contains(HeaderScreen.folded(name)) { continue }
            // Tracing on, the upstream's parent is the gateway's span (or none, when no trace could start):
            // the caller's context never goes on as it came.
            if plane.tracer != nil, MCPTrace.isTraceField(name) { continue }
            // The gateway's cookies never reach an upstream; the app's own pass as they came.
            if let mcpState {
                // The client's trace context goes on unless the gateway started another (it sent an invalid one).
                if mcpState.startedTraceparent != nil, MCPTrace.isTraceField(name) { continue }
                // A filtered list answer must come as bytes the gateway can read.
                if mcpState.listFilter != nil, name.utf8.count == 15, HeaderScreen.equalsLowercased(name.utf8, "accept-encoding") { continue }
            }
            // A Destination is the gateway's to write (WebDAVDestination), for COPY and MOVE only.
            if name.utf8.count == 11, HeaderScreen.equalsLowercased(name.utf8, "destination") { continue }
            if name.utf8.count == 6, HeaderScreen.equalsLowercased(name.utf8, "cookie") {
                if let kept = SessionCookie.withoutGatewayCookies(value) { emit(name, kept) }
                continue
            }
            emit(name, value)
        }
        if let traced = trace?.upstreamFields {
            if let traceparent = traced.traceparent { emit("traceparent", traceparent) }
            if let tracestate = traced.tracestate { emit("tracestate", tracestate) }
        } else if let startedTraceparent {
            emit("traceparent", startedTraceparent)
        }
        if let webDAVDestination { emit("Destination", webDAVDestination) }
        emit("Host", upstreamHost)
        emit(AssertionHeader.name, assertion)
        if let upstreamBearer { emit("Authorization", "Bearer " + upstreamBearer) }
        if let identity = route.identityFields { Self.forEachIdentityField(identity, of: caller, emit) }
        emit("X-Forwarded-For", clientAddress)
        emit("X-Forwarded-Proto", plane.forwardedProto)
        // With preserve_host, the host decided on only: a name the client chose that was not
        // passed as Host is not passed here either (an app building links from either would
        // otherwise build them to it).
        if let authority = fields.host, !route.preservesHost || upstreamHost == authority { emit("X-Forwarded-Host", authority) }
    }

    /// The `Host` the upstream gets: the upstream URL's, or with `preserve_host` the client's when
    /// it is a host name (and port) as `RouteHost.requestHost` reads one and a host the gateway
    /// serves the route on: the route's own host (it was matched by it), or, for a route on any
    /// host, the public host. Any other value (another name a client chose, which an app would
    /// build its absolute links from: a reset link to the attacker's host) is not passed on, and
    /// the upstream's own goes instead.
    var upstreamHost: String {
        guard route.preservesHost, let host = fields.host, let name = RouteHost.requestHost(host[...]) else { return route.origin.hostHeader }
        if route.host == nil, name != plane.table.current.publicHost?[...] { return route.origin.hostHeader }
        return host
    }

    /// The request head for an HTTP/2 upstream, as NIO's parts (its codec makes `:authority` of
    /// `Host`): the fields `writeUpstreamHead` writes, with the length when known, and
    /// `te: trailers` for a gRPC call (gRPC servers read it as the sign of a proxy that relays trailers).
    private func upstreamHTTP2Head(assertion: String, caller: AuthenticatedCaller?) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.reserveCapacity(head.headers.count + 8)
        forEachUpstreamField(assertion: assertion, caller: caller) { name, value in headers.add(name: name, value: value) }
        if let length = fields.contentLength { headers.add(name: "Content-Length", value: length) }
        if GRPCRequest.contentType(fields.contentType) != nil { headers.add(name: "TE", value: "trailers") }
        var target = ByteBuffer()
        writeTarget(into: &target)
        return HTTPRequestHead(version: .http1_1, method: head.method, uri: String(buffer: target), headers: headers)
    }

    /// The route's identity fields for `caller`, those with a value (none without a caller, on an
    /// `auth: none` route): any client copy is stripped already, so a missing field is no one's.
    private static func forEachIdentityField(_ names: IdentityFieldNames, of caller: AuthenticatedCaller?, _ emit: (String, String) -> Void) {
        guard let caller else { return }
        names.forEach(of: caller, emit)
    }

    /// The upstream target: the route's base path, the normalised path below the prefix (or the whole path, `strip_prefix: false`), the
    /// query without `access_token`. The request for the prefix itself to an upstream without a
    /// base path is `/`, never an empty request target (RFC 9112 §3.2.1; nginx answers an empty one with 400).
    func writeTarget(into buffer: inout ByteBuffer) {
        let below = route.stripsPrefix ? remainder : path
        buffer.writeString(route.origin.basePath)
        buffer.writeSubstring(below)
        if route.origin.basePath.isEmpty && below.isEmpty { buffer.writeStaticString("/") }
        guard let query = RequestTarget.queryWithoutCredentials(query) else { return }
        buffer.writeStaticString("?")
        buffer.writeSubstring(query)
    }

    private func connected(_ connection: UpstreamConnection) {
        guard !finished, let upstreamRequest else {
            // The client may have gone (`clientGone`) while the connection was made: the handler with it.
            pool?.release(connection, to: route.origin, reusable: !finished)
            return
        }
        self.upstreamRequest = nil
        upstream = connection
        connection.handler.delegate = self
        connection.handler.expectResponse(toHEAD: head.method == .HEAD, upgrade: webSocket)
        let channel = connection.channel
        channel.write(upstreamRequest, promise: nil)
        for buffer in pendingBody { writeBodyUpstream(buffer, on: channel) }
        pendingBody = []
        if requestEnded && upstreamChunked { channel.write(HTTP1Bytes.lastChunk, promise: nil) }
        channel.flush()
        if !channel.isWritable { handler.holdReads() }
    }

    /// The stream to an HTTP/2 upstream opened: the request's head, the body so far, its end if it came.
    private func connected(_ stream: UpstreamStream) {
        guard !finished, let requestHead = upstreamRequestHead else {
            stream.channel.close(promise: nil)
            return
        }
        upstreamRequestHead = nil
        upstreamStream = stream
        stream.handler.delegate = self
        stream.handler.answersHEAD = head.method == .HEAD
        let channel = stream.channel
        channel.write(HTTPClientRequestPart.head(requestHead), promise: nil)
        for buffer in pendingBody { channel.write(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil) }
        pendingBody = []
        if requestEnded { channel.write(HTTPClientRequestPart.end(nil), promise: nil) }
        channel.flush()
        if !channel.isWritable { handler.holdReads() }
    }

    /// A part of the client's request body (or its end).
    func clientRead(_ part: HTTPServerRequestPart) {
        switch part {
        case .head:
            break  // the handler queues a new request's head; never here
        case .body(let buffer):
            bodyBytes += buffer.readableBytes
            if let refusal = bodyRefusal(bodyBytes) { return fail(refusal, closeClient: true) }
            // An HTTP/2 GET, HEAD, DELETE or TRACE without content-length is framed as having no body
            // (swift-nio-http2 adds no length for them): DATA on it would reach an HTTP/1.1 upstream as
            // bytes after the request, read there as another request. Refused, before any byte goes.
            if buffer.readableBytes > 0, head.version.major == 2, fields.contentLength == nil, !fields.hasTransferEncoding {
                return fail(
                    .invalidRequest("this request carries a body without content-length; send content-length with a body on a \(head.method.rawValue)"),
                    closeClient: true)
            }
            guard !finished else { return }
            if let upstream {
                writeBodyUpstream(buffer, on: upstream.channel)
                upstream.channel.flush()
                if !upstream.channel.isWritable { handler.holdReads() }
            } else if let stream = upstreamStream {
                stream.channel.writeAndFlush(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil)
                if !stream.channel.isWritable { handler.holdReads() }
            } else {
                pendingBody.append(buffer)
            }
        case .end:
            // A request's trailers are dropped: nothing screens them as the head is screened (an
            // assertion or an identity field could ride in them), and gRPC clients send none.
            requestEnded = true
            if finished {
                handler.exchangeFinished(requestEnded: true, closeConnection: false)
            } else if mcpAwaiting != nil {
                decideMCPBody()
            } else {
                if upstreamChunked { upstream?.channel.writeAndFlush(HTTP1Bytes.lastChunk, promise: nil) }
                upstreamStream?.channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            }
        }
    }

    /// The refusal a body earns once `total` of its bytes have come: past the gateway's bound
    /// (`gateway.max_body_bytes`), or an undecided MCP POST past `mcp.max_body_bytes` (one too
    /// large to be read whole is never passed undecided).
    private func bodyRefusal(_ total: Int) -> GatewayError? {
        if total > plane.maximumBodyBytes { return Self.tooLarge(plane.maximumBodyBytes) }
        if route.isMCP, head.method == .POST, !mcpDecided, let policy = route.mcpPolicy, total > policy.maximumBodyBytes {
            return Self.mcpBodyTooLarge(policy.maximumBodyBytes)
        }
        return nil
    }

    /// Whether a whole body of `length` bytes may be handed over before `start`, with its end,
    /// as a bodyless request's end is: only one no bound refuses (that refusal is `start`'s to give).
    /// A body handed over so goes upstream with the head, in one write.
    func takesWholeBodyBeforeStart(_ length: Int) -> Bool {
        bodyBytes == 0 && bodyRefusal(length) == nil
    }

    /// A piece of the request body, in a chunk of its own when the body goes upstream chunked.
    private func writeBodyUpstream(_ buffer: ByteBuffer, on channel: any Channel) {
        guard upstreamChunked else { return channel.write(buffer, promise: nil) }
        guard buffer.readableBytes > 0 else { return }  // a zero-size chunk would end the body
        channel.write(HTTP1Bytes.chunkHeader(buffer.readableBytes, allocator: channel.allocator), promise: nil)
        channel.write(buffer, promise: nil)
        channel.write(HTTP1Bytes.crlf, promise: nil)
    }

    // MARK: The answer

    func upstreamRead(_ part: UpstreamResponsePart) {
        guard !finished else { return }
        if tunnel != nil { return tunnelRead(part) }
        switch part {
        case .head(let response) where webSocket && response.status == 101:
            beginTunnel(response)
        case .head(let response) where listFilter != nil:
            holdOrFilterAnswer(response)
        case .body(let buffer) where heldAnswer != nil || eventFilter != nil:
            filterAnswerBody(buffer)
        case .end where heldAnswer != nil:
            releaseHeldAnswer()
        case .end where eventFilter != nil:
            endFilteredEvents()
        case .head(let response):
            responseStarted = true
            deadline = nil
            status = response.status
            upstreamKeepAlive = response.keepAlive
            if route.isMCP, response.status == 200, Self.isEventStream(response) { beginMCPEvents(response) }
            if handler.relaysAnswerParts { return handler.writeAnswerHead(response, of: self) }
            // The host has its loop's head buffers from the moment it joins the pipeline; without them, no answer can start.
            guard let headBuffers = handler.headBuffers else { return finish(closeClient: true) }
            let answerHead = headBuffers.clientAnswer.write(minimumCapacity: response.bytes.count + 160) { writeClientHead(for: response, into: &$0) }
            handler.writeBytesToClient(answerHead)
        case .body(var buffer):
            if mcpEvents != nil {
                guard let relayed = relayMCPEventsEnding(buffer) else { return }
                if mcpEndPending != nil, relayed.readableBytes != buffer.readableBytes || (mcpEvents?.isAtBoundary ?? false) {
                    // The event under way ended in this piece: what reaches its end goes, then the stream ends.
                    if relayed.readableBytes > 0 {
                        // Relayed as any piece is, without walking its events again.
                        let events = mcpEvents
                        mcpEvents = nil
                        upstreamRead(.body(relayed))
                        mcpEvents = events
                    }
                    return endMCPStreamCleanly()
                }
                if mcpEndPending == nil, !(mcpState?.pendingNotices.isEmpty ?? true), mcpEvents?.isAtBoundary ?? false {
                    // The event under way ended in this piece: it goes, then the gateway's notices, then the rest.
                    writeAnswerBody(relayed)
                    sendPendingNotices()
                    let rest = buffer.getSlice(at: buffer.readerIndex + relayed.readableBytes, length: buffer.readableBytes - relayed.readableBytes)
                    if let rest, rest.readableBytes > 0 { return upstreamRead(.body(rest)) }
                    if !handler.clientIsWritable { upstreamChannel?.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in } }
                    return
                }
                buffer = relayed
            }
            writeAnswerBody(buffer)
            if !handler.clientIsWritable { upstreamChannel?.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in } }
        case .end:
            if handler.relaysAnswerParts {
                // The exchange ends first: the answer's end closes a stream whose request has ended, at once,
                // and the upstream connection must be back in the pool (and the request logged) by then.
                let trailers = answerTrailers
                complete()
                return handler.writeToClient(.end(trailers), flush: true)
            }
            if relayChunked, let trailers = answerTrailers {
                handler.writeBytesToClient(HTTP1Bytes.lastChunk(trailers: trailers))
            } else if relayChunked {
                handler.writeBytesToClient(HTTP1Bytes.lastChunk)
            }
            handler.bytesAnswerEnded()
            handler.flushClient()
            complete()
        }
    }

    /// A piece of a relayed answer's body, framed for the client as its answer is (HTTP/2's parts,
    /// HTTP/1.1's chunks, or bytes up to the close).
    func writeAnswerBody(_ buffer: ByteBuffer) {
        if handler.relaysAnswerParts {
            handler.writeToClient(.body(.byteBuffer(buffer)))
        } else if relayChunked {
            guard buffer.readableBytes > 0 else { return }
            handler.writeBytesToClient(HTTP1Bytes.chunkHeader(buffer.readableBytes, allocator: ByteBufferAllocator()))
            handler.writeBytesToClient(buffer)
            handler.writeBytesToClient(HTTP1Bytes.crlf)
        } else {
            handler.writeBytesToClient(buffer)
        }
    }

    /// The client's answer head, as bytes written into `out` (empty): the upstream's status line and the
    /// fields that may go back as they came, the framing for the client, the request id and the CORS answer.
    private func writeClientHead(for response: UpstreamResponseHead, into out: inout ByteBuffer) {
        out.writeStaticString("HTTP/1.1 ")
        HTTP1Bytes.writeDecimal(response.status, into: &out)
        out.writeStaticString(" ")
        out.writeBytes(response.bytes[response.reason])
        out.writeStaticString("\r\n")
        let (origin, varyCoversOrigin, varyCoversCookie) = forEachReturnedField(of: response) { field in
            out.writeBytes(response.bytes[field.name])
            out.writeStaticString(": ")
            out.writeBytes(response.bytes[field.value])
            out.writeStaticString("\r\n")
        }
        closesClient = Self.wantsClose(head)
        if let rewrittenLength {
            HTTP1Bytes.writeField("Content-Length", number: rewrittenLength, into: &out)
        } else {
        switch response.framing {
        case .none, .length:
            if let length = response.contentLength { HTTP1Bytes.writeField("Content-Length", number: length, into: &out) }
        case .chunked, .untilClose:
            if head.version.minor >= 1 && head.version.major == 1 {
                relayChunked = true
                out.writeStaticString("Transfer-Encoding: chunked\r\n")
            } else {
                closesClient = true  // an HTTP/1.0 client reads the body until the connection closes
            }
        }
        }
        HTTP1Bytes.writeField("X-Request-Id", requestID, into: &out)
        if let origin {
            HTTP1Bytes.writeField("Access-Control-Allow-Origin", origin, into: &out)
            if !varyCoversOrigin { out.writeStaticString("Vary: Origin\r\n") }
        }
        // An answer made for a cookie's user: a shared cache in front must not hand it to another browser.
        if authenticatedByCookie && !varyCoversCookie { out.writeStaticString("Vary: Cookie\r\n") }
        if closesClient { out.writeStaticString("Connection: close\r\n") }
        out.writeStaticString("\r\n")
    }

    /// The upstream's fields that go back to the client as they came, each given to `body`; says
    /// the allowed origin the gateway answers for, and whether the upstream's `Vary` covers
    /// `Origin` and `Cookie` already.
    private func forEachReturnedField(
        of response: UpstreamResponseHead, _ body: (UpstreamResponseHead.Field) -> Void
    ) -> (origin: String?, varyCoversOrigin: Bool, varyCoversCookie: Bool) {
        let origin = fields.origin.flatMap { route.allowedOrigins.contains($0) ? $0 : nil }
        let listed = HeaderScreen.connectionListed(response)
        // The upstream's Vary is kept (a shared cache keys its variants by it); Origin is added unless listed.
        var varyCoversOrigin = false
        var varyCoversCookie = false
        for field in response.fields where HeaderScreen.isReturnable(response, field, connectionListed: listed) {
            if authenticatedByCookie, response.name(of: field, is: "vary"), HeaderScreen.listsToken(response.bytes[field.value], "cookie", orStar: true) {
                varyCoversCookie = true
            }
            // Set, not added: an upstream's own CORS answer gives way to the gateway's (its request id is an identity field).
            if origin != nil && response.name(of: field, is: "access-control-allow-origin") { continue }
            if origin != nil, response.name(of: field, is: "vary"), HeaderScreen.listsToken(response.bytes[field.value], "origin", orStar: true) {
                varyCoversOrigin = true
            }
            body(field)
        }
        return (origin, varyCoversOrigin, varyCoversCookie)
    }

    /// The client's answer head as NIO's parts, for a host whose codec frames it (an HTTP/2
    /// stream): the fields `writeClientHead` writes, without HTTP/1.1's framing and connection fields.
    func clientHeadParts(for response: UpstreamResponseHead) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        headers.reserveCapacity(response.fields.count + 4)
        addClientHeadFields(for: response, to: &headers)
        return HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
    }

    /// The client's answer head fields (`clientHeadParts`), in whichever form the host frames them.
    func addClientHeadFields<Fields: AnswerHeadFields>(for response: UpstreamResponseHead, to fields: inout Fields) {
        let (origin, varyCoversOrigin, varyCoversCookie) = forEachReturnedField(of: response) { field in
            fields.add(field, of: response)
        }
        if let length = rewrittenLength ?? response.contentLength { fields.add(.contentLength, value: String(length)) }
        fields.add(.requestID, value: requestID)
        if let origin {
            fields.add(.allowOrigin, value: origin)
            if !varyCoversOrigin { fields.add(.vary, value: "Origin") }
        }
        if authenticatedByCookie && !varyCoversCookie { fields.add(.vary, value: "Cookie") }
    }

    /// An HTTP/2 upstream's trailers: relayed with the answer's end (to an HTTP/1.1 client only
    /// when its answer is chunked; a length-framed answer has nowhere to carry them).
    func upstreamTrailers(_ trailers: HTTPHeaders) {
        var kept = HTTPHeaders()
        for (name, value) in trailers where HeaderScreen.isForwardable(name, connectionListed: []) {
            // Cookies are set in a head, where the gateway screens them, never in trailers.
            if name.utf8.count == 10, HeaderScreen.equalsLowercased(name.utf8, "set-cookie") { continue }
            kept.add(name: name, value: value)
        }
        answerTrailers = kept
    }

    func upstreamReadComplete() {
        handler.flushClient()
    }

    func upstreamWritabilityChanged(_ writable: Bool) {
        guard writable else { return }
        if let tunnel { tunnel.reader?.resume() } else { handler.resumeReads() }
    }

    func clientWritabilityChanged(_ writable: Bool) {
        guard writable, let upstreamChannel else { return }
        upstreamChannel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in }
        // A socket reads again when its autoRead is turned back on; an HTTP/2 upstream's stream
        // channel does not (it keeps what came meanwhile until asked): it is asked here.
        upstreamChannel.read()
    }

    func upstreamClosed() {
        guard !finished else { return }
        upstream = nil
        upstreamStream = nil
        if responseStarted {
            // Part of an answer went out: the client cannot be told cleanly. Its connection closes without
            // the last chunk (as nginx does), so no client takes a cut body for a whole one.
            plane.logger.warning(
                "upstream answer cut off", metadata: ["upstream": "\(route.name)", "request_id": "\(requestID)", "status": "\(status)"])
            finish(closeClient: true)
        } else {
            fail(GatewayError(.badGateway, "upstream_unavailable", "the upstream closed the connection without answering; try again"), upstreamStatus: 502)
        }
    }

    func upstreamFailed(_ error: any Error) {
        guard !finished, !responseStarted else { return }
        if let error = error as? UpstreamResponseError {
            plane.logger.warning("upstream answer refused", metadata: ["upstream": "\(route.name)", "error": "\(error)"])
            return fail(
                GatewayError(.badGateway, "upstream_unavailable", "the upstream's answer was not valid HTTP/1.1; its operator must fix it"),
                upstreamStatus: 502)
        }
        guard error is NIOSSLError || error is BoringSSLError else { return }
        // The operator needs the reason; the client gets the status and what it means.
        plane.logger.warning("upstream TLS handshake failed", metadata: ["upstream": "\(route.name)", "error": "\(error)"])
        fail(
            GatewayError(.badGateway, "upstream_unavailable", "the upstream's TLS certificate could not be verified; the gateway's operator must fix its trust"),
            upstreamStatus: 502)
    }

    func clientGone() {
        guard !finished else { return }
        finished = true
        deadline = nil
        endTunnel()
        endMCPEvents()
        // An MCP request is one line whatever ends it: the client that left (a stream closed, a call cancelled) too.
        if var call = mcpCall {
            call.ended = "client_gone"
            recordAccessLine(status: status == 0 ? 499 : status, nanoseconds: (ContinuousClock.now - started).nanoseconds, mcp: call)
        }
        endTrace(status: status == 0 ? 499 : status, mcp: mcpCall)
        closeUpstream()
    }

    /// Ends the request's spans (tracing on), however the exchange ended.
    private func endTrace(status: Int, mcp: MCPCallFields?) {
        guard let trace else { return }
        self.trace = nil
        // The MCP server's session id, as the client sent it, on an answered request only.
        let session = route.isMCP && status < 400 ? head.headers.first(name: "mcp-session-id").flatMap(MCPTrace.loggableSessionID) : nil
        trace.end(status: status, userID: userID, mcp: mcp, mcpSession: session)
    }

    /// The request's access log line.
    private func recordAccessLine(status: Int, nanoseconds: Int64, mcp: MCPCallFields?) {
        plane.accessLog.record(
            requestID: requestID, method: head.method.rawValue, route: route.template, path: path, status: status, nanoseconds: nanoseconds,
            protocol: head.version.major == 2 ? "HTTP/2" : head.version.minor == 0 ? "HTTP/1.0" : "HTTP/1.1", userID: userID, userName: userName,
            mcp: mcp)
    }

    /// Closes the upstream's side of the exchange, whichever protocol (its answer is not wanted any more).
    func closeUpstream() {
        if let upstream {
            upstream.handler.delegate = nil
            upstream.channel.close(promise: nil)
            self.upstream = nil
        }
        dropUpstreamStream()
    }

    /// Resets the stream to an HTTP/2 upstream, if one is open (the exchange ended without its answer).
    private func dropUpstreamStream() {
        guard let stream = upstreamStream else { return }
        stream.handler.delegate = nil
        stream.channel.close(promise: nil)
        upstreamStream = nil
    }

    /// The client did not send the whole request in time: `error` (408) if nothing was sent yet, and close.
    func requestTimedOut(_ error: GatewayError) {
        guard !finished else { return }
        fail(error, closeClient: true)
    }

    /// The deadline passed without an answer: 504.
    func timedOut() {
        guard !finished, !responseStarted else { return }
        let message =
            if let callDeadline {
                "the upstream did not answer within the call's grpc-timeout (\(callDeadline.nanoseconds / 1_000_000) ms)"
            } else {
                "the upstream did not answer within \(plane.upstreamTimeout.nanoseconds / 1_000_000_000) s; try again"
            }
        fail(GatewayError(.gatewayTimeout, "upstream_timeout", message), upstreamStatus: 504)
    }

    // MARK: Ending

    func complete() {
        if let stream = upstreamStream {
            stream.handler.delegate = nil
            upstreamStream = nil
            // The answer ended before the request did: the upstream needs no more of it.
            if !requestEnded { stream.channel.close(promise: nil) }
            recordUpstream(status)
            return finish(closeClient: closesClient)
        }
        guard let upstream else { return }
        pool?.release(upstream, to: route.origin, reusable: upstreamKeepAlive && requestEnded)
        self.upstream = nil
        recordUpstream(status)
        finish(closeClient: closesClient)
    }

    /// The upstream's part in the metrics, recorded with the request's when the exchange finishes.
    private func recordUpstream(_ status: Int) {
        upstreamStatus = status
        upstreamNanoseconds = (ContinuousClock.now - started).nanoseconds
        trace?.endUpstream(status: status)
    }

    /// Answers with `error` (if nothing was sent yet) and ends the exchange.
    func fail(_ error: GatewayError, closeClient: Bool = false, upstreamStatus: Int? = nil) {
        guard !finished else { return }
        var error = error
        trace?.refusal = error.code
        // An MCP request refused before its decision (no token, another origin) is logged as refused all the same.
        if route.isMCP, !mcpDecided { mcpCall = MCPCallFields(decision: error.code) }
        if route.isMCP, let mcp = route.mcp, error.status == .unauthorized || error.insufficientScope != nil {
            // An MCP client finds where to get a token from the refusal alone (RFC 9728 §5.1).
            error.resourceMetadata = mcp.metadataURL
            if error.challengeScope == nil { error.challengeScope = mcp.scope }
        }
        closeUpstream()
        if let upstreamStatus { recordUpstream(upstreamStatus) }
        if responseStarted {
            return finish(closeClient: true)
        }
        // A refused request whose client waits for 100 Continue: its body may still come, unasked; close after the answer.
        let closeClient = closeClient || (expectsContinue && !requestEnded)
        status = Int(error.status.code)
        if let grpc = GRPCRequest.contentType(fields.contentType) {
            // A gRPC client reads grpc-status, not the HTTP status or a JSON body.
            handler.writeToClient(.head(error.grpcResponseHead(contentType: grpc) { decorate(&$0) }))
            handler.writeToClient(.end(nil), flush: true)
            return finish(closeClient: closeClient || Self.wantsClose(head))
        }
        let body = ByteBuffer(bytes: JSONWriter.bytes(error.json))
        // The head says the connection closes after it whenever it will (the client's `Connection: close` too).
        handler.writeToClient(.head(error.responseHead(contentLength: body.readableBytes, close: closeClient || Self.wantsClose(head)) { decorate(&$0) }))
        // An answer to HEAD has the head alone (RFC 9110 §9.3.2): the front writes these bytes as they are.
        if head.method != .HEAD { handler.writeToClient(.body(.byteBuffer(body))) }
        handler.writeToClient(.end(nil), flush: true)
        finish(closeClient: closeClient || Self.wantsClose(head))
    }

    func finish(closeClient: Bool) {
        finished = true
        deadline = nil
        endTunnel()
        endMCPEvents()
        let nanoseconds = (ContinuousClock.now - started).nanoseconds
        handler.metricHandles?.record(
            route: route, method: head.method, status: status, nanoseconds: nanoseconds, upstreamStatus: upstreamStatus,
            upstreamNanoseconds: upstreamNanoseconds)
        let mcpCall = mcpCall
        recordAccessLine(status: status, nanoseconds: nanoseconds, mcp: mcpCall)
        endTrace(status: status, mcp: mcpCall)
        if let mcpCall {
            // Labelled as the request metrics label methods (a bounded set).
            handler.metricHandles?.recordMCPCall(
                route: route, method: mcpCall.methodLabel ?? ProxyMetricHandles.label(head.method), name: mcpCall.nameLabel, decision: mcpCall.decision)
        }
        handler.exchangeFinished(requestEnded: requestEnded, closeConnection: closeClient)
    }

    /// The request id, and the CORS answer for an allowed origin.
    func decorate(_ headers: inout HTTPHeaders) {
        // Set, not added: an upstream's own request id or CORS answer gives way to the gateway's.
        headers.replaceOrAdd(name: "X-Request-Id", value: requestID)
        if let origin = fields.origin, route.allowedOrigins.contains(origin) {
            headers.replaceOrAdd(name: "Access-Control-Allow-Origin", value: origin)
            headers.replaceOrAdd(name: "Vary", value: "Origin")
        }
    }

    /// The client asked to close after this answer (`Connection: close`, or HTTP/1.0 without
    /// keep-alive); never an HTTP/2 stream's request, whose connection carries others.
    static func wantsClose(_ head: HTTPRequestHead) -> Bool {
        head.version.major == 1 && !head.isKeepAlive
    }

    /// The methods a route forwards, in NIO's spelling.
    /// Every method a route may forward, as NIO names them (the metrics' labels, by index).
    static let methods = ProxyRoute.forwardableMethods.map { HTTPMethod(rawValue: $0.rawValue) }

    static func tooLarge(_ limit: Int) -> GatewayError {
        GatewayError(.contentTooLarge, "payload_too_large", "the request body is limited to \(limit) bytes")
    }

    /// 408 `request_timeout`: the request (its body) did not arrive whole within `timeout`
    /// (`limits.request_timeout_seconds`), on the front's path and NIO's alike.
    static func requestIncomplete(within timeout: TimeAmount) -> GatewayError {
        GatewayError(
            .requestTimeout, "request_timeout",
            "the request did not arrive whole within \(timeout.nanoseconds / 1_000_000_000) s; send its body without pauses")
    }
}
