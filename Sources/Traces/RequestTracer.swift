import Tracing

/// Starts the gateway's spans: a request it serves or decides (continuing the caller's trace), and
/// each call it makes for one.
///
/// A request is traced or not by the tracer's sampler; an unsampled span records nothing but
/// still carries the trace on (its `traceparent` says not sampled), so a trace is never cut.
public struct RequestTracer: Sendable {
    private let tracer: any Tracer
    /// `tracing.continue_any_caller`: a request's trace context is continued whoever sent it, not
    /// only a trusted proxy's.
    public let followsAnyCaller: Bool
    /// `tracing.sample_ratio`: the share of traces that start here which are recorded, decided by
    /// the caller before it asks for a span (the tracer records every span it is asked for).
    public let sampleRatio: Double

    public init(_ tracer: some Tracer, followsAnyCaller: Bool = false, sampleRatio: Double = 1) {
        self.tracer = tracer
        self.followsAnyCaller = followsAnyCaller
        self.sampleRatio = sampleRatio
    }

    /// A span for a request the gateway serves or decides, the child of the trace `fields` names
    /// when its `traceparent` is valid (a new trace otherwise): screen a caller's with
    /// `TraceContextFields.screened` first.
    public func startServerSpan(_ name: String, continuing fields: TraceContextFields) -> RequestSpan {
        var context = InstrumentationContext.topLevel
        if fields.traceparent != nil { tracer.extract(fields, into: &context, using: TraceContextFieldsCodec()) }
        return RequestSpan(tracer.startSpan(name, context: context, ofKind: .server))
    }

    /// A span for a call the gateway makes for `parent`'s request (the upstream, the store, a provider).
    public func startClientSpan(_ name: String, parent: RequestSpan) -> RequestSpan {
        RequestSpan(tracer.startSpan(name, context: parent.span.context, ofKind: .client))
    }

    /// The Trace Context fields a call made in `span` carries, naming `span` as the parent.
    public func fields(of span: RequestSpan) -> TraceContextFields {
        var fields = TraceContextFields()
        tracer.inject(span.span.context, into: &fields, using: TraceContextFieldsCodec())
        return fields
    }
}
