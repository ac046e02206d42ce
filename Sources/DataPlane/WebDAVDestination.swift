import TrafficCop

/// A COPY's or MOVE's `Destination` (RFC 4918 §10.3), decided as the request's own target is and
/// written in the upstream's namespace.
///
/// The upstream acts on `Destination` as on a second request target: forwarded as the client
/// sent it, a caller admitted on `/dav/pub` could overwrite a file behind `/dav/adm`, a route that
/// refuses them (another route's path, spelled `/dav/pub/../adm` or `%2e%2e`, or on another host).
/// So, as nginx's `dav_methods` does: exactly one `Destination`, on the host the request was sent
/// to, its path normalised as a request target is, served by the same route, and rewritten to
/// where that route sends it upstream (its base path, the upstream's scheme and `Host`). Neither
/// the source nor the destination may be a folder holding another route's files upstream.
enum WebDAVDestination {
    /// Why a `Destination` is refused: the stable code and one sentence.
    struct Refusal: Error, Equatable {
        let code: String
        let message: String
        /// 403 for a place the route does not cover; 400 for a field that cannot be read.
        let forbidden: Bool

        static func invalid(_ message: String) -> Refusal { Refusal(code: "destination_invalid", message: message, forbidden: false) }
    }

    /// The `Destination` the upstream gets for `values` (every `Destination` field of the request).
    ///
    /// - Parameters:
    ///   - requestHost: the request's `Host` as it came (an absolute `Destination` must name it).
    ///   - route: the route the request was admitted on; the destination must be its too.
    ///   - upstream: scheme and authority the upstream is addressed by (`http://127.0.0.1:9000`).
    static func rewritten(
        _ values: [String], requestHost: String?, route: DataPlane.Route, table: RouteTable, upstream: String
    ) throws(Refusal) -> String {
        guard values.count == 1, let value = values.first, !value.isEmpty else {
            throw .invalid(values.isEmpty ? "a COPY or MOVE names its Destination (RFC 4918 §10.3)" : "a COPY or MOVE names one Destination, once")
        }
        guard value.utf8.count <= 8_192, value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalid("the Destination is an absolute URI or path of printable ASCII, at most 8 KiB")
        }
        var path = Substring(value)
        if !value.hasPrefix("/") {
            let lowered = value.prefix(8).lowercased()
            let schemeLength = lowered.hasPrefix("https://") ? 8 : lowered.hasPrefix("http://") ? 7 : 0
            guard schemeLength > 0 else { throw .invalid("the Destination is an http(s) URI or an absolute path") }
            let rest = value.dropFirst(schemeLength)
            let authority = rest.prefix { $0 != "/" }
            // `gw:443` is `gw` to an https URI (`:80` to an http one), in the Destination and in Host alike.
            let defaultPort = schemeLength == 8 ? ":443" : ":80"
            guard let host = requestHost, !authority.isEmpty, Self.withoutPort(defaultPort, authority) == Self.withoutPort(defaultPort, Substring(host)) else {
                throw Refusal(code: "destination_refused", message: "the Destination must be on the host the request was sent to", forbidden: true)
            }
            path = rest.dropFirst(authority.count)
            guard path.hasPrefix("/") else { throw .invalid("the Destination names a path") }
        }
        guard !path.contains("?"), !path.contains("#") else { throw .invalid("the Destination has no query or fragment") }
        let normalized: Substring
        do {
            normalized = try RequestTarget.normalizedPath(path)
        } catch {
            throw .invalid("the Destination's path is not one the gateway routes (\(error.code))")
        }
        // The same route object: a reload since the request was routed refuses rather than compares two tables' routes.
        guard let (destinationRoute, remainder) = table.route(host: requestHost, path: normalized), destinationRoute === route else {
            throw Refusal(code: "destination_refused", message: "a COPY or MOVE may only name a Destination on the route it was sent to", forbidden: true)
        }
        let target = upstreamPath(route: route, path: normalized, remainder: remainder)
        if coversAnotherRoute(target, route: route, table: table) { throw reachesAnotherRoute }
        return upstream + target
    }

    /// Whether `values` (every `Depth` field) ask for one level at most: exactly one `Depth`, `0` or
    /// `1`. None is `infinity` for PROPFIND and LOCK (RFC 4918 §9.1, §9.10.3); two are read by
    /// servers differently.
    static func isShallow(_ values: [String]) -> Bool {
        values.count == 1 && (values[0] == "0" || values[0] == "1")
    }

    /// The refusal of a folder that holds another route's files.
    static let reachesAnotherRoute = Refusal(
        code: "destination_refused", message: "this folder holds another route's files upstream; a COPY, MOVE or DELETE of it would reach them", forbidden: true)

    /// Where `path` (below the route's prefix: `remainder`) is at the upstream, as `writeTarget` writes it.
    static func upstreamPath(route: DataPlane.Route, path: Substring, remainder: Substring) -> String {
        let target = route.origin.basePath + (route.stripsPrefix ? remainder : path)
        return target.isEmpty ? "/" : target
    }

    /// Whether `target` at the upstream reaches another route's files there: COPY, MOVE and DELETE
    /// act on a folder with all it holds (`Depth: infinity`), so a folder on this route that is, or
    /// holds, another route's files (`/dav` beside `/dav/projects/adm`) would reach past that
    /// route's policy; and a target inside a part of this route's namespace that another route
    /// carved out (`/dav/projects/adm/x` on `/dav`) is that route's file.
    static func coversAnotherRoute(_ target: String, route: DataPlane.Route, table: RouteTable) -> Bool {
        let folder = UpstreamNamespace.asFolder(target)
        let ownRoot = namespace(of: route)
        for other in table.routes where other !== route && UpstreamNamespace.sameServer(other.origin, route.origin) {
            let root = namespace(of: other)
            if root.hasPrefix(folder) { return true }
            if root.utf8.count > ownRoot.utf8.count, root.hasPrefix(ownRoot), folder.hasPrefix(root) { return true }
        }
        return false
    }

    /// Where a route's files are at its upstream, as a folder.
    private static func namespace(of route: DataPlane.Route) -> String {
        UpstreamNamespace.folder(route.origin, prefix: route.stripsPrefix ? "" : route.prefix)
    }

    /// An authority in lower case without its scheme's default port (`defaultPort`, `:443`).
    private static func withoutPort(_ defaultPort: String, _ authority: Substring) -> Substring {
        let lowered = Substring(authority.lowercased())
        return lowered.hasSuffix(defaultPort) ? lowered.dropLast(defaultPort.count) : lowered
    }
}
