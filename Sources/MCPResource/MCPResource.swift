import JOSE

/// An MCP server behind a route (`mcp: true`): an OAuth protected resource of its own (RFC 9728).
///
/// Its identifier is the route's canonical URL (the public URL's scheme and authority, the route's
/// host when it has one, and its prefix), the `resource` a client asks a token for (RFC 8707) and
/// the `aud` such a token carries. A token for another resource, or the gateway's own API token, is
/// never taken here, and a token for this resource is never taken anywhere else.
public struct MCPResource: Sendable, Equatable {
    /// The canonical URL: `https://auth.example.com/mcp/github`, `https://mcp.example.com` for a host route at `/`.
    public let identifier: String
    /// Where its protected resource metadata is served: `/.well-known/oauth-protected-resource`
    /// inserted between the identifier's authority and its path (RFC 9728 §3.1).
    public let metadataURL: String
    /// The path of `metadataURL` on the resource's host.
    public let metadataPath: String
    /// The identifier's origin (`scheme://host[:port]`): a browser page of this origin may call it.
    public let origin: String
    /// The scopes the route requires, which a client asks for and consent offers (`scopes_supported`).
    public let scopes: [String]
    /// A name a person reads on the consent page and in `resource_name`.
    public let name: String
    /// The scopes its tool, prompt and resource rules ask for beyond `scopes`: a client may ask for
    /// them (a step-up), and consent offers them.
    public let ruleScopes: [String]
    /// What each scope lets a client do, as the consent page says it (`mcp.scope_descriptions`).
    public let scopeDescriptions: [String: String]

    /// The resource a route stands for, or `nil` when `publicURL` is not an absolute http(s) URL.
    ///
    /// - Parameters:
    ///   - publicURL: `gateway.public_url` (scheme, host, optional port; any path is not the route's).
    ///   - host: the route's exact host, or `nil` for a route on the public host.
    ///   - pathPrefix: the route's prefix without its trailing `/` (empty for `/`).
    public init?(
        publicURL: String, host: String?, pathPrefix: String, scopes: [String], ruleScopes: [String] = [], name: String? = nil,
        scopeDescriptions: [String: String] = [:]
    ) {
        self.scopeDescriptions = scopeDescriptions
        guard let parts = Self.schemeAndAuthority(publicURL) else { return nil }
        let authority: String
        if let host {
            authority = host.lowercased() + (parts.port.map { ":" + $0 } ?? "")
        } else {
            authority = parts.authority
        }
        origin = parts.scheme + "://" + authority
        identifier = origin + pathPrefix
        metadataPath = ProtectedResourceMetadata.wellKnownPath + pathPrefix
        metadataURL = origin + metadataPath
        self.scopes = scopes
        self.ruleScopes = ruleScopes.filter { !scopes.contains($0) }
        self.name = name ?? (host ?? "") + (pathPrefix.isEmpty ? "/" : pathPrefix)
    }

    /// The scheme (lower case), the authority (host lower case, with its port) and the port of an
    /// absolute http(s) URL; `nil` for anything else (userinfo included).
    static func schemeAndAuthority(_ url: String) -> (scheme: String, authority: String, port: Substring?)? {
        guard let separator = url.range(of: "://") else { return nil }
        let scheme = url[..<separator.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        let rest = url[separator.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        // The port follows the last colon outside an IPv6 literal's brackets.
        var port: Substring? = nil
        if let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") {
            port = authority[authority.index(after: colon)...]
        }
        return (scheme, authority.lowercased(), port)
    }

    /// Whether a request's `Origin` may call this resource: absent (not a browser), the resource's
    /// own origin, or one `gateway.allowed_origins` lists.
    ///
    /// The transport spec's rule against DNS rebinding: a page on another origin that a name
    /// resolving to the gateway serves must not reach the tools with the browser's credentials.
    public func admitsOrigin(_ requestOrigin: String?, allowed: Set<String>) -> Bool {
        guard let requestOrigin else { return true }
        return requestOrigin.lowercased() == origin || allowed.contains(requestOrigin)
    }

    /// Every scope a token for it may hold: the route's, then its rules' (`scopes_supported`).
    public var supportedScopes: [String] { scopes + ruleScopes }

    /// The scopes a token needs here, as a challenge's `scope` lists them.
    public var scope: String { scopes.joined(separator: " ") }
}
