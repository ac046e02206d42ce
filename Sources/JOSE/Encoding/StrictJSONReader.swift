#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the strict reader refused a document.
public struct JSONReadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable short code: `byte_order_mark`, `invalid_utf8`, `duplicate_member`,
    /// `too_deep`, `invalid_number`, `syntax`.
    public let code: String
    /// A sentence naming the problem and its byte offset.
    public let message: String

    public var description: String { message }
}

/// A strict JSON reader (RFC 8259) for JOSE headers and claim sets.
///
/// Stricter than Foundation's reader on purpose: it refuses a byte-order mark,
/// invalid UTF-8 (including lone surrogate escapes), duplicate member names,
/// nesting deeper than `maxDepth`, numbers that overflow a double, control
/// characters in strings, and anything after the top-level value but
/// whitespace. Two parsers that disagree on a token are an attack surface;
/// refusing what is ambiguous removes it.
public struct StrictJSONReader: Sendable {
    /// Deepest nesting of arrays and objects accepted (DESIGN.md: 32).
    public var maxDepth: Int

    public init(maxDepth: Int = 32) {
        self.maxDepth = maxDepth
    }

    /// Parses a complete JSON document.
    public func parse(_ bytes: [UInt8]) throws(JSONReadError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONReadError) -> JSONValue in try parse(UnsafeRawBufferPointer(buffer)) }
    }

    /// Parses a complete JSON document from memory the caller owns for the call.
    public func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONReadError) -> JSONValue {
        var parser = Parser(bytes: bytes.assumingMemoryBound(to: UInt8.self), maxDepth: maxDepth)
        return try parser.parseDocument()
    }

    /// Parses a complete JSON document that must be an object.
    public func parseObject(_ bytes: [UInt8]) throws(JSONReadError) -> JSONObject {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONReadError) -> JSONObject in try parseObject(UnsafeRawBufferPointer(buffer)) }
    }

    /// Parses a complete JSON document that must be an object, from memory the caller owns for the call.
    public func parseObject(_ bytes: UnsafeRawBufferPointer) throws(JSONReadError) -> JSONObject {
        guard case .object(let object) = try parse(bytes) else {
            throw JSONReadError(code: "syntax", message: "the JSON document is not an object")
        }
        return object
    }
}

private struct Parser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0
    var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func fail(_ code: String, _ what: String) -> JSONReadError {
        JSONReadError(code: code, message: "\(what) at byte \(index)")
    }

    mutating func parseDocument() throws(JSONReadError) -> JSONValue {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF {
            throw fail("byte_order_mark", "a byte-order mark is not allowed")
        }
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail("syntax", "unexpected data after the JSON value") }
        return value
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONReadError) -> JSONValue {
        guard index < bytes.count else { throw fail("syntax", "unexpected end of JSON") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return .object(try parseObject())
        case UInt8(ascii: "["): return .array(try parseArray())
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail("syntax", "unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONReadError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("syntax", "unexpected end of JSON") }
        let pointer = literal.utf8Start
        for offset in 0..<count where bytes[index + offset] != pointer[offset] {
            throw fail("syntax", "invalid literal")
        }
        index += count
    }

    mutating func enter() throws(JSONReadError) {
        depth += 1
        if depth > maxDepth { throw fail("too_deep", "JSON nesting deeper than \(maxDepth) levels") }
    }

    mutating func parseObject() throws(JSONReadError) -> JSONObject {
        try enter()
        index += 1
        var members: [JSONMember] = []
        members.reserveCapacity(12)
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return JSONObject(uniqueMembers: members)
        }
        var seen: Set<String>? = nil
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("syntax", "expected a member name") }
            let nameOffset = index
            let (name, hash, registered) = try parseMemberName()
            // Small objects: a scan on hashes. Large ones (hostile input) switch to a set.
            let duplicate: Bool
            if members.count < 16 {
                duplicate = members.contains { $0.nameHash == hash && $0.name == name }
            } else {
                if seen == nil { seen = Set(members.map(\.name)) }
                duplicate = !seen!.insert(name).inserted
            }
            if duplicate {
                index = nameOffset
                throw fail("duplicate_member", "duplicate member name \"\(Self.printable(name))\"")
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("syntax", "expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            members.append(JSONMember(name, value, hash: hash, registered: registered))
            skipWhitespace()
            guard index < bytes.count else { throw fail("syntax", "unexpected end of JSON") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; break }
            throw fail("syntax", "expected ',' or '}'")
        }
        depth -= 1
        return JSONObject(uniqueMembers: members)
    }

    /// Member names go into error messages: keep them short and printable.
    static func printable(_ name: String) -> String {
        let clipped = name.unicodeScalars.prefix(40).map { $0.properties.isWhitespace || $0.value < 0x20 ? "?" : String($0) }.joined()
        return name.unicodeScalars.count > 40 ? clipped + "..." : clipped
    }

    mutating func parseArray() throws(JSONReadError) -> [JSONValue] {
        try enter()
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return elements
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("syntax", "unexpected end of JSON") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; break }
            throw fail("syntax", "expected ',' or ']'")
        }
        depth -= 1
        return elements
    }

    /// A member name, its FNV-1a hash (hashed while it is scanned), and the registered name it
    /// is, if any: found by hash while scanning, or, for a name spelled with escapes or beyond
    /// ASCII, by classifying the decoded name (`"s\u0075b"` is `sub`).
    mutating func parseMemberName() throws(JSONReadError) -> (String, UInt32, RegisteredName?) {
        let quote = index
        var hash: UInt32 = 2_166_136_261
        var scan = index + 1
        while scan < bytes.count {
            let byte = bytes[scan]
            if byte == UInt8(ascii: "\"") {
                // Names JOSE headers and claim sets use all the time (`RegisteredName`) are
                // returned as the shared literal instead of a new String: most names in a token
                // cost no allocation or UTF-8 decoding, and later comparisons with the literal
                // hit the fast path.
                if let registered = RegisteredName.candidate(hash: hash),
                    registered.isSpelled(by: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[(quote + 1)..<scan]))
                {
                    index = scan + 1
                    return (registered.text, hash, registered)
                }
                break
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 {
                // Escapes, control characters and non-ASCII take the general path.
                let name = try parseString()
                let hash = JSONMember.hash(name)
                return (name, hash, RegisteredName.classify(name, hash: hash))
            }
            hash = (hash ^ UInt32(byte)) &* 16_777_619
            scan += 1
        }
        // A plain ASCII name that is not registered (its hash named no candidate, or another name
        // with a candidate's hash).
        let name = try parseString()
        return (name, hash, nil)
    }

    mutating func parseString() throws(JSONReadError) -> String {
        index += 1  // opening quote
        let start = index
        var asciiOnly = true
        // Fast path: no escapes. Validate UTF-8 once over the raw run.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let run = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                // ASCII (the usual case) needs no validation; `String(decoding:)`
                // on a buffer is the fastest specialised path.
                if asciiOnly { return String(decoding: run, as: UTF8.self) }
                guard let text = String(validating: run, as: UTF8.self) else {
                    index -= 1
                    throw fail("invalid_utf8", "a string is not valid UTF-8")
                }
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw fail("syntax", "a control character in a string") }
            if byte >= 0x80 { asciiOnly = false }
            index += 1
        }
        guard index < bytes.count else { throw fail("syntax", "unterminated string") }
        return try parseEscapedString(from: start)
    }

    mutating func parseEscapedString(from start: Int) throws(JSONReadError) -> String {
        var scalars: [UInt8] = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                guard let text = String(validating: scalars, as: UTF8.self) else {
                    throw fail("invalid_utf8", "a string is not valid UTF-8")
                }
                return text
            }
            if byte < 0x20 { throw fail("syntax", "a control character in a string") }
            if byte != UInt8(ascii: "\\") {
                scalars.append(byte)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { throw fail("syntax", "unterminated escape") }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append(0x22)
            case UInt8(ascii: "\\"): scalars.append(0x5C)
            case UInt8(ascii: "/"): scalars.append(0x2F)
            case UInt8(ascii: "b"): scalars.append(0x08)
            case UInt8(ascii: "f"): scalars.append(0x0C)
            case UInt8(ascii: "n"): scalars.append(0x0A)
            case UInt8(ascii: "r"): scalars.append(0x0D)
            case UInt8(ascii: "t"): scalars.append(0x09)
            case UInt8(ascii: "u"):
                var code = try parseHex4()
                if (0xD800...0xDBFF).contains(code) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw fail("invalid_utf8", "an unpaired surrogate escape")
                    }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid_utf8", "an unpaired surrogate escape") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(code) {
                    throw fail("invalid_utf8", "an unpaired surrogate escape")
                }
                guard let scalar = Unicode.Scalar(code) else { throw fail("invalid_utf8", "an invalid escape") }
                scalars.append(contentsOf: Array(String(scalar).utf8))
            default:
                throw fail("syntax", "an invalid escape")
            }
        }
        throw fail("syntax", "unterminated string")
    }

    mutating func parseHex4() throws(JSONReadError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("syntax", "a short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail("syntax", "an invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// RFC 8259 number grammar; small integers are read exactly without a
    /// string round trip, the rest through `Double(_:)`, and overflow is refused.
    mutating func parseNumber() throws(JSONReadError) -> Double {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw fail("invalid_number", "an incomplete number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[index]) {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        } else {
            throw fail("invalid_number", "an invalid number")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { throw fail("invalid_number", "a number with no digits after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { throw fail("invalid_number", "a number with an empty exponent") }
        }
        let negative = bytes[start] == UInt8(ascii: "-")
        let digitCount = index - start - (negative ? 1 : 0)
        if isInteger, digitCount <= 15 {
            var value: Int64 = 0
            for offset in (start + (negative ? 1 : 0))..<index { value = value * 10 + Int64(bytes[offset] - UInt8(ascii: "0")) }
            return Double(negative ? -value : value)
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            index = start
            throw fail("invalid_number", "a number too large to represent")
        }
        return value
    }
}
