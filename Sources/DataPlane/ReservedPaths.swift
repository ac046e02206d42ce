/// The path namespaces the gateway answers itself.
///
/// A route `/api` would take `/api/auth/logout` upstream, so a logout would never happen at
/// the gateway: a route prefix may not overlap one of these, except `/`, a catch-all under
/// which the gateway's own paths win. On a route host (a route's `host` other than the public
/// host) only `onEveryHost` is the gateway's. The router's own routes all lie under these
/// (a test holds the two together).
package enum ReservedPaths {
    /// Every reserved namespace, on the public host (and any host no route names).
    package static let prefixes = [
        "/api/auth", "/api/session", "/api/intent", "/api/runtime", "/.well-known", "/healthz", "/readyz", "/client", "/demo", "/.portcullis",
    ]

    /// The gateway's paths on every host, route hosts included: browser sign-in and sign-out, and
    /// forward-auth (Caddy's `forward_auth` keeps the original `Host` on its auth request, so the
    /// decision is asked under the app's host name).
    /// And the MCP servers' protected resource metadata (RFC 9728), which lies on the host of the
    /// resource: a route host's MCP server has its document there.
    package static let onEveryHost = ["/.portcullis", "/api/auth/verify", protectedResourceMetadata]

    /// The well-known path of protected resource metadata (RFC 9728 §3).
    package static let protectedResourceMetadata = "/.well-known/oauth-protected-resource"

    /// Whether a normalised `path` is the gateway's on every host.
    package static func isOnEveryHost(_ path: Substring) -> Bool {
        isUnder(path, "/.portcullis") || isUnder(path, "/api/auth/verify") || isUnder(path, protectedResourceMetadata)
    }

    /// The reserved prefix `prefix` overlaps (covers it, or lies under it), if any, of `among`.
    package static func overlap(with prefix: String, among reserved: [String] = prefixes) -> String? {
        let asked = segments(prefix)
        return reserved.first { reserved in
            let own = segments(reserved)
            return own.starts(with: asked) || asked.starts(with: own)
        }
    }

    /// Whether a normalised `path` is `prefix` or lies below it.
    @inline(__always)
    package static func isUnder(_ path: Substring, _ prefix: String) -> Bool {
        let bytes = path.utf8
        guard bytes.starts(with: prefix.utf8) else { return false }
        return bytes.count == prefix.utf8.count || bytes[bytes.index(bytes.startIndex, offsetBy: prefix.utf8.count)] == UInt8(ascii: "/")
    }

    /// Whether a normalised `path` lies in one of the gateway's namespaces on the public host.
    package static func covers(_ path: Substring) -> Bool {
        prefixes.contains { isUnder(path, $0) }
    }

    private static func segments(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }
}
