/// Percent-encoding of a query or form value: every byte but RFC 3986's unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`) as `%XX`, a space included (as `%20`, never `+`);
/// and the strict reading of a query or an `application/x-www-form-urlencoded` body.
package enum FormEncoding {
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    package static func encode(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(Unicode.Scalar(hexDigits[Int(byte >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(hexDigits[Int(byte & 0x0F)]))
            }
        }
        return out
    }

    /// The fields of `text` (`name=value&...`, `+` as a space, `%XX` decoded), by name.
    ///
    /// - Returns: `nil` when a field is named twice (which one counts would be a guess), a
    ///   percent sign is not followed by two hex digits, or a decoded byte sequence is not UTF-8.
    package static func fields(_ text: Substring) -> [String: String]? {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : ""), fields[name] == nil else { return nil }
            fields[name] = value
        }
        return fields
    }

    static func decode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The value of one hexadecimal digit, either case; `nil` for any other byte.
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
