import Foundation

/// Where a sign-in returns the browser to, checked by its origin only.
public enum ReturnTarget {
    /// `scheme://host[:port]` of an absolute http(s) URL, lower-cased, the port left out when it is
    /// the scheme's own (as a browser serialises an origin); `nil` for anything else
    /// (a relative path, another scheme, user information, a backslash or a control character:
    /// spellings browsers and parsers read differently).
    public static func origin(of text: String) -> String? {
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }),
            let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host?.lowercased(), !host.isEmpty, url.user == nil, url.password == nil
        else { return nil }
        let bracketed = host.contains(":") ? "[\(host)]" : host
        let defaultPort = scheme == "https" ? 443 : 80
        return url.port.flatMap { $0 == defaultPort ? nil : "\(scheme)://\(bracketed):\($0)" } ?? "\(scheme)://\(bracketed)"
    }
}
