/// The gateway's browser cookies: their names on this deployment, reading them from a `Cookie`
/// field, writing `Set-Cookie`, and removing them before a request goes upstream.
///
/// The session cookie is `__Host-portcullis` on https (host-only, `Path=/`), or
/// `__Secure-portcullis` with `Domain` set to `gateway.cookie_domain` so that one sign-in covers
/// every route host; `HttpOnly`, `Secure`, `SameSite=Lax` either way. On plain http (loopback
/// development only) it is `portcullis`, without `Secure`, which browsers would not store there.
/// A sign-in flow's cookie is the same name with `-flow-` and the flow's id after it.
public struct SessionCookie: Sendable, Equatable {
    /// The session cookie's name.
    public let name: String
    /// `Domain=` for the session cookie; `nil`: host-only.
    public let domain: String?
    /// Whether the cookies carry `Secure` (https).
    public let secure: Bool

    /// - Parameters:
    ///   - secure: the public URL is https.
    ///   - domain: `gateway.cookie_domain`, when set.
    public init(secure: Bool, domain: String?) {
        self.secure = secure
        self.domain = secure ? domain : nil
        name = secure ? (domain == nil ? "__Host-portcullis" : "__Secure-portcullis") : "portcullis"
    }

    /// The name of a sign-in flow's cookie (always host-only on the public host, where the callback is).
    public func flowName(_ flowID: String) -> String {
        (secure ? "__Host-portcullis" : "portcullis") + "-flow-" + flowID
    }

    /// The prefix of every flow cookie's name.
    public var flowPrefix: String { (secure ? "__Host-portcullis" : "portcullis") + "-flow-" }

    /// `Set-Cookie` for the session cookie, kept for `maxAge` seconds.
    public func setting(_ value: String, maxAge: Int) -> String {
        attributes(name + "=" + value, maxAge: maxAge, domain: domain)
    }

    /// `Set-Cookie` removing the session cookie.
    public var clearing: String { attributes(name + "=", maxAge: 0, domain: domain) }

    /// `Set-Cookie` for a flow's cookie, kept for `maxAge` seconds.
    public func settingFlow(_ flowID: String, value: String, maxAge: Int) -> String {
        attributes(flowName(flowID) + "=" + value, maxAge: maxAge, domain: nil)
    }

    /// `Set-Cookie` removing the cookie named `name` (a flow's), host-only.
    public func clearing(named name: String) -> String { attributes(name + "=", maxAge: 0, domain: nil) }

    private func attributes(_ pair: String, maxAge: Int, domain: String?) -> String {
        var text = pair + "; Path=/; Max-Age=\(maxAge); HttpOnly; SameSite=Lax"
        if let domain { text += "; Domain=" + domain }
        if secure { text += "; Secure" }
        return text
    }

    /// The name and value of each pair of `Cookie` fields' values, in order (one parser: `forEachPair`).
    public static func pairs<S: Sequence<String>>(_ values: S) -> [(name: Substring, value: Substring)] {
        var result: [(name: Substring, value: Substring)] = []
        for value in values {
            forEachPair(value[...]) { piece in
                if let equals = piece.utf8.firstIndex(of: UInt8(ascii: "=")) {
                    result.append((piece[..<equals], piece[piece.utf8.index(after: equals)...]))
                }
                return true
            }
        }
        return result
    }

    /// What the session cookie holds in these `Cookie` values.
    public enum Found: Sendable, Equatable {
        case none
        case one(String)
        /// Sent more than once (a cookie set by another host under the domain may shadow ours): refused, never guessed.
        case several
    }

    /// The session cookie's value among `values` (`Cookie` fields): one pass over the bytes, nothing built but the value.
    public func sessionValue<S: Sequence<String>>(in values: S) -> Found {
        var found: Substring?
        var several = false
        for value in values {
            Self.forEachPair(value[...]) { piece in
                guard piece.utf8.starts(with: name.utf8) else { return true }
                let afterName = piece.utf8.index(piece.startIndex, offsetBy: name.utf8.count)
                guard afterName < piece.endIndex, piece.utf8[afterName] == UInt8(ascii: "=") else { return true }
                var cookieValue = piece[piece.utf8.index(after: afterName)...]
                while let last = cookieValue.utf8.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") {
                    cookieValue = cookieValue[..<cookieValue.utf8.index(before: cookieValue.utf8.endIndex)]
                }
                several = found != nil
                found = cookieValue
                return !several
            }
            if several { return .several }
        }
        return found.map { .one(String($0)) } ?? .none
    }

    /// Each `;`-separated pair of a `Cookie` value, without the spaces and tabs before it (bytes,
    /// not characters), empty ones passed over, until `body` returns `false`.
    static func forEachPair(_ value: Substring, _ body: (Substring) -> Bool) {
        var rest = value
        while !rest.isEmpty {
            let end = rest.utf8.firstIndex(of: UInt8(ascii: ";")) ?? rest.endIndex
            var piece = rest[..<end]
            rest = end == rest.endIndex ? rest[end...] : rest[rest.utf8.index(after: end)...]
            while let first = piece.utf8.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
                piece = piece[piece.utf8.index(after: piece.utf8.startIndex)...]
            }
            if !piece.isEmpty, !body(piece) { return }
        }
    }

    /// Whether `cookieName` is one the gateway sets (any deployment's spelling, any case): never sent upstream.
    public static func isGatewayCookie(_ cookieName: Substring) -> Bool {
        isGatewayCookie(bytes: cookieName.utf8)
    }

    /// `isGatewayCookie` over a name's bytes: `portcullis`, `__host-portcullis` or `__secure-portcullis`
    /// in any case, alone or followed by `-` and more.
    static func isGatewayCookie(bytes name: Substring.UTF8View) -> Bool {
        for base in gatewayNameBases where name.count >= base.count {
            var index = name.startIndex
            var matches = true
            for expected in base {
                let byte = name[index]
                if (byte >= 0x41 && byte <= 0x5A ? byte + 32 : byte) != expected {
                    matches = false
                    break
                }
                index = name.index(after: index)
            }
            if matches, index == name.endIndex || name[index] == UInt8(ascii: "-") { return true }
        }
        return false
    }

    /// Whether a `Set-Cookie` value sets one of the gateway's cookies as a browser reads it
    /// (RFC 6265 §5.2): the name before `=` trimmed of spaces and tabs on both sides, and a
    /// nameless cookie (`=portcullis=x`, which a browser sends back as `portcullis=x`) read by its value.
    public static func setsGatewayCookie<Bytes: Collection<UInt8>>(_ value: Bytes) -> Bool {
        let pair = value.prefix { $0 != UInt8(ascii: ";") }
        let name = trimmed(pair.prefix { $0 != UInt8(ascii: "=") })
        if !name.isEmpty { return isGatewayCookie(bytes: Substring(decoding: name, as: UTF8.self).utf8) }
        // No name: the value stands as the cookie (`=portcullis=x`, or `portcullis` with no `=` at all).
        let rest = pair.drop { $0 != UInt8(ascii: "=") }.dropFirst()
        let valueName = trimmed((pair.contains(UInt8(ascii: "=")) ? rest : pair[...]).prefix { $0 != UInt8(ascii: "=") })
        return isGatewayCookie(bytes: Substring(decoding: valueName, as: UTF8.self).utf8)
    }

    /// `bytes` without spaces and tabs at either end.
    private static func trimmed<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Bytes.SubSequence {
        let blank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        let start = bytes.firstIndex { !blank($0) } ?? bytes.endIndex
        let end = bytes.lastIndex { !blank($0) }.map(bytes.index(after:)) ?? start
        return bytes[start..<max(start, end)]
    }

    private static let gatewayNameBases = ["portcullis", "__host-portcullis", "__secure-portcullis"].map { Array($0.utf8) }

    /// A `Cookie` value without the gateway's cookies, the app's own kept in order; `nil` when nothing is left.
    public static func withoutGatewayCookies(_ value: String) -> String? {
        // The common case, a field without any of ours, is passed on as it came (one pass over the bytes).
        guard containsGatewayName(value.utf8) else { return value }
        var kept = ""
        forEachPair(value[...]) { piece in
            let nameEnd = piece.utf8.firstIndex(of: UInt8(ascii: "=")) ?? piece.endIndex
            if !isGatewayCookie(bytes: piece[..<nameEnd].utf8) {
                if !kept.isEmpty { kept += "; " }
                kept += piece
            }
            return true
        }
        return kept.isEmpty ? nil : kept
    }

    /// Whether `bytes` hold `portcullis` in any letter case.
    private static func containsGatewayName(_ bytes: String.UTF8View) -> Bool {
        let word = Array("portcullis".utf8)
        var matched = 0
        for byte in bytes {
            let lower = byte >= 0x41 && byte <= 0x5A ? byte + 32 : byte
            if lower == word[matched] {
                matched += 1
                if matched == word.count { return true }
            } else {
                matched = lower == word[0] ? 1 : 0
            }
        }
        return false
    }
}
