#if canImport(JOSE)
import JOSE
#endif

/// Percent-encoding of a query or form value: every byte but RFC 3986's unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`) as `%XX`, a space included (as `%20`, never `+`);
/// and the strict reading of a query or an `application/x-www-form-urlencoded` body.
package enum FormEncoding {
    /// `PercentEncoding.encode`: every byte but the unreserved characters as `%XX`.
    package static func encode(_ text: String) -> String {
        PercentEncoding.encode(text)
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
                guard let high = iterator.next().flatMap(PercentEncoding.hexValue), let low = iterator.next().flatMap(PercentEncoding.hexValue) else { return nil }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
