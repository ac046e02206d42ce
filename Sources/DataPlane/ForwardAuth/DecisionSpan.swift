import Observability
import Traces

/// The span of one access decision an edge in front asks for (`forward_auth GET`, `ext_authz
/// GET`), on the event loop (`AccessDecision`) or on Hummingbird (forward-auth over HTTP/2 and
/// what the plain path hands on): one start and one end for both, so their spans read alike.
public struct DecisionSpan: Sendable {
    /// The recorded span, the parent of the decision's waits.
    public let span: RequestSpan

    /// Starts the span named for `asker` and the original method, continuing `fields` (the
    /// asker is trusted by configuration: a proxy in `gateway.trusted_proxies`, or an
    /// `ext_authz` caller). `nil` when the trace is not recorded (`TraceHeadSampling`): a decision
    /// calls nothing that carries a trace on.
    public static func start(
        _ tracer: RequestTracer, asker: String, method: String, path: Substring, host: String?, clientAddress: String, requestID: String,
        continuing fields: TraceContextFields
    ) -> DecisionSpan? {
        guard case .recorded(let span) = TraceHeadSampling.start(tracer, "\(asker) \(method)", continuing: fields) else { return nil }
        describe(span, asker: asker, method: method, path: path, host: host, clientAddress: clientAddress, requestID: requestID)
        return DecisionSpan(span: span)
    }

    /// Names `span` for the decision and sets what the question says: also for a request span
    /// Hummingbird's routes started (forward-auth over HTTP/2), which becomes the decision's.
    public static func describe(_ span: RequestSpan, asker: String, method: String, path: Substring, host: String?, clientAddress: String, requestID: String?) {
        span.rename("\(asker) \(method)")
        span.set { attributes in
            attributes[TraceAttribute.asker] = asker
            attributes[TraceAttribute.httpMethod] = method
            attributes[TraceAttribute.urlPath] = PathRedaction.redactedPath(String(path))
            if let host { attributes[TraceAttribute.serverAddress] = host }
            attributes[TraceAttribute.clientAddress] = clientAddress
            if let requestID { attributes[TraceAttribute.requestID] = requestID }
        }
    }

    /// The matched route's prefix and the user on a decision's span, whichever is known.
    public static func note(_ span: RequestSpan, routePrefix: String?, userID: String?) {
        span.set { attributes in
            if let routePrefix { attributes[TraceAttribute.httpRoute] = routePrefix.isEmpty ? "/" : routePrefix }
            if let userID { attributes[TraceAttribute.userID] = userID }
        }
    }

    /// How a decision ended.
    public enum Outcome: Sendable {
        case allowed
        /// Refused with this stable code and HTTP status.
        case refused(code: String, status: Int)
        /// The asker left before the decision.
        case askerGone
    }

    /// Ends the span with the route's prefix and the user when known, and the outcome: `allowed`
    /// or the refusal's code and status; a 5xx marks the span failed.
    public func end(_ outcome: Outcome, routePrefix: String?, userID: String?) {
        Self.note(span, routePrefix: routePrefix, userID: userID)
        span.set { attributes in
            switch outcome {
            case .allowed: attributes[TraceAttribute.decision] = "allowed"
            case .refused(let code, let status):
                attributes[TraceAttribute.decision] = code
                attributes[TraceAttribute.httpStatus] = status
            case .askerGone: attributes[TraceAttribute.decision] = "asker_gone"
            }
        }
        if case .refused(let code, let status) = outcome, status >= 500 { return span.end(failed: true, because: code) }
        span.end()
    }
}
