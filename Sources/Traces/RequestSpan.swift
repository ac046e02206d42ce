import Tracing

/// One span of the gateway's, as the data plane, forward-auth and ext_authz fill it: attribute
/// names from OpenTelemetry's semantic conventions (`TraceAttribute`), never a token, a cookie
/// or a query.
public struct RequestSpan: Sendable {
    let span: any Span

    init(_ span: any Span) {
        self.span = span
    }

    /// Whether the span is sampled: attributes set on one that is not are dropped, so a caller
    /// computes them only when it is.
    public var isRecording: Bool { span.isRecording }

    /// The span's name (an MCP request's is known once its body is read).
    public func rename(_ name: String) {
        span.operationName = name
    }

    /// Sets the attributes `update` writes, at once.
    public func set(_ update: (inout SpanAttributes) -> Void) {
        guard span.isRecording else { return }
        span.updateAttributes(update)
    }

    /// Sets `http.response.status_code`: the answer a call got, or a request's.
    public func setStatusCode(_ code: Int) {
        set { $0[TraceAttribute.httpStatus] = code }
    }

    /// Marks the span an error before it ends (a call whose failure comes back as a value, not a throw).
    public func markFailed(because message: String) {
        span.setStatus(SpanStatus(code: .error, message: message))
    }

    /// Ends the span of a call with its outcome: a failure marks it an error.
    public func end<T>(after result: Result<T, any Error>) {
        if case .failure = result { end(failed: true) } else { end() }
    }

    /// Ends the span; `failed` marks it an error (a server span's 5xx, a call that failed).
    public func end(failed: Bool = false, because message: String? = nil) {
        if failed { span.setStatus(SpanStatus(code: .error, message: message)) }
        span.end()
    }
}
