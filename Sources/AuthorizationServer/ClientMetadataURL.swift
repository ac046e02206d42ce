/// A `client_id` that is a Client ID Metadata Document's URL (draft-ietf-oauth-client-id-metadata-document):
/// `https`, a host, a path other than `/`, no userinfo, fragment or dot segments.
public struct ClientMetadataURL: Sendable, Equatable {
    public let url: String
    /// Lower case.
    public let host: String
    public let port: Int
    /// The path and query, as sent in the request line.
    public let target: String

    public init?(_ url: String) {
        guard url.utf8.count <= 2_048, url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), url.hasPrefix("https://"), !url.contains("#") else { return nil }
        let rest = url.dropFirst(8)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let authority = rest[..<slash]
        let target = String(rest[slash...])
        guard !authority.isEmpty, !authority.contains("@"), !authority.contains("["), target != "/", !target.hasPrefix("/?") else { return nil }
        let path = target.prefix { $0 != "?" }
        guard !path.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == "." || $0 == ".." }) else { return nil }
        let parts = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let host = parts[0].lowercased()
        var port = 443
        if parts.count == 2 {
            guard let value = Int(parts[1]), (1...65_535).contains(value), parts[1].allSatisfy(\.isNumber) else { return nil }
            port = value
        }
        guard ClientMetadataHosts.isHostName(host) || ClientMetadataHosts.isIPv4(host) else { return nil }
        (self.url, self.host, self.port, self.target) = (url, host, port, target)
    }
}
