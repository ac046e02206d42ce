import JOSE
import Traces

/// How a request's trace starts (tracing on): recorded, with a span through the tracer, or only
/// carried on, with no span at all.
///
/// Decided here, on the loop, before the tracer is asked (head sampling): a continued caller's
/// `traceparent` decides by its sampled flag, a trace that starts here by `tracing.sample_ratio`
/// over its random trace id (as OpenTelemetry's `traceidratio` does). An unrecorded request costs
/// one draw of libcrypto's random bytes and a `traceparent` written for its calls; only a
/// recorded one reaches swift-otel, whose sampler then records every span it is asked for.
package enum TraceHeadSampling {
    /// A span, recorded.
    case recorded(RequestSpan)
    /// Not recorded: the Trace Context the request's calls carry (the caller's trace, or one
    /// started here, not sampled, with a span id of its own for the request).
    case carried(TraceContextFields)

    /// Starts `name`'s trace, continuing `fields` (already screened: a caller's when followed, else empty).
    package static func start(_ tracer: RequestTracer, _ name: @autoclosure () -> String, continuing fields: TraceContextFields) -> TraceHeadSampling? {
        if let parent = fields.traceparent {
            // The caller's flags decide: bit 0 is "sampled" (W3C Trace Context §3.2.2.5).
            let utf8 = Array(parent.utf8)
            guard utf8.count == 55 else { return nil }  // screened: never so
            if let flags = UInt8(String(decoding: utf8[53..<55], as: UTF8.self), radix: 16), flags & 1 == 1 {
                return .recorded(tracer.startServerSpan(name(), continuing: fields))
            }
            guard let spanID = RandomReservoir.shared.bytes(8) else { return nil }
            let carried = String(decoding: utf8[0..<36], as: UTF8.self) + hex(spanID) + String(decoding: utf8[52..<55], as: UTF8.self)
            return .carried(TraceContextFields(traceparent: carried, tracestate: fields.tracestate))
        }
        guard let ids = RandomReservoir.shared.bytes(24) else { return nil }
        // The trace id's last eight bytes against the ratio, as OpenTelemetry's TraceIdRatioBased reads them.
        let low = ids[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        if tracer.sampleRatio >= 1 || Double(low) < tracer.sampleRatio * 18_446_744_073_709_551_616.0 {
            return .recorded(tracer.startServerSpan(name(), continuing: TraceContextFields()))
        }
        return .carried(TraceContextFields(traceparent: "00-" + hex(ids[0..<16]) + "-" + hex(ids[16..<24]) + "-00"))
    }

    /// Lowercase hex, two digits a byte.
    private static let digits = Array("0123456789abcdef".utf8)

    static func hex(_ bytes: some Collection<UInt8>) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
