import EdgeHTTP
import HTTPTypes
import MCPPolicy
import MCPResource
import RuntimeAccess
import TrafficCop

/// One configured upstream: a path prefix (on one host, or any), the URL it is proxied to, and who may reach it.
public struct ProxyRoute: Sendable, Equatable {
    public var prefix: String
    /// The host it serves (`host`); `nil`: every host (behind the routes bound to the request's host).
    package var host: RouteHost?
    /// Whether the upstream gets the path below the prefix (`strip_prefix`, the default) or the whole path.
    public var stripsPrefix: Bool = true
    /// `audience`: the `aud` of its assertions, when not the upstream URL.
    public var configuredAudience: String?
    /// `preserve_host: true`: the upstream gets the client's `Host` (apps that build absolute URLs
    /// need it), not the upstream URL's; the connection and TLS name stay the upstream's.
    public var preservesHost: Bool = false
    /// The identity fields the upstream gets besides the assertion (`identity_headers`).
    package var identityFields: IdentityFieldNames?
    public var upstream: String
    /// The methods it forwards (`nil`: every method in `ProxyRoute.methods`); another is 405 with `Allow`.
    public var methods: [HTTPRequest.Method]?
    /// `false` (`auth: none`): no token needed; a token that is sent is still checked, and stripped.
    public var requiresToken: Bool
    /// What a caller's token must hold (`require`); `nil`: any valid token.
    public var policy: RoutePolicy?
    /// `auth: browser`: the gateway's session cookie is taken beside a Bearer token, and a
    /// navigation without either is sent to sign in.
    public var acceptsSessionCookie: Bool = false
    /// The provider a navigation is sent to sign in with (`sign_in`: a `trust.issuers[].login.name`); `nil`: the only one, or the gateway's own form.
    public var signIn: String?
    /// `grpc: true`: only gRPC requests (`content-type: application/grpc...`) reach the upstream; anything else is 415 `grpc_required`.
    public var grpcOnly: Bool = false
    /// How the upstream is spoken to (`protocol`): `http1`, `h2c` (an `http://` upstream) or `h2` (`https://`).
    public var upstreamProtocol: UpstreamProtocol = .http1
    /// `mcp: true`: an MCP server, a protected resource of its own whose tokens name it as `aud`.
    public var servesMCP: Bool = false
    /// The resource it stands for, once `gateway.public_url` gave its canonical URL (`servesMCP` only).
    public var mcp: MCPResource?
    /// What its callers may do, per tool, prompt, resource and method (`mcp:` as a map; `mcp: true`
    /// is every tool and the standard methods). Set with `servesMCP`.
    public var mcpPolicy: MCPCallPolicy?
    /// `mcp.name`: what the consent page and `resource_name` call this MCP server (default: the prefix).
    public var mcpName: String?
    /// `mcp.scope_descriptions`: a sentence per scope for the consent page.
    public var mcpScopeDescriptions: [String: String] = [:]
    /// `upstream_credential`: the caller's own credential at the upstream, sent in place of nothing
    /// (`nil`: the upstream gets the assertion and the identity fields only).
    public var upstreamCredential: UpstreamCredential?

    public init(prefix: String, upstream: String, methods: [HTTPRequest.Method]? = nil, requiresToken: Bool = true, policy: RoutePolicy? = nil) {
        self.prefix = prefix
        self.upstream = upstream
        self.methods = methods
        self.requiresToken = requiresToken
        self.policy = policy
    }

    /// The prefix without a trailing `/`: requests to it and below it are proxied.
    package var pathPrefix: String { prefix.trimmingTrailingSlash }
    /// A route without `upstream`: decided by forward-auth for a proxy in front, never proxied here.
    public var isForwardAuthOnly: Bool { upstream.isEmpty }

    /// The `aud` of its assertions: `audience` when configured, else the upstream URL without a
    /// trailing `/`, else (a forward-auth-only route) `urn:portcullis:route:HOST/PREFIX`.
    package var audience: String {
        if let configuredAudience { return configuredAudience }
        if isForwardAuthOnly { return "urn:portcullis:route:" + (host.map(\.description) ?? "") + (pathPrefix.isEmpty ? "/" : pathPrefix) }
        return upstream.trimmingTrailingSlash
    }

    /// The origin a forward-auth-only route stands on in the route table: never connected to
    /// (`ProxyExchange.start` answers such a route's requests itself), in the reserved `.invalid` domain.
    package static let forwardAuthOnlyOrigin = "http://forward-auth-only.invalid"

    /// The methods a route forwards when it lists none; any other is 405.
    package static let methods: [HTTPRequest.Method] = [.get, .head, .post, .put, .patch, .delete, .options]
    /// `methods` as `Allow` lists them.
    package static let allowedMethodNames = methods.map(\.rawValue)

    /// The methods a route may list beyond `methods`: WebDAV's (RFC 4918, 3253, 5323), CalDAV's
    /// `MKCALENDAR` (RFC 4791) and the others HTTP/1.1's parser (llhttp, in NIO) knows by name.
    ///
    /// Another token would be refused by that parser before any route could see it, so the
    /// configuration refuses it, by name. `CONNECT` (a tunnel: the gateway is no forward proxy) and
    /// `TRACE` (it echoes the request back, the gateway's own fields with it) are never forwarded.
    package static let extensionMethods: [HTTPRequest.Method] = [
        "PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "REPORT", "MKCALENDAR", "SEARCH", "ACL", "BIND", "REBIND", "UNBIND",
        "LINK", "UNLINK", "MERGE", "CHECKOUT", "MKACTIVITY", "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE", "PURGE",
    ].compactMap { HTTPRequest.Method($0) }

    /// Every method some route may forward: `methods` and `extensionMethods`.
    package static let forwardableMethods: [HTTPRequest.Method] = methods + extensionMethods

    /// The part of a normalised `path` below `prefix` (a `pathPrefix`): empty for the
    /// prefix itself, else starting with `/`; `nil` when the path is not under it.
    ///
    /// The upstream target is the base path plus this, never a count of characters cut
    /// from a path spelled another way.
    package static func remainder(of path: Substring, under prefix: String) -> Substring? {
        // Byte for byte: a path is matched as the bytes it is, never by Unicode equivalence (and
        // without counting characters on every request).
        let bytes = path.utf8
        guard bytes.starts(with: prefix.utf8) else { return nil }
        let rest = path[bytes.index(bytes.startIndex, offsetBy: prefix.utf8.count)...]
        guard rest.utf8.isEmpty || rest.utf8.first == UInt8(ascii: "/") else { return nil }
        return rest
    }
}
