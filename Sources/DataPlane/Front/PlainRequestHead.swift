/// Reads the common proxied request's head straight from a connection's bytes, for the
/// data plane's front (`ProxyFrontHandler`), without NIO's decoder.
///
/// "Plain" is deliberately narrow: an HTTP/1.1 request line with a route method and an
/// origin-form target of unreserved bytes, then fields whose names are tokens and whose
/// values are visible ASCII with single spaces or tabs, every line ended by CRLF, a body
/// only as one `Content-Length` of decimal digits (at most 15, no leading zero; never a sign,
/// a list, a second one or a `Transfer-Encoding`), no `Upgrade`, no `Expect`, no
/// `Proxy-Connection`, and at most one `Connection`, `keep-alive` or `close` (the exchange
/// closes after its answer to `close`, as it does on NIO's path); the target no longer
/// than a field may be and the whole head within its bound, as NIO's decoder counts them.
/// Whatever is not plain is `.notPlain`, never an error: the caller hands those bytes to
/// NIO's decoder, which decides (and refuses) as it
/// does for every other request. So this reader can only ever take fewer requests than NIO,
/// and every head it takes is the head NIO's decoder gives for the same bytes (the
/// differential tests against NIO's decoder check that). Depends on nothing but the
/// standard library, so the fuzz target compiles it alone (`scripts/fuzz.sh plain-request`).
package struct PlainRequestHead: Equatable {
    /// The methods a route serves.
    enum Method: String, CaseIterable, Sendable {
        case GET, POST, PUT, PATCH, DELETE, HEAD
    }

    let method: Method
    /// The target as sent (origin-form; not yet normalised).
    let uri: String
    /// The fields as sent, in order (name, value), each value without the whitespace before it.
    let fields: [(String, String)]
    /// The head's length in bytes, through its blank line.
    let length: Int
    /// The body's length in bytes (its `Content-Length`; 0 without one): the bytes after the head
    /// that are this request's, before the next request's head.
    let bodyLength: Int

    package static func == (lhs: PlainRequestHead, rhs: PlainRequestHead) -> Bool {
        lhs.method == rhs.method && lhs.uri == rhs.uri && lhs.length == rhs.length && lhs.bodyLength == rhs.bodyLength
            && lhs.fields.elementsEqual(rhs.fields) { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    enum Outcome: Equatable {
        /// A plain head; `bodyLength` bytes of body follow it.
        case complete(PlainRequestHead)
        /// The bytes so far are the start of a head that could still be plain.
        case incomplete
        /// Not for this reader: NIO's decoder takes these bytes.
        case notPlain
    }

    /// The listener's bounds on a head (`limits.max_header_*`): a head past one is not
    /// plain, so NIO's decoder answers it as it answers any other.
    package struct Limits: Sendable {
        var maximumHeadBytes: Int
        var maximumFieldCount: Int
        var maximumFieldBytes: Int

        package init(maximumHeadBytes: Int, maximumFieldCount: Int, maximumFieldBytes: Int) {
            self.maximumHeadBytes = maximumHeadBytes
            self.maximumFieldCount = maximumFieldCount
            self.maximumFieldBytes = maximumFieldBytes
        }
    }

    /// Reads the head at the start of `bytes`.
    static func parse(_ bytes: UnsafeRawBufferPointer, limits: Limits) -> Outcome {
        // The request line: METHOD SP target SP HTTP/1.1 CRLF.
        guard let (method, methodEnd) = self.method(bytes) else {
            return bytes.count < 8 && isMethodPrefix(bytes) ? .incomplete : .notPlain
        }
        var index = methodEnd + 1
        let targetStart = index
        guard index < bytes.count else { return .incomplete }
        guard bytes[index] == UInt8(ascii: "/") else { return .notPlain }
        // NIO's decoder counts the target as a field: no longer than one, and part of the head's bytes
        // (a target past the head's bound makes a head past it, whatever the field bound).
        while index < bytes.count, bytes[index] != 0x20 {
            guard isTargetByte(bytes[index]), index - targetStart < limits.maximumFieldBytes, index < limits.maximumHeadBytes else { return .notPlain }
            index += 1
        }
        let targetEnd = index
        // What came of the version must be the start of it: `.incomplete` never holds a blank line.
        guard matchesPrefix(bytes, at: index, " HTTP/1.1\r\n") else { return .notPlain }
        guard index + 11 <= bytes.count else { return index > limits.maximumHeadBytes ? .notPlain : .incomplete }
        index += 11

        // The fields, up to the blank line.
        var fields: [(String, String)] = []
        var fieldBytes = targetEnd - targetStart
        var bodyLength: Int?
        var sawConnection = false
        while true {
            guard index < bytes.count else { return index > limits.maximumHeadBytes ? .notPlain : .incomplete }
            if bytes[index] == 0x0D {
                guard index + 1 < bytes.count else { return index > limits.maximumHeadBytes ? .notPlain : .incomplete }
                guard bytes[index + 1] == 0x0A else { return .notPlain }
                index += 2
                // The whole head within its bound, however few fields it has.
                guard index <= limits.maximumHeadBytes else { return .notPlain }
                break
            }
            let nameStart = index
            while index < bytes.count, isTokenByte(bytes[index]) { index += 1 }
            guard index < bytes.count else { return index > limits.maximumHeadBytes ? .notPlain : .incomplete }
            guard index > nameStart, bytes[index] == UInt8(ascii: ":") else { return .notPlain }
            let nameEnd = index
            index += 1
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 }
            let valueStart = index
            while index < bytes.count, isValueByte(bytes[index]) { index += 1 }
            guard index + 1 < bytes.count else { return index > limits.maximumHeadBytes ? .notPlain : .incomplete }
            // CRLF right after the value; no whitespace before it (NIO keeps trailing whitespace in a value).
            guard bytes[index] == 0x0D, bytes[index + 1] == 0x0A else { return .notPlain }
            if index > valueStart, bytes[index - 1] == 0x20 || bytes[index - 1] == 0x09 { return .notPlain }
            let valueEnd = index
            index += 2
            fieldBytes += (nameEnd - nameStart) + (valueEnd - valueStart)
            guard fields.count < limits.maximumFieldCount, (nameEnd - nameStart) + (valueEnd - valueStart) <= limits.maximumFieldBytes,
                fieldBytes <= limits.maximumHeadBytes, index <= limits.maximumHeadBytes
            else { return .notPlain }
            let name = UnsafeRawBufferPointer(rebasing: bytes[nameStart..<nameEnd])
            let value = UnsafeRawBufferPointer(rebasing: bytes[valueStart..<valueEnd])
            if equalsLowercased(name, "content-length") {
                // One length of digits only: a second one (even equal), a list or a sign is NIO's to decide.
                guard bodyLength == nil, let length = decimalLength(value) else { return .notPlain }
                bodyLength = length
            } else if equalsLowercased(name, "connection") {
                // One, of one token: NIO's decoder and the head's own reading agree on closing only
                // then (two `keep-alive` fields keep the connection open by the first, close it by
                // the second).
                guard !sawConnection, equalsLowercased(value, "keep-alive") || equalsLowercased(value, "close") else { return .notPlain }
                sawConnection = true
            } else if !isPlainField(name, value) {
                return .notPlain
            }
            if fields.isEmpty { fields.reserveCapacity(16) }
            fields.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
        let uri = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[targetStart..<targetEnd]), as: UTF8.self)
        return .complete(PlainRequestHead(method: method, uri: uri, fields: fields, length: index, bodyLength: bodyLength ?? 0))
    }

    /// The method at the start of `bytes` when it is one a route serves and a space follows it.
    private static func method(_ bytes: UnsafeRawBufferPointer) -> (Method, Int)? {
        for (name, method) in methods where matches(bytes, at: 0, name) && bytes.count > name.utf8CodeUnitCount
            && bytes[name.utf8CodeUnitCount] == 0x20
        {
            return (method, name.utf8CodeUnitCount)
        }
        return nil
    }

    private static let methods: [(StaticString, Method)] = [
        ("GET", .GET), ("POST", .POST), ("PUT", .PUT), ("PATCH", .PATCH), ("DELETE", .DELETE), ("HEAD", .HEAD),
    ]

    /// Whether `bytes` (fewer than a method and its space) could still become one.
    private static func isMethodPrefix(_ bytes: UnsafeRawBufferPointer) -> Bool {
        methods.contains { name, _ in
            let count = min(bytes.count, name.utf8CodeUnitCount)
            return (0..<count).allSatisfy { bytes[$0] == name.utf8Start[$0] } && (bytes.count <= name.utf8CodeUnitCount || bytes[name.utf8CodeUnitCount] == 0x20)
        }
    }

    /// A field this reader takes (other than `Content-Length`): not one that frames a body
    /// otherwise, changes the protocol or asks for an interim answer (`Connection` is read apart:
    /// one field, `keep-alive` or `close`, which the request's head carries to the exchange).
    private static func isPlainField(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Bool {
        // NIO's parser reads Proxy-Connection as it reads Connection (close after the answer): left to it.
        return !(equalsLowercased(name, "transfer-encoding") || equalsLowercased(name, "upgrade")
            || equalsLowercased(name, "expect") || equalsLowercased(name, "proxy-connection"))
    }

    /// The longest `Content-Length` read here: 15 digits, far below `Int`'s bound, so the sum never overflows.
    static let maximumLengthDigits = 15

    /// `value` as a body length when it is decimal digits only, at most `maximumLengthDigits` of
    /// them, and no leading zero (but `0` itself); `nil` for anything else, which NIO decides.
    static func decimalLength(_ value: UnsafeRawBufferPointer) -> Int? {
        guard !value.isEmpty, value.count <= maximumLengthDigits, value.count == 1 || value[0] != UInt8(ascii: "0") else { return nil }
        var length = 0
        for byte in value {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            length = length * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return length
    }

    /// Whether the bytes from `offset` (as many as there are, up to `text`'s length) begin `text`.
    private static func matchesPrefix(_ bytes: UnsafeRawBufferPointer, at offset: Int, _ text: StaticString) -> Bool {
        let count = min(text.utf8CodeUnitCount, bytes.count - offset)
        guard count >= 0 else { return false }
        for index in 0..<count where bytes[offset + index] != text.utf8Start[index] { return false }
        return true
    }

    /// Whether `bytes` at `offset` start with `text`, byte for byte.
    private static func matches(_ bytes: UnsafeRawBufferPointer, at offset: Int, _ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard offset + count <= bytes.count else { return false }
        for index in 0..<count where bytes[offset + index] != text.utf8Start[index] { return false }
        return true
    }

    /// Whether `bytes` is `lowercased` in any letter case (`lowercased` holds no letter other than a-z).
    static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ lowercased: StaticString) -> Bool {
        guard bytes.count == lowercased.utf8CodeUnitCount else { return false }
        for index in 0..<bytes.count where bytes[index] | 0x20 != lowercased.utf8Start[index] | 0x20 { return false }
        return true
    }

    /// A target byte: RFC 3986's unreserved, sub-delims, `:`, `@`, `/`, `?` and `%` (no `#`,
    /// no space, nothing outside printable ASCII).
    static func isTargetByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            true
        case UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "%"): true
        default: false
        }
    }

    /// A token byte (RFC 9110 §5.6.2).
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// A byte of a plain field value: visible ASCII, space or tab.
    static func isValueByte(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte < 0x7F)
    }
}
