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
/// plain path (over HTTP/2, say), which names the span as its decision (`CurrentRouteSpan`).
///
/// Outermost, so the span holds the answer as the client gets it (an error already turned into
/// its JSON) and its `X-Request-Id`. The caller's `traceparent` is followed as the data plane
/// follows it: from `gateway.trusted_proxies`, or from anyone with `tracing.continue_any_caller`.
struct RouteTracingMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext

    let tracer: RequestTracer
    let admission: Admission

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let follows = tracer.followsAnyCaller || context.peerAddress.map(admission.clientAddresses.isTrustedProxy) == true
        let fields =
            follows
            ? TraceContextFields.screened(traceparents: request.headers[values: Self.traceparent], tracestates: request.headers[values: Self.tracestate])
            : TraceContextFields()
        guard case .recorded(let span) = TraceHeadSampling.start(tracer, request.method.rawValue, continuing: fields) else {
            return try await next(request, context)
        }
        span.set { attributes in
            attributes[TraceAttribute.httpMethod] = request.method.rawValue
            attributes[TraceAttribute.urlPath] = PathRedaction.redactedPath(request.uri.path)
            // Semantic conventions' spelling: `1.1`, `2`.
            attributes[TraceAttribute.protocolVersion] = context.httpVersion.hasPrefix("HTTP/") ? String(context.httpVersion.dropFirst(5)) : context.httpVersion
        }
        let response: Response
        do {
            response = try await CurrentRouteSpan.$span.withValue(span) { try await next(request, context) }
        } catch {
            // Only what the observation middleware lets through (it answers every route's error).
            span.end(failed: true, because: String(describing: type(of: error)))
            throw error
        }
        let (route, status, requestID) = (context.endpointPath, Int(response.status.code), response.headers[Self.requestID])
        if let route, span.isRecording, !(request.uri.path == ForwardAuthRoutes.path) { span.rename("\(request.method.rawValue) \(route)") }
        span.set { attributes in
            if let route, attributes[TraceAttribute.httpRoute] == nil { attributes[TraceAttribute.httpRoute] = route }
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

/// The span `RouteTracingMiddleware` started for the request this task answers, for a route
/// that says more about it (forward-auth names it as its decision); `nil` when not recorded.
enum CurrentRouteSpan {
    @TaskLocal static var span: RequestSpan?
}
