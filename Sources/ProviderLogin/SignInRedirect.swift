// The fuzz target compiles this file with LoopbackHost.swift and PercentEncoding.swift into one module of its own.
#if canImport(TrustedIssuers)
import JOSE
import TrustedIssuers
#endif

/// Where a browser sign-in sends the browser back to (the `rd` of `/.portcullis/sign_in`),
/// checked before any flow starts.
///
/// An open redirect on an auth gateway hands a phishing page the gateway's own name, and a
/// spelling the gateway reads as its own path but a browser reads as another host (`//evil.com`,
/// `/\evil.com`, `/%09/evil.com`) is how oauth2-proxy, Pomerium and Vouch each shipped one. So
/// the target is refused, never repaired, unless it is plainly one of two things:
///
/// - a path on the same host: one `/`, then no `/` or `\`; no dot segment and no `//` in the
///   path, neither as sent nor once percent-decoded;
/// - an absolute `https://` URL (`http://` only to a loopback host) with no user information,
///   whose origin is an allowed one or whose host the caller accepts (a route's host).
///
/// Either way: printable ASCII only (a unicode dot such as `。` is refused, not folded), no
/// whitespace, no control character and no backslash, as sent and, before the query, once
/// percent-decoded (the query's escapes are the target's own: `%20` in a `state`), and at most
/// 2048 bytes.
public struct SignInRedirect: Sendable, Equatable {
    /// The target as it will be written in `Location`: exactly as it came, once checked.
    public let target: String
    /// Whether it is a path on the host the sign-in started on (else an absolute URL).
    public let isRelative: Bool

    /// Longest target accepted, in bytes.
    public static let maximumBytes = 2_048

    /// Why a target was refused: one sentence, never quoting the target.
    public struct Refusal: Error, Sendable, Equatable {
        public let message: String
    }

    /// Checks `text`.
    ///
    /// - Parameters:
    ///   - allowedOrigins: origins as `ReturnTarget.origin(of:)` spells them (`https://app.example.com`).
    ///   - acceptsHost: whether an absolute target's host (lower-cased, without its port) is one the
    ///     gateway serves (a route's host); `nil` accepts none beyond `allowedOrigins`.
    public static func check(
        _ text: String, allowedOrigins: Set<String>, acceptsHost: (@Sendable (String) -> Bool)? = nil
    ) throws(Refusal) -> SignInRedirect {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumBytes else {
            throw Refusal(message: "the return address must be 1 to \(maximumBytes) bytes")
        }
        guard bytes.allSatisfy(isPlain) else {
            throw Refusal(message: "the return address may hold printable ASCII only: no space, control character, backslash or non-ASCII letter")
        }
        // Where the browser goes is decided before the query: there, no escape may stand for what
        // a browser reads otherwise. The query is the target's own (an authorization request's
        // `scope` or `state` holds `%20`, as encodeURIComponent writes a space): any well-formed escape.
        let located = bytes.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        guard let decoded = percentDecoded(bytes), let decodedLocation = percentDecoded(Array(located)), decodedLocation.allSatisfy(isPlain) else {
            throw Refusal(message: "the return address holds an escape that is malformed, or one before its query that stands for a space, a control character, a backslash or a non-ASCII byte")
        }
        if bytes.first == UInt8(ascii: "/") {
            try checkPath(bytes, decoded: decoded)
            return SignInRedirect(target: text, isRelative: true)
        }
        try checkAbsolute(text, bytes: bytes, allowedOrigins: allowedOrigins, acceptsHost: acceptsHost)
        return SignInRedirect(target: text, isRelative: false)
    }

    /// A same-host path: `/` then not `/` (a scheme-relative URL) and never a dot segment or `//`.
    private static func checkPath(_ bytes: [UInt8], decoded: [UInt8]) throws(Refusal) {
        for form in [bytes, decoded] {
            let path = form.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
            if path.count > 1, path[path.index(after: path.startIndex)] == UInt8(ascii: "/") {
                throw Refusal(message: "a return path begins with exactly one /; //host is another site")
            }
            let segments = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
            for (index, segment) in segments.enumerated() {
                if segment.isEmpty, index < segments.count - 1 {
                    throw Refusal(message: "a return path has no empty segment (//)")
                }
                if segment.elementsEqual([UInt8(ascii: ".")]) || segment.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) {
                    throw Refusal(message: "a return path has no . or .. segment")
                }
            }
        }
    }

    /// An absolute URL: `https://` (or `http://` to loopback), no user information, an allowed origin or host.
    private static func checkAbsolute(
        _ text: String, bytes: [UInt8], allowedOrigins: Set<String>, acceptsHost: (@Sendable (String) -> Bool)?
    ) throws(Refusal) {
        let lowered = String(decoding: bytes.prefix(8), as: UTF8.self).lowercased()
        let schemeLength = lowered.hasPrefix("https://") ? 8 : lowered.hasPrefix("http://") ? 7 : 0
        guard schemeLength > 0 else {
            throw Refusal(message: "the return address is a path beginning with / or an absolute https:// URL")
        }
        let authority = bytes[schemeLength...].prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")), !authority.contains(UInt8(ascii: "%")) else {
            throw Refusal(message: "the return address names its host plainly, without user information or escapes")
        }
        guard hasPlainHostAndPort(authority), let origin = ReturnTarget.origin(of: text), let host = host(ofOrigin: origin) else {
            throw Refusal(message: "the return address is not an http(s) URL with a host")
        }
        if schemeLength == 7, !LoopbackHost.contains(host) {
            throw Refusal(message: "the return address must be https (http only to a loopback host)")
        }
        guard allowedOrigins.contains(origin) || (acceptsHost?(host) ?? false) else {
            throw Refusal(message: "the return address is on a host this gateway does not serve; return to a route's host or an origin in gateway.login_return_origins")
        }
    }

    /// The host of an origin `ReturnTarget` spelled (`https://host[:port]`), brackets kept off an IPv6 address.
    private static func host(ofOrigin origin: String) -> String? {
        guard let start = origin.range(of: "://")?.upperBound else { return nil }
        var rest = origin[start...]
        if rest.hasPrefix("[") {
            guard let end = rest.firstIndex(of: "]") else { return nil }
            return String(rest[rest.index(after: rest.startIndex)..<end])
        }
        if let colon = rest.lastIndex(of: ":") { rest = rest[..<colon] }
        return rest.isEmpty ? nil : String(rest)
    }

    /// An authority browsers and Foundation read alike: a bracketed part only around an IPv6
    /// address (hex digits, `:` and `.`), and a port, when given, of 1 to 5 digits up to 65535
    /// (past that Foundation reads no port, and the default one would be assumed).
    private static func hasPlainHostAndPort(_ authority: ArraySlice<UInt8>) -> Bool {
        var rest = authority
        if rest.first == UInt8(ascii: "[") {
            guard let close = rest.firstIndex(of: UInt8(ascii: "]")) else { return false }
            let inside = rest[rest.index(after: rest.startIndex)..<close]
            let isIPv6 = inside.contains(UInt8(ascii: ":")) && inside.allSatisfy { byte in
                byte == UInt8(ascii: ":") || byte == UInt8(ascii: ".") || PercentEncoding.hexValue(byte) != nil
            }
            guard isIPv6 else { return false }
            rest = rest[rest.index(after: close)...]
            guard rest.isEmpty || rest.first == UInt8(ascii: ":") else { return false }
        } else if rest.contains(UInt8(ascii: "[")) || rest.contains(UInt8(ascii: "]")) {
            return false
        }
        guard let colon = rest.lastIndex(of: UInt8(ascii: ":")) else { return true }
        let port = rest[rest.index(after: colon)...]
        guard (1...5).contains(port.count), port.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return false }
        return (Int(String(decoding: port, as: UTF8.self)) ?? 65_536) <= 65_535
    }

    /// Visible ASCII other than `\`: no space, tab, CR, LF, other control, DEL or non-ASCII byte.
    private static func isPlain(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\")
    }

    /// `bytes` with every `%XX` decoded once; `nil` for a malformed escape.
    private static func percentDecoded(_ bytes: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = PercentEncoding.hexValue(bytes[index + 1]), let low = PercentEncoding.hexValue(bytes[index + 2])
                else { return nil }
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }
}
