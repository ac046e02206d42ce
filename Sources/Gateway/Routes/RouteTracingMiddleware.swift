import DataPlane
import HTTPTypes
import Hummingbird
import Observability
import RuntimeAccess
import SecurityGuard
import Traces
import TrafficCop

/// A server span for each request Hummingbird's routes answer (`tracing` on): sign-in, tokens,
/// sessions, the authorization server, and forward-auth when it does not take the event loop's
/// plain path (over HTTP/2, say), which makes the span its decision's (`CurrentRouteSpan`).
///
/// Outermost, so the span holds the answer as the client gets it (an error already turned into
/// its JSON) and its `X-Request-Id`. The caller's `traceparent` is followed as the data plane
/// follows it: from `gateway.trusted_proxies`, or from anyone with `tracing.continue_any_caller`.
/// The health probes (`/healthz`, `/readyz`) make no span: an orchestrator's every few seconds
/// would outnumber the rest. The calls a route makes for the request are the span's children
/// (`CallSpans`).
struct RouteTracingMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext

    let tracer: RequestTracer
    let admission: Admission

    /// The methods a span names as written (RFC 9110's and PATCH); any other is `_OTHER`.
    static let knownMethods: Set<HTTPRequest.Method> = [.get, .head, .post, .put, .patch, .delete, .options, .connect, .trace]
    /// Hummingbird's `endpointPath` for a request no route matched.
    static let unmatched = "NotFound"
    static let probes: Set<String> = ["/healthz", "/readyz"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if Self.probes.contains(request.uri.path) { return try await next(request, context) }
        let follows = tracer.followsAnyCaller || context.peerAddress.map(admission.clientAddresses.isTrustedProxy) == true
        let fields =
            follows
            ? TraceContextFields.screened(traceparents: request.headers[values: Self.traceparent], tracestates: request.headers[values: Self.tracestate])
            : TraceContextFields()
        let method = TracedMethod(request.method.rawValue, known: Self.knownMethods.contains(request.method))
        guard case .recorded(let span) = TraceHeadSampling.start(tracer, method.name, continuing: fields) else {
            return try await next(request, context)
        }
        span.set { attributes in
            attributes[TraceAttribute.httpMethod] = method.attribute
            attributes[TraceAttribute.urlPath] = PathRedaction.redactedPath(request.uri.path)
            // Semantic conventions' spelling: `1.1`, `2`.
            attributes[TraceAttribute.protocolVersion] = context.httpVersion.hasPrefix("HTTP/") ? String(context.httpVersion.dropFirst(5)) : context.httpVersion
        }
        let current = CurrentRouteSpan(span)
        let response: Response
        do {
            // The calls the route makes (the store, a provider, the Runtime) are spans of its own.
            response = try await CallSpans.$current.withValue(CallSpans(tracer: tracer, parent: span)) {
                try await CurrentRouteSpan.$current.withValue(current) { try await next(request, context) }
            }
        } catch {
            // Only what the observation middleware lets through (it answers every route's error).
            span.end(failed: true, because: String(describing: type(of: error)))
            throw error
        }
        let route = context.endpointPath.flatMap { $0 == Self.unmatched ? nil : $0 }
        let (status, requestID) = (Int(response.status.code), response.headers[Self.requestID])
        // A decision's span keeps its own name and route (the original request's).
        let decision = current.isDecision
        if let route, !decision { span.rename("\(method.name) \(route)") }
        span.set { attributes in
            if let route, !decision { attributes[TraceAttribute.httpRoute] = route }
            attributes[TraceAttribute.httpStatus] = status
            if let requestID { attributes[TraceAttribute.requestID] = requestID }
        }
        span.end(failed: status >= 500)
        return response
    }

    static let traceparent = HTTPField.Name("traceparent")!
    static let tracestate = HTTPField.Name("tracestate")!
    static let requestID = HTTPField.Name("X-Request-Id")!
}
