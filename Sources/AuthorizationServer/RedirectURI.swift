/// The rules a client's `redirect_uri` is held to: registered exactly, or a loopback one on any port.
public enum RedirectURI {
    /// Whether `asked` matches one of `registered`.
    ///
    /// Exact string comparison (OAuth 2.1 §2.3.1: no prefix, no pattern), except a loopback
    /// redirect (`http://127.0.0.1`, `http://[::1]`, `http://localhost`), which matches on any port
    /// when the registered one names the same host and path (RFC 8252 §7.3: a native app's
    /// listener takes whatever port is free). A URI with a fragment or userinfo never matches.
    public static func matches(_ asked: String, registered: [String]) -> Bool {
        guard isAcceptable(asked) else { return false }
        if registered.contains(asked) { return true }
        guard let loopback = LoopbackRedirect(asked) else { return false }
        return registered.contains { LoopbackRedirect($0).map { $0.sameEndpoint(as: loopback) } ?? false }
    }

    /// A redirect URI a client may register: absolute, `https`, or `http` on a loopback host; no
    /// fragment, no userinfo, no whitespace or control characters.
    public static func isAcceptable(_ uri: String) -> Bool {
        guard uri.utf8.count <= 2_048, !uri.contains("#"), uri.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        let lower = uri.lowercased()
        if lower.hasPrefix("https://") { return hasPlainAuthority(uri, after: 8) }
        if lower.hasPrefix("http://") { return LoopbackRedirect(uri) != nil }
        // A private-use scheme (com.example.app:/callback) for native apps, RFC 8252 §7.1.
        guard let colon = uri.firstIndex(of: ":"), uri[..<colon].contains("."), uri[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "+" }) else {
            return false
        }
        return true
    }

    static func hasPlainAuthority(_ uri: String, after offset: Int) -> Bool {
        let rest = uri.dropFirst(offset)
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        return !authority.isEmpty && !authority.contains("@")
    }
}

/// An `http` redirect to a loopback host, split into what must match (host, path and query) and
/// the port, which may differ.
struct LoopbackRedirect: Equatable {
    let host: String
    let pathAndQuery: Substring

    init?(_ uri: String) {
        guard uri.lowercased().hasPrefix("http://") else { return nil }
        let rest = uri.dropFirst(7)
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        guard !authority.contains("@") else { return nil }
        let host: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            guard after.isEmpty || (after.hasPrefix(":") && Self.isPort(after.dropFirst())) else { return nil }
        } else {
            let parts = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            host = parts[0]
            guard parts.count == 1 || Self.isPort(parts[1]) else { return nil }
        }
        let lower = host.lowercased()
        guard lower == "127.0.0.1" || lower == "[::1]" || lower == "localhost" else { return nil }
        self.host = lower
        pathAndQuery = rest.dropFirst(authority.count)
    }

    static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.allSatisfy(\.isASCII) && text.allSatisfy(\.isNumber) && (Int(text) ?? 70_000) <= 65_535
    }

    func sameEndpoint(as other: LoopbackRedirect) -> Bool {
        host == other.host && (pathAndQuery.isEmpty ? "/" : pathAndQuery) == (other.pathAndQuery.isEmpty ? "/" : other.pathAndQuery)
    }
}
