/// Serialises `JSONValue`s: compact for tokens (members in insertion order, so
/// the same claims always give the same bytes), or indented for people.
public enum JSONWriter {
    /// Compact JSON bytes.
    public static func bytes(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, into: &out, indent: nil, level: 0)
        return out
    }

    /// Compact JSON text.
    public static func string(_ value: JSONValue) -> String {
        String(decoding: bytes(value), as: UTF8.self)
    }

    /// JSON text indented by two spaces, for terminals.
    public static func pretty(_ value: JSONValue) -> String {
        var out: [UInt8] = []
        write(value, into: &out, indent: 2, level: 0)
        return String(decoding: out, as: UTF8.self)
    }

    private static func newline(_ out: inout [UInt8], _ indent: Int?, _ level: Int) {
        guard let indent else { return }
        out.append(0x0A)
        out.append(contentsOf: repeatElement(0x20, count: indent * level))
    }

    private static func write(_ value: JSONValue, into out: inout [UInt8], indent: Int?, level: Int) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
        case .number(let number): out.append(contentsOf: format(number).utf8)
        case .string(let text): writeString(text, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (offset, element) in elements.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                newline(&out, indent, level + 1)
                write(element, into: &out, indent: indent, level: level + 1)
            }
            if !elements.isEmpty { newline(&out, indent, level) }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (offset, member) in object.members.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                newline(&out, indent, level + 1)
                writeString(member.name, into: &out)
                out.append(UInt8(ascii: ":"))
                if indent != nil { out.append(0x20) }
                write(member.value, into: &out, indent: indent, level: level + 1)
            }
            if object.count > 0 { newline(&out, indent, level) }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Integral values within 2^53 print without a fraction, as NumericDates must.
    static func format(_ number: Double) -> String {
        if number == number.rounded(), abs(number) < 9_007_199_254_740_992 {
            return String(Int64(number))
        }
        return "\(number)"
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    private static func writeString(_ text: String, into out: inout [UInt8]) {
        appendString(text, to: &out)
    }

    /// Appends `text` as a JSON string literal (quoted and escaped) to `out`: for lines
    /// built as bytes (the access log), without a `JSONValue` or a `String` in between.
    public static func appendString(_ text: some StringProtocol, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        appendEscaped(text.utf8, to: &out)
        out.append(UInt8(ascii: "\""))
    }

    /// Appends UTF-8 `bytes` escaped as inside a JSON string literal, without the quotes.
    public static func appendEscaped(_ bytes: some Sequence<UInt8>, to out: inout [UInt8]) {
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: out.append(byte)
            }
        }
    }
}
