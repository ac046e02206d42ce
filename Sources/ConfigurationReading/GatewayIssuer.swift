/// The gateway's issuer (`iss` of its tokens and assertions, the base of its discovery URLs) as a
/// configuration names it, read alike by the gateway and a separate Runtime.
public struct GatewayIssuer: Sendable, Equatable {
    /// The issuer URL, without a trailing `/`.
    public let url: String
    /// `false` when `gateway.issuer` names it; `true` when it is derived from `gateway.public_url`
    /// or from the public listener (`gateway.host`, `gateway.port`, `gateway.tls`).
    public let isDerived: Bool

    /// `gateway.issuer`; else `gateway.public_url`; else the public listener's own URL (`https`
    /// with `gateway.tls`; a wildcard host named as 127.0.0.1). `nil` when the configuration names
    /// none of them beyond the defaults (the built-in `http://127.0.0.1:8080` stands), or the port is 0.
    public static func read(_ values: ConfigurationValues) throws(ConfigurationError) -> GatewayIssuer? {
        if let issuer = try values.url("gateway.issuer") { return GatewayIssuer(url: Self.trimmed(issuer), isDerived: false) }
        if let publicURL = try values.url("gateway.public_url") { return GatewayIssuer(url: Self.trimmed(publicURL), isDerived: true) }
        let host = try values.string("gateway.host")
        let port = try values.int("gateway.port", in: 0...65_535)
        let tls = try values.string("gateway.tls.certificate_path") != nil
        guard host != nil || port != nil || tls else { return nil }
        let listenerPort = port ?? 8080
        guard listenerPort != 0 else { return nil }
        var name = host ?? "127.0.0.1"
        if Self.wildcardHosts.contains(name) { name = "127.0.0.1" }
        if name.contains(":") { name = "[" + name + "]" }
        return GatewayIssuer(url: (tls ? "https://" : "http://") + name + ":" + String(listenerPort), isDerived: true)
    }

    /// Whether the listener's host accepts every address (`0.0.0.0`, `::`): a derived issuer then
    /// names loopback, which clients elsewhere cannot reach.
    public static func isWildcard(_ host: String) -> Bool { wildcardHosts.contains(host) }

    static let wildcardHosts: Set<String> = ["0.0.0.0", "::", "[::]", ""]

    static func trimmed(_ url: String) -> String {
        var url = url
        while url.hasSuffix("/") { url.removeLast() }
        return url
    }
}
