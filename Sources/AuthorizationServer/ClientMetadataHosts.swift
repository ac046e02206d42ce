/// `authorization_server.client_metadata_hosts`: where Client ID Metadata Documents may be fetched from.
///
/// An entry is a host named exactly (`vscode.dev`), every host one label or more under a domain
/// (`*.example.com`), or `*` (any host), each on the https port (443) unless the entry names
/// another (`docs.example.com:8443`). Only a host named exactly may resolve to a private,
/// loopback or link-local address: one an entry covers by a wildcard is fetched from public
/// addresses only (the document is fetched on a client's say-so, which must not reach inside,
/// nor knock on any port it likes).
public struct ClientMetadataHosts: Sendable, Equatable {
    /// Hosts named exactly, each with the ports it may be fetched on.
    public let exact: [String: Set<Int>]
    /// Suffixes with their leading dot (`.example.com`), each with its port.
    public let suffixes: [(suffix: String, port: Int)]
    /// The ports any host may be fetched on (`*`); empty without `*`.
    public let any: Set<Int>

    public static func == (left: Self, right: Self) -> Bool {
        left.exact == right.exact && left.any == right.any && left.suffixes.map { "\($0.suffix):\($0.port)" } == right.suffixes.map { "\($0.suffix):\($0.port)" }
    }

    /// How a host is allowed.
    public enum Admission: Sendable, Equatable {
        case refused
        /// Named exactly: any address it resolves to.
        case named
        /// Covered by a wildcard: public addresses only.
        case publicOnly
    }

    public init?(_ entries: [String]) {
        var exact: [String: Set<Int>] = [:]
        var suffixes: [(suffix: String, port: Int)] = []
        var any: Set<Int> = []
        for text in entries.map({ $0.lowercased() }) {
            var entry = Substring(text)
            var port = 443
            if let colon = entry.lastIndex(of: ":") {
                let digits = entry[entry.index(after: colon)...]
                guard !digits.isEmpty, digits.utf8.count <= 5, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
                    let value = Int(digits), (1...65_535).contains(value)
                else { return nil }
                port = value
                entry = entry[..<colon]
            }
            if entry == "*" {
                any.insert(port)
            } else if entry.hasPrefix("*.") {
                let domain = String(entry.dropFirst(2))
                guard Self.isHostName(domain), domain.contains(".") else { return nil }
                suffixes.append(("." + domain, port))
            } else {
                guard Self.isHostName(String(entry)) || Self.isIPv4(String(entry)) else { return nil }
                exact[String(entry), default: []].insert(port)
            }
        }
        (self.exact, self.suffixes, self.any) = (exact, suffixes, any)
    }

    public var isEmpty: Bool { exact.isEmpty && suffixes.isEmpty && any.isEmpty }

    /// How `host` may be fetched on `port`: a named host's entry wins over a wildcard's.
    public func admission(of host: String, port: Int = 443) -> Admission {
        let host = host.lowercased()
        if exact[host]?.contains(port) == true { return .named }
        if any.contains(port) || suffixes.contains(where: { $0.port == port && host.hasSuffix($0.suffix) && host.count > $0.suffix.count }) { return .publicOnly }
        return .refused
    }

    static func isHostName(_ text: String) -> Bool {
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        return !text.isEmpty && text.utf8.count <= 253
            && labels.allSatisfy { label in
                !label.isEmpty && label.utf8.count <= 63 && label.first != "-" && label.last != "-"
                    && label.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "-") }
            }
    }

    static func isIPv4(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { UInt8($0) != nil }
    }
}
