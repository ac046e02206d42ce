import DataPlane

/// What two routes may not share: the host (or any host) and the prefix they serve. Two routes
/// with one `ServedPrefix` would serve the same requests; nested prefixes are fine, the longest serves.
struct ServedPrefix: Hashable {
    let host: RouteHost?
    /// `ProxyRoute.pathPrefix`: `/api` and `/api/` are one prefix.
    let prefix: String

    init(_ route: ProxyRoute) {
        host = route.host
        prefix = route.pathPrefix
    }
}
