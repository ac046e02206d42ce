import TrafficCop

/// A COPY's or MOVE's `Destination` (RFC 4918 §10.3), decided as the request's own target is and
/// written in the upstream's namespace.
///
/// The upstream acts on `Destination` as on a second request target: forwarded as the client
/// sent it, a caller admitted on `/dav/pub` could overwrite a file behind `/dav/adm`, a route that
/// refuses them (another route's path, spelled `/dav/pub/../adm` or `%2e%2e`, or on another host).
/// So, as nginx's `dav_methods` does: exactly one `Destination`, on the host the request was sent
/// to, its path normalised as a request target is, served by the same route, and rewritten to
/// where that route sends it upstream (its base path, the upstream's scheme and `Host`).
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
            guard let host = requestHost, !authority.isEmpty, authority.lowercased() == host.lowercased() else {
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
        guard let (destinationRoute, remainder) = table.route(host: requestHost, path: normalized), destinationRoute.index == route.index else {
            throw Refusal(code: "destination_refused", message: "a COPY or MOVE may only name a Destination on the route it was sent to", forbidden: true)
        }
        let below = route.stripsPrefix ? remainder : normalized
        let target = route.origin.basePath + below
        return upstream + (target.isEmpty ? "/" : target)
    }
}
