import Tracing

/// The W3C Trace Context fields of one request (`traceparent`, `tracestate`): the carrier the
/// tracer extracts a parent from and injects a span's context into.
public struct TraceContextFields: Sendable, Equatable {
    public var traceparent: String?
    public var tracestate: String?

    public init(traceparent: String? = nil, tracestate: String? = nil) {
        self.traceparent = traceparent
        self.tracestate = tracestate
    }

    /// The names the fields carry, lowercased: a proxy that sends its own drops the caller's, in any case.
    public static let names = ["traceparent", "tracestate"]
}

/// Reads and writes `TraceContextFields` for the tracer's propagator.
struct TraceContextFieldsCodec: Extractor, Injector {
    func extract(key: String, from carrier: TraceContextFields) -> String? {
        switch key {
        case "traceparent": carrier.traceparent
        case "tracestate": carrier.tracestate
        default: nil
        }
    }

    func inject(_ value: String, forKey key: String, into carrier: inout TraceContextFields) {
        switch key {
        case "traceparent": carrier.traceparent = value
        case "tracestate": carrier.tracestate = value
        default: break
        }
    }
}
