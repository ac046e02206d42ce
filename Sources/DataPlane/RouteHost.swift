/// The host a route is bound to (`gateway.routes[].host`): one name, or every name one label
/// below a domain (`*.example.com`).
///
/// A wildcard covers exactly one label, as a TLS certificate's does (RFC 6125 §6.4.3):
/// `*.example.com` serves `grafana.example.com`, never `example.com` or `a.b.example.com`.
/// Names are compared in the one spelling `RouteHost.requestHost(_:)` gives a `Host` field.
package enum RouteHost: Sendable, Hashable, CustomStringConvertible {
    /// Exactly this name (lower case, no trailing dot).
    case exact(String)
    /// One label and then this suffix, which begins with `.` (`.example.com`).
    case wildcard(suffix: String)

    /// The host as configured: a DNS name of letters, digits and `-` (labels of 1-63 bytes,
    /// not starting or ending with `-`), or an IPv4 address, optionally `*.` before it;
    /// `nil` for anything else (a port, a trailing dot, a scheme, a path, non-ASCII).
    package init?(configured text: String) {
        let lowered = text.lowercased()
        let wildcard = lowered.hasPrefix("*.")
        let name = wildcard ? String(lowered.dropFirst(2)) : lowered
        guard Self.isName(name) else { return nil }
        // A wildcard needs a domain of at least two labels: `*.com` would cover a whole top-level domain.
        if wildcard {
            guard name.contains(".") else { return nil }
            self = .wildcard(suffix: "." + name)
        } else {
            self = .exact(name)
        }
    }

    package var description: String {
        switch self {
        case .exact(let name): name
        case .wildcard(let suffix): "*" + suffix
        }
    }

    /// The domain the host lies in: the name itself, or the wildcard's suffix without its dot.
    package var domain: String {
        switch self {
        case .exact(let name): name
        case .wildcard(let suffix): String(suffix.dropFirst())
        }
    }

    /// Whether `host` (as `requestHost(_:)` spells it) is this one.
    package func matches(_ host: Substring) -> Bool {
        switch self {
        case .exact(let name):
            return host.utf8.elementsEqual(name.utf8)
        case .wildcard(let suffix):
            let bytes = host.utf8
            guard bytes.count > suffix.utf8.count, bytes.reversed().starts(with: suffix.utf8.reversed()) else { return false }
            // One label before the suffix: no dot in it.
            return !bytes.dropLast(suffix.utf8.count).contains(UInt8(ascii: "."))
        }
    }

    /// Whether `host` (lower case) is `domain` or lies under it at a label boundary:
    /// `example.com` covers `grafana.example.com`, never `badexample.com`.
    package static func isUnder(_ host: String, domain: String) -> Bool {
        host == domain || host.hasSuffix("." + domain)
    }

    /// A request's `Host` (or `:authority`) in the spelling routes are matched in: lower case,
    /// without the port and without one trailing dot (`Grafana.Example.com.:443` is
    /// `grafana.example.com`, as nginx reads it); `nil` for a value that is no host name
    /// (empty, a path, userinfo, a bracketed IPv6 address), which then matches no host route.
    package static func requestHost(_ value: Substring) -> Substring? {
        var end = value.utf8.endIndex
        if let colon = value.utf8.lastIndex(of: UInt8(ascii: ":")) {
            guard value.utf8[value.utf8.index(after: colon)...].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            end = colon
        }
        var name = value[value.startIndex..<end]
        if name.utf8.last == UInt8(ascii: ".") { name = name.dropLast() }
        guard !name.isEmpty, name.utf8.count <= 253, name.utf8.allSatisfy(isHostByte), name.utf8.first != UInt8(ascii: "."),
            name.utf8.last != UInt8(ascii: "."), !name.contains("..")
        else { return nil }
        // Already lower case (the usual request): no copy.
        if !name.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) { return name }
        return Substring(name.lowercased())
    }

    /// A DNS name or IPv4 address as configured: labels of 1-63 letters, digits and `-`, no `-` at either end.
    package static func isName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && label.utf8.allSatisfy(isLabelByte) && label.first != "-" && label.last != "-"
        }
    }

    private static func isLabelByte(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == UInt8(ascii: "-")
    }

    private static func isHostByte(_ byte: UInt8) -> Bool {
        isLabelByte(byte) || (byte >= 0x41 && byte <= 0x5A) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
    }
}
