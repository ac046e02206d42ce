import EdgeHTTP
import JOSE
import NIOHTTP1

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
    static func startedTraceparent(for headers: HTTPHeaders) -> String? {
        let sent = headers["traceparent"]
        if sent.count == 1, isValid(sent[0]) { return nil }
        guard let random = RandomReservoir.shared.bytes(24) else { return nil }
        return "00-" + hex(random[0..<16]) + "-" + hex(random[16..<24]) + "-01"
    }

    /// The trace id of a valid `traceparent`.
    static func traceID(_ traceparent: String?) -> String? {
        guard let traceparent, isValid(traceparent) else { return nil }
        return String(decoding: Array(traceparent.utf8)[3..<35], as: UTF8.self)
    }

    static func isValid(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard bytes.count == 55, bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-") else { return false }
        func isHex(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) } }
        guard isHex(0..<2), isHex(3..<35), isHex(36..<52), isHex(53..<55) else { return false }
        guard bytes[0..<2] != [0x66, 0x66] else { return false }  // version ff is invalid
        return bytes[3..<35].contains { $0 != 0x30 } && bytes[36..<52].contains { $0 != 0x30 }
    }

    private static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
