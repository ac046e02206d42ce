// The fuzz targets compile this file with the parsers that use it, outside the package.

/// Percent-encoding (RFC 3986 §2.1) as query values, forms and redirect targets need it: one
/// spelling out, every spelling read back by the callers' own rules.
public enum PercentEncoding {
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// `text` with every byte but RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`) as
    /// `%XX` in upper case, a space included (`%20`, never `+`): safe as a query value anywhere.
    public static func encode(_ text: String) -> String {
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

    /// The value of one hexadecimal digit, either case; `nil` for any other byte.
    @inline(__always)
    public static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
