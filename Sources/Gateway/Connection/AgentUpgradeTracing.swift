import DataPlane
import EdgeHTTP
import NIOCore
import NIOHTTP1
import SecurityGuard
import SocketGuard
import Traces
import TrafficCop

/// The span of an agent socket's upgrade (`tracing` on): a server span named
/// `GET /api/runtime/agent`, from the request's head to the 101 or the refusal.
///
/// The upgrade is answered before Hummingbird's routes, so `RouteTracingMiddleware` never sees
/// it; this starts its span as the data plane starts a proxied request's, at the head, on the
/// event loop: the caller's `traceparent` followed from a trusted proxy (or anyone's with
/// `tracing.continue_any_caller`), recorded by the same head sampling. The guard's waits on the
/// store and the Runtime are its children (`CallSpans`). What the socket carries after the 101
/// is not traced: a socket lives for hours, and a span for it would end only when it closes.
struct AgentUpgradeTracing: Sendable {
    let tracer: RequestTracer
    let clientAddresses: ClientAddressResolver

    /// The upgrade's span when its trace is recorded; `nil` otherwise (nothing to end).
    func start(_ head: HTTPRequestHead, peer: SocketAddress?) -> RequestSpan? {
        let follows = tracer.followsAnyCaller || peer?.ipAddress.map(clientAddresses.isTrustedProxy) == true
        let fields = TraceContextFields.followed(in: head, if: follows)
        guard case .recorded(let span) = TraceHeadSampling.start(tracer, "GET \(WebSocketGuard.path)", continuing: fields) else { return nil }
        span.set { attributes in
            attributes[TraceAttribute.httpMethod] = "GET"
            attributes[TraceAttribute.httpRoute] = WebSocketGuard.path
            attributes[TraceAttribute.urlPath] = WebSocketGuard.path
            attributes[TraceAttribute.protocolVersion] = "1.1"
        }
        return span
    }

    /// Ends `span` with the upgrade's outcome: 101 and `allowed` with the user for a socket
    /// admitted, the refusal's status and stable code otherwise (a 5xx marks it an error).
    static func end(_ span: RequestSpan, admitted caller: AuthenticatedCaller?, refusal: GatewayError?) {
        let status = caller != nil ? 101 : Int(refusal?.status.code ?? 500)
        span.set { attributes in
            attributes[TraceAttribute.httpStatus] = status
            attributes[TraceAttribute.decision] = caller != nil ? "allowed" : (refusal?.code ?? "internal_error")
            if let caller { attributes[TraceAttribute.userID] = caller.userID }
        }
        span.end(failed: status >= 500)
    }
}
