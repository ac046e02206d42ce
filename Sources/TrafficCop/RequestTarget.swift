// The fuzz target compiles this file with PercentEncoding.swift into one module of its own.
#if canImport(JOSE)
import JOSE
#endif

/// The one spelling of a request target that every part of the edge routes on
/// and forwards: the path normalised, the query without credentials.
///
/// Routing on one spelling and forwarding another is how a prefix stops
/// confining a path: `/api/v1/../admin` matches `/api/v1` here and is `/api/admin`
/// to an upstream that normalises (nginx, most frameworks). So the gateway
/// normalises first (RFC 3986 §6.2.2: percent-encoded unreserved characters
/// decoded, other escapes in upper case; §5.2.4: dot segments removed) and
/// merges adjacent slashes, as Envoy does with `normalize_path` and
/// `merge_slashes`; routes match the result and upstreams receive it.
///
/// Refused, never guessed at: a path that climbs above `/`, an encoded `/`
/// or `\` (`%2F`, `%5C`: servers disagree on whether they separate segments),
/// a raw `\`, an encoded NUL, a dot segment with path parameters (`..;x`,
/// which Tomcat and Spring read as `..`), a malformed escape, and bytes that
/// have no place in a request target (controls, space, `#`, non-ASCII).
/// Nothing is decoded twice: `%252e` stays the literal segment `%252E`.
public enum RequestTarget {
    /// The path and the query (without its `?`) of a request target.
    public static func split(_ target: Substring) -> (path: Substring, query: Substring?) {
        guard let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return (target, nil) }
        return (target[..<mark], target[target.index(after: mark)...])
    }

    /// `path` in its normalised spelling: the input itself when it is already
    /// canonical (the common case allocates nothing), else a new string.
    ///
    /// - Throws: `RequestTargetError` for a path the gateway will not route.
    public static func normalizedPath(_ path: Substring) throws(RequestTargetError) -> Substring {
        if try isCanonical(path) { return path }
        return Substring(try rebuilt(path))
    }

    /// Whether `path` is its own normalised form; throws for what can never be routed.
    private static func isCanonical(_ path: Substring) throws(RequestTargetError) -> Bool {
        let bytes = path.utf8
        guard bytes.first == slash else { throw .notOriginForm }
        var canonical = true
        var index = bytes.startIndex
        var segmentStart = bytes.index(after: index)
        var previous: UInt8 = 0
        while index < bytes.endIndex {
            let byte = bytes[index]
            switch byte {
            case percent:
                let value = try escapedValue(bytes, at: index)
                if isUnreserved(value) || hasLowercaseHex(bytes, at: index) { canonical = false }
                index = bytes.index(index, offsetBy: 3)
                previous = byte
                continue
            case backslash:
                throw .backslash
            case slash:
                if previous == slash { canonical = false }
                if index > segmentStart, try isDotSegment(path[segmentStart..<index]) { canonical = false }
                segmentStart = bytes.index(after: index)
            default:
                guard isAllowedRaw(byte) else { throw .invalidCharacter }
            }
            previous = byte
            index = bytes.index(after: index)
        }
        if segmentStart < bytes.endIndex, try isDotSegment(path[segmentStart...]) { canonical = false }
        return canonical
    }

    /// Builds the normalised path: segments decoded, dots resolved, empty segments merged.
    private static func rebuilt(_ path: Substring) throws(RequestTargetError) -> String {
        var output: [[UInt8]] = []
        var endsWithSlash = false
        var segment: [UInt8] = []
        let bytes = path.utf8
        var index = bytes.index(after: bytes.startIndex)  // after the leading "/", checked already

        func close(_ segment: [UInt8], last: Bool) throws(RequestTargetError) {
            switch try dotKind(segment) {
            case .current:
                endsWithSlash = true
            case .parent:
                guard !output.isEmpty else { throw .climbsAboveRoot }
                output.removeLast()
                endsWithSlash = true
            case .none:
                if segment.isEmpty {
                    if last { endsWithSlash = true }  // "/a/" and "/a//" keep one trailing slash
                } else {
                    output.append(segment)
                    endsWithSlash = false
                }
            }
        }

        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == percent {
                let value = try escapedValue(bytes, at: index)
                if isUnreserved(value) {
                    segment.append(value)
                } else {
                    segment.append(percent)
                    segment.append(hexDigits[Int(value >> 4)])
                    segment.append(hexDigits[Int(value & 0x0F)])
                }
                index = bytes.index(index, offsetBy: 3)
                continue
            }
            if byte == slash {
                try close(segment, last: false)
                segment.removeAll(keepingCapacity: true)
            } else {
                segment.append(byte)
            }
            index = bytes.index(after: index)
        }
        try close(segment, last: true)

        var result = [UInt8]()
        result.reserveCapacity(bytes.count)
        for part in output {
            result.append(slash)
            result.append(contentsOf: part)
        }
        if result.isEmpty || endsWithSlash { result.append(slash) }
        return String(decoding: result, as: UTF8.self)
    }

    // MARK: The query

    /// Throws unless every byte of `query` is printable ASCII other than `#`, as RFC 3986
    /// spells a query: a raw non-ASCII byte or control is refused, never passed on.
    ///
    /// Why: the gateway splits a query at the ASCII `&` and `;` bytes only, while a
    /// server that decodes and normalises raw UTF-8 first may split elsewhere (U+037E
    /// is canonically `;`), and so read a parameter the gateway never saw.
    public static func checkQuery(_ query: Substring?) throws(RequestTargetError) {
        guard let query else { return }
        for byte in query.utf8 where !isAllowedRaw(byte) { throw .invalidQueryCharacter }
    }

    /// The query without any `access_token` parameter, or `nil` when nothing is left.
    ///
    /// The name is compared after percent-decoding and without regard to case
    /// (`%61ccess_token`, `ACCESS_TOKEN`), and both `&` and `;` separate
    /// parameters (some frameworks split at `;`). The query is returned as it
    /// came when it holds no credential; otherwise the other parameters are
    /// kept byte for byte, in order, joined with `&`.
    public static func queryWithoutCredentials(_ query: Substring?) -> Substring? {
        guard let query, !query.isEmpty else { return nil }
        let bytes = query.utf8
        var kept: [Substring] = []
        var dropped = false
        var start = bytes.startIndex
        var index = start
        while true {
            if index == bytes.endIndex || bytes[index] == ampersand || bytes[index] == semicolon {
                let piece = query[start..<index]
                if isCredentialParameter(piece) {
                    dropped = true
                } else if !piece.isEmpty {
                    kept.append(piece)
                }
                guard index < bytes.endIndex else { break }
                start = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        guard dropped else { return query }
        guard !kept.isEmpty else { return nil }
        return Substring(kept.joined(separator: "&"))
    }

    /// Whether a `name=value` piece is named `access_token`, once its name is decoded.
    static func isCredentialParameter(_ piece: Substring) -> Bool {
        let target = Array("access_token".utf8)
        var matched = 0
        let bytes = piece.utf8
        var index = bytes.startIndex
        while index < bytes.endIndex, bytes[index] != equals {
            var byte = bytes[index]
            var step = 1
            if byte == percent, let value = try? escapedValue(bytes, at: index) {
                byte = value
                step = 3
            }
            guard matched < target.count, lowercased(byte) == target[matched] else { return false }
            matched += 1
            index = bytes.index(index, offsetBy: step)
        }
        return matched == target.count
    }

    // MARK: Bytes

    private enum DotKind { case none, current, parent }

    /// Whether a raw (canonical-candidate) segment is `.` or `..`.
    private static func isDotSegment(_ segment: Substring) throws(RequestTargetError) -> Bool {
        try dotKind(segment.utf8) != .none
    }

    /// `.` or `..` (after decoding); throws for a dot segment carrying path parameters.
    private static func dotKind<Bytes: Collection<UInt8>>(_ segment: Bytes) throws(RequestTargetError) -> DotKind {
        guard segment.first == dot else { return .none }
        var dots = 0
        var rest = segment[...]
        while rest.first == dot {
            dots += 1
            rest = rest.dropFirst()
        }
        if rest.isEmpty {
            switch dots {
            case 1: return .current
            case 2: return .parent
            default: return .none
            }
        }
        // ".;x", "..;x" and their %3B spellings: read as "." and ".." by servers that strip parameters.
        if dots <= 2 {
            if rest.first == semicolon { throw .dotSegmentWithParameters }
            if rest.starts(with: [percent, UInt8(ascii: "3")]), let third = rest.dropFirst(2).first, lowercased(third) == UInt8(ascii: "b") {
                throw .dotSegmentWithParameters
            }
        }
        return .none
    }

    /// The byte a `%XX` escape at `index` stands for.
    private static func escapedValue(_ bytes: Substring.UTF8View, at index: Substring.UTF8View.Index) throws(RequestTargetError) -> UInt8 {
        guard bytes.distance(from: index, to: bytes.endIndex) >= 3,
            let high = PercentEncoding.hexValue(bytes[bytes.index(index, offsetBy: 1)]), let low = PercentEncoding.hexValue(bytes[bytes.index(index, offsetBy: 2)])
        else { throw .malformedEscape }
        let value = high << 4 | low
        switch value {
        case slash: throw .encodedSlash
        case backslash: throw .encodedBackslash
        case 0: throw .encodedNUL
        default: return value
        }
    }

    private static func hasLowercaseHex(_ bytes: Substring.UTF8View, at index: Substring.UTF8View.Index) -> Bool {
        let first = bytes[bytes.index(index, offsetBy: 1)]
        let second = bytes[bytes.index(index, offsetBy: 2)]
        return (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(first) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(second)
    }

    /// RFC 3986 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~".
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), dot, UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
    }

    /// Printable ASCII other than `#` (a fragment never belongs in a request) and `\` (checked apart).
    private static func isAllowedRaw(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "#")
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
    }

    private static let slash = UInt8(ascii: "/")
    private static let backslash = UInt8(ascii: "\\")
    private static let percent = UInt8(ascii: "%")
    private static let dot = UInt8(ascii: ".")
    private static let semicolon = UInt8(ascii: ";")
    private static let ampersand = UInt8(ascii: "&")
    private static let equals = UInt8(ascii: "=")
    private static let hexDigits = Array("0123456789ABCDEF".utf8)
}
