import EdgeHTTP
import JOSE
import NIOHTTP1
import Traces

/// W3C Trace Context on MCP routes: the client's `traceparent` goes to the server as it came, and
/// when it sent none (or an invalid one) the gateway starts a trace, so a call can be followed downstream.
enum MCPTrace {
    /// `traceparent` or `tracestate`, in any case.
    static func isTraceField(_ name: String) -> Bool {
        (name.utf8.count == 11 && HeaderScreen.equalsLowercased(name.utf8, "traceparent"))
            || (name.utf8.count == 10 && HeaderScreen.equalsLowercased(name.utf8, "tracestate"))
    }

    /// A new `traceparent` when the request carries no valid one (exactly one field,
    /// `00-<32 hex>-<16 hex>-<2 hex>`, ids not all zero); `nil` when the client's goes on.
    static func startedTraceparent(sent: [String]) -> String? {
        if sent.count == 1, isValid(sent[0]) { return nil }
        guard let random = RandomReservoir.shared.bytes(24) else { return nil }
        // "00-" + 32 hex digits (trace id) + "-" + 16 (parent id) + "-01", written once.
        return String(unsafeUninitializedCapacity: 55) { out in
            let digits: StaticString = "0123456789abcdef"
            var at = 0
            func put(_ byte: UInt8) {
                out[at] = byte
                at += 1
            }
            for byte in "00-".utf8 { put(byte) }
            for (index, byte) in random.enumerated() {
                if index == 16 { put(0x2D) }
                put(digits.utf8Start[Int(byte >> 4)])
                put(digits.utf8Start[Int(byte & 0x0F)])
            }
            for byte in "-01".utf8 { put(byte) }
            return at
        }
    }

    /// The trace id of a valid `traceparent`.
    static func traceID(_ traceparent: String?) -> String? {
        guard let traceparent, isValid(traceparent) else { return nil }
        let utf8 = traceparent.utf8
        return String(utf8[utf8.index(utf8.startIndex, offsetBy: 3)..<utf8.index(utf8.startIndex, offsetBy: 35)])
    }

    static func isValid(_ value: String) -> Bool {
        TraceContextFields.isValid(traceparent: value, laterVersions: true)
    }

    /// An `Mcp-Session-Id` as a span records it: visible ASCII (the transport's rule), at most 256 bytes; else none.
    static func loggableSessionID(_ value: String) -> String? {
        value.utf8.count <= 256 && !value.isEmpty && value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) ? value : nil
    }
}
