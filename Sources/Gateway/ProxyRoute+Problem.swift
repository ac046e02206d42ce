import DataPlane
import Foundation
import RuntimeAccess
import TrafficCop

extension ProxyRoute {
    /// What is wrong with this route, in a sentence naming it, or `nil` when it can be served.
    ///
    /// Its prefix must be a normalised path (requests are matched after normalisation, so any
    /// other spelling would never match) outside the gateway's own paths; its upstream an
    /// `http` or `https` URL with a host and without credentials, query or fragment.
    public var problem: String? { settingProblem?.message }

    /// `problem`, with the route's setting it is about (`prefix` or `upstream`): what a refusal names.
    public var settingProblem: (setting: String, message: String)? {
        prefixProblem.map { ("prefix", $0) } ?? upstreamProblem.map { ("upstream", $0) }
    }

    private var prefixProblem: String? {
        let shown = "\(prefix)=\(upstream)"
        guard prefix.hasPrefix("/"), let normalized = try? RequestTarget.normalizedPath(pathPrefix.isEmpty ? "/" : pathPrefix[...]),
            normalized == (pathPrefix.isEmpty ? "/" : pathPrefix)
        else {
            return "has a prefix that is not a normalised path (no . or .. segments, no //, escapes only where needed) in \"\(shown)\""
        }
        // `/` is a catch-all, under which the gateway's own paths win; on a host of its own, only `ReservedPaths.onEveryHost`.
        let reservedHere = host == nil ? ReservedPaths.prefixes : ReservedPaths.onEveryHost
        if !pathPrefix.isEmpty, let reserved = ReservedPaths.overlap(with: pathPrefix, among: reservedHere) {
            return "has the prefix \(prefix), which overlaps the gateway's own \(reserved) (\"\(shown)\"); pick a prefix outside \(reservedHere.joined(separator: ", "))"
        }
        return nil
    }

    private var upstreamProblem: String? {
        if isForwardAuthOnly { return nil }
        guard let url = URL(string: upstream), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme), let host = url.host, !host.isEmpty,
            url.user == nil, url.password == nil, url.query == nil, url.fragment == nil
        else {
            return "must name an http or https upstream with a host and no credentials, query or fragment, not \"\(upstream)\""
        }
        guard UpstreamOrigin(url: upstream) != nil else {
            return "must name an upstream host of letters, digits, '-', '.' and '_' (or an IP address) and a port from 1 to 65535, not \"\(upstream)\""
        }
        if grpcOnly, !url.path.isEmpty, url.path != "/" {
            return "is grpc: true with an upstream path (\(url.path) in \"\(upstream)\"): a gRPC call's path is the service's own (/package.Service/Method), and the upstream would get it under that path; give the upstream as scheme://host:port"
        }
        return nil
    }
}
