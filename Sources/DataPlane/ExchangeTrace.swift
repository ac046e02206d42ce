import NIOHTTP1
import Observability
import Traces

/// The spans of one proxied request (`tracing`): the request's own (a server span, the caller's
/// trace continued), and the call to the upstream (a client span), whose context the upstream
/// gets as its `traceparent` in place of the caller's.
///
/// Made only when tracing is on: otherwise an exchange holds `nil` and starts nothing. A request
/// whose trace is not recorded (`TraceHeadSampling`) has no span at all, only the context its
/// upstream gets. Never a token, a cookie, a query or an MCP call's arguments in a span.
final class ExchangeTrace {
    let tracer: RequestTracer
    /// The request's span; `nil` when its trace is not recorded.
    let server: RequestSpan?
    /// Not recorded: the context the request's calls carry.
    private let carried: TraceContextFields?
    private var upstream: RequestSpan?
    /// What the upstream gets as its Trace Context: the upstream span as parent.
    private(set) var upstreamFields: TraceContextFields?
    /// The refusal's stable code, when the gateway answered with one.
    var refusal: String?

    /// The request's span and the upstream call's have ended.
    private var ended = false

    /// - Parameter followsCaller: the request's `traceparent` is continued (a trusted proxy's, or
    ///   anyone's with `tracing.continue_any_caller`); otherwise its trace starts here.
    /// `nil` when libcrypto gives no random bytes for a trace id (the request goes on untraced).
    init?(tracer: RequestTracer, head: HTTPRequestHead, route: DataPlane.Route, path: Substring, requestID: String, followsCaller: Bool) {
        self.tracer = tracer
        let fields = TraceContextFields.followed(in: head, if: followsCaller)
        let template = route.prefix.isEmpty ? "/" : route.prefix
        let method = TracedMethod(head.method.rawValue, known: ProxyExchange.methods.contains(head.method))
        switch TraceHeadSampling.start(tracer, "\(method.name) \(template)", continuing: fields) {
        case .recorded(let span): (server, carried) = (span, nil)
        case .carried(let fields): (server, carried) = (nil, fields)
        case nil: return nil
        }
        server?.set { attributes in
            attributes[TraceAttribute.httpMethod] = method.attribute
            attributes[TraceAttribute.httpRoute] = template
            attributes[TraceAttribute.urlPath] = PathRedaction.redactedPath(String(path))
            attributes[TraceAttribute.protocolVersion] = head.version.major == 2 ? "2" : "1.1"
            attributes[TraceAttribute.requestID] = requestID
        }
    }

    /// The trace id the upstream gets, for the access line (32 hex digits).
    var traceID: String? {
        MCPTrace.traceID((upstreamFields ?? carried ?? server.map(tracer.fields(of:)))?.traceparent)
    }

    /// A wait of the request's on something memory could not answer, traced as a client span.
    enum Call: String {
        /// The token, verified or its revocation read, at the store (the mirror was behind, or the token new).
        case tokenCheck = "token check (store)"
        /// Whether the named session is the caller's, asked of the Runtime.
        case sessionRead = "session read (runtime)"
        /// A browser session cookie not in memory, read from the store.
        case browserSessionRead = "browser session read (store)"
        /// The person's token at the route's service: the store's, refreshed or exchanged at the provider.
        case upstreamCredential = "upstream credential (store, provider)"
        /// A URL elicitation for a connection the person has not made (the store).
        case connectionElicitation = "connection elicitation (store)"
    }

    /// Starts the span of a wait `call` names, the request's child (none when the trace is not recorded).
    func startCall(_ call: Call) -> RequestSpan? {
        server.map { tracer.startClientSpan(call.rawValue, parent: $0) }
    }

    /// Starts the call to the upstream, before its request head is written.
    func startUpstream(_ origin: UpstreamOrigin, method: HTTPMethod) {
        guard upstream == nil else { return }
        guard let server else {
            upstreamFields = carried
            return
        }
        let span = tracer.startClientSpan(method.rawValue, parent: server)
        span.set { attributes in
            attributes[TraceAttribute.httpMethod] = method.rawValue
            attributes[TraceAttribute.serverAddress] = origin.host
            attributes[TraceAttribute.serverPort] = origin.port
        }
        upstream = span
        upstreamFields = tracer.fields(of: span)
    }

    /// Ends the call to the upstream with its answer's status (502, 503 or 504 for its failure);
    /// without one (a tunnel closed, the client gone), failed as the request is.
    func endUpstream(status: Int?, failed: Bool = false) {
        guard let span = upstream else { return }
        upstream = nil
        if let status { span.set { $0[TraceAttribute.httpStatus] = status } }
        span.end(failed: status.map { $0 >= 500 } ?? failed)
    }

    /// Ends the request's span (and the upstream's, if still open: the client left, or the tunnel closed).
    func end(status: Int, userID: String?, mcp: MCPCallFields?, mcpSession: String?) {
        guard !ended else { return }
        ended = true
        endUpstream(status: nil, failed: status >= 500)
        guard let server else { return }
        if server.isRecording {
            if let mcp, let method = mcp.method {
                server.rename(mcp.name.map { "\(method) \($0)" } ?? method)
            }
            server.set { attributes in
                attributes[TraceAttribute.httpStatus] = status
                if let userID { attributes[TraceAttribute.userID] = userID }
                if let decision = refusal ?? (status < 400 ? "allowed" : nil) { attributes[TraceAttribute.decision] = decision }
                if let mcp {
                    if let method = mcp.method { attributes[TraceAttribute.mcpMethod] = method }
                    if mcp.method == "tools/call", let name = mcp.name {
                        attributes[TraceAttribute.toolName] = name
                        attributes[TraceAttribute.operationName] = "execute_tool"
                    }
                    if let clientID = mcp.clientID { attributes[TraceAttribute.clientID] = clientID }
                    if let tenantID = mcp.tenantID { attributes[TraceAttribute.tenantID] = tenantID }
                    attributes[TraceAttribute.decision] = mcp.decision
                }
                if let mcpSession { attributes[TraceAttribute.mcpSession] = mcpSession }
                if status >= 500 { attributes[TraceAttribute.errorType] = String(status) }
            }
        }
        server.end(failed: status >= 500)
    }

    /// A backstop: an exchange let go of without `end` still ends its spans (the tracer keeps each
    /// open one until it ends).
    deinit {
        guard !ended else { return }
        upstream?.end(failed: true)
        server?.end(failed: true)
    }
}
