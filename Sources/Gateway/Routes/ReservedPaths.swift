import DataPlane
import Foundation
import RuntimeAccess
import TrafficCop

/// The path namespaces the gateway answers itself; a `gateway.routes` prefix may
/// not overlap one.
///
/// A route `/api` would take `/api/auth/logout` upstream, so a logout would never
/// happen at the gateway; `/` would take everything. The router's own routes all
/// lie under these (a test holds the two together).
enum ReservedPaths {
    static let prefixes = [
        "/api/auth", "/api/session", "/api/intent", "/api/runtime", "/.well-known", "/healthz", "/readyz", "/client", "/demo",
    ]

    /// The reserved prefix `prefix` overlaps (covers it, or lies under it), if any.
    static func overlap(with prefix: String) -> String? {
        let asked = segments(prefix)
        return prefixes.first { reserved in
            let own = segments(reserved)
            return own.starts(with: asked) || asked.starts(with: own)
        }
    }

    private static func segments(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }
}

extension ProxyRoute {
    /// What is wrong with this route, in a sentence naming it, or `nil` when it can be served.
    ///
    /// Its prefix must be a normalised path (requests are matched after normalisation, so any
    /// other spelling would never match) outside the gateway's own paths; its upstream an
    /// `http` or `https` URL with a host and without credentials, query or fragment.
    public var problem: String? {
        let shown = "\(prefix)=\(upstream)"
        guard prefix.hasPrefix("/"), let normalized = try? RequestTarget.normalizedPath(pathPrefix.isEmpty ? "/" : pathPrefix[...]),
            normalized == (pathPrefix.isEmpty ? "/" : pathPrefix)
        else {
            return "has a prefix that is not a normalised path (no . or .. segments, no //, escapes only where needed) in \"\(shown)\""
        }
        if let reserved = ReservedPaths.overlap(with: pathPrefix) {
            return "has the prefix \(prefix), which overlaps the gateway's own \(reserved) (\"\(shown)\"); pick a prefix outside \(ReservedPaths.prefixes.joined(separator: ", "))"
        }
        guard let url = URL(string: upstream), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme), let host = url.host, !host.isEmpty,
            url.user == nil, url.password == nil, url.query == nil, url.fragment == nil
        else {
            return "must name an http or https upstream with a host and no credentials, query or fragment, not \"\(upstream)\""
        }
        guard UpstreamOrigin(url: upstream) != nil else {
            return "must name an upstream host of letters, digits, '-', '.' and '_' (or an IP address) and a port from 1 to 65535, not \"\(upstream)\""
        }
        return nil
    }
}
