/// `authorization_server.client_metadata_hosts`: where Client ID Metadata Documents may be fetched from.
///
/// An entry is a host named exactly (`vscode.dev`), every host one label or more under a domain
/// (`*.example.com`), or `*` (any host). Only a host named exactly may resolve to a private,
/// loopback or link-local address: one an entry covers by a wildcard is fetched from public
/// addresses only (the document is fetched on a client's say-so, which must not reach inside).
public struct ClientMetadataHosts: Sendable, Equatable {
    public let exact: Set<String>
    /// Suffixes with their leading dot (`.example.com`).
    public let suffixes: [String]
    public let any: Bool

    /// How a host is allowed.
    public enum Admission: Sendable, Equatable {
        case refused
        /// Named exactly: any address it resolves to.
        case named
        /// Covered by a wildcard: public addresses only.
        case publicOnly
    }

    public init?(_ entries: [String]) {
        var exact: Set<String> = []
        var suffixes: [String] = []
        var any = false
        for entry in entries.map({ $0.lowercased() }) {
            if entry == "*" {
                any = true
            } else if entry.hasPrefix("*.") {
                let domain = String(entry.dropFirst(2))
                guard Self.isHostName(domain), domain.contains(".") else { return nil }
                suffixes.append("." + domain)
            } else {
                guard Self.isHostName(entry) || Self.isIPv4(entry) else { return nil }
                exact.insert(entry)
            }
        }
        (self.exact, self.suffixes, self.any) = (exact, suffixes, any)
    }

    public var isEmpty: Bool { exact.isEmpty && suffixes.isEmpty && !any }

    public func admission(of host: String) -> Admission {
        let host = host.lowercased()
        if exact.contains(host) { return .named }
        if any || suffixes.contains(where: { host.hasSuffix($0) && host.count > $0.count }) { return .publicOnly }
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
