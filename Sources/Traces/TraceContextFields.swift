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

    /// A caller's fields as the gateway follows them: a `traceparent` only when valid (version 00's
    /// layout, lowercase hex, ids not all zero), and its `tracestate` only beside it, when at most
    /// 512 bytes of at most 32 well-formed members (a longer or odd one is dropped, never the
    /// trace: W3C Trace Context §3.3 lets a proxy discard it).
    public static func screened(traceparent: String?, tracestate: String?) -> TraceContextFields {
        guard let traceparent, isValid(traceparent: traceparent) else { return TraceContextFields() }
        return TraceContextFields(traceparent: traceparent, tracestate: tracestate.flatMap { isValid(tracestate: $0) ? $0 : nil })
    }

    /// `screened` of a request's values of each field, from any carrier (HTTP fields, gRPC
    /// metadata): a field sent more than once names no one value, and counts as absent.
    public static func screened(traceparents: some Collection<String>, tracestates: some Collection<String>) -> TraceContextFields {
        screened(traceparent: traceparents.count == 1 ? traceparents.first : nil, tracestate: tracestates.count == 1 ? tracestates.first : nil)
    }

    /// A `traceparent` of version 00: `00-<32 hex>-<16 hex>-<2 hex>`, lowercase, neither id all
    /// zeros (the version the tracer reads: a later one names no parent to it, and a trace
    /// starts). `laterVersions`: any version but `ff` in that layout, as a proxy that passes the
    /// field on unread may take it (W3C Trace Context §3.2.4).
    public static func isValid(traceparent value: String, laterVersions: Bool = false) -> Bool {
        var value = value
        return value.withUTF8 { bytes in
            guard bytes.count == 55, bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-") else { return false }
            func isHex(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) } }
            guard isHex(0..<2), isHex(3..<35), isHex(36..<52), isHex(53..<55) else { return false }
            guard laterVersions ? !(bytes[0] == 0x66 && bytes[1] == 0x66) : (bytes[0] == 0x30 && bytes[1] == 0x30) else { return false }
            return bytes[3..<35].contains { $0 != 0x30 } && bytes[36..<52].contains { $0 != 0x30 }
        }
    }

    /// A `tracestate` the gateway passes on: at most 512 bytes and 32 members, separated by `,`
    /// and spaces after it; each `key=value`, the key of lowercase letters, digits and `_-*/`,
    /// or `tenant@system` (at most 241 and 14 of them), the value 1 to 256 printable ASCII
    /// characters without `,` or `=`, not ending in a space. What both W3C Trace Context §3.3.1
    /// and the tracer's reader accept: a value either would refuse is dropped, not the trace.
    public static func isValid(tracestate value: String) -> Bool {
        guard value.utf8.count <= 512, !value.isEmpty else { return false }
        var members = 0
        for (index, member) in value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).enumerated() {
            let member = index == 0 ? member : member.drop { $0 == 0x20 }
            members += 1
            guard members <= 32, let equals = member.firstIndex(of: UInt8(ascii: "=")) else { return false }
            let key = member[member.startIndex..<equals], val = member[member.index(after: equals)...]
            guard !val.isEmpty, val.count <= 256, val.last != 0x20,
                val.allSatisfy({ (0x20...0x7E).contains($0) && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "=") })
            else { return false }
            func isKeyPart(_ part: some Collection<UInt8>, _ limit: Int) -> Bool {
                !part.isEmpty && part.count <= limit && part.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || "_-*/".utf8.contains($0) }
            }
            let parts = key.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
            switch parts.count {
            case 1: guard isKeyPart(parts[0], 256) else { return false }
            case 2: guard isKeyPart(parts[0], 241), isKeyPart(parts[1], 14) else { return false }
            default: return false
            }
        }
        return true
    }
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
