import NIOHTTP1
import Synchronization

/// The routes and CORS origins the data plane serves by: one value, read once per request and
/// replaced whole by a configuration reload, so a request finishes under the table it started with.
package struct RouteTable: Sendable {
    /// The routes in configuration order (prefixes never overlap: the configuration refuses it).
    package let routes: [DataPlane.Route]
    /// `gateway.allowed_origins`.
    package let allowedOrigins: Set<String>
    /// Counts the tables put in force (0 at start); metric handles are kept per generation.
    package let generation: Int

    package init(routes: [ProxyRoute], allowedOrigins: [String], generation: Int = 0) {
        let origins = Set(allowedOrigins)
        self.allowedOrigins = origins
        self.generation = generation
        self.routes = routes.compactMap { route -> (ProxyRoute, UpstreamOrigin)? in
            UpstreamOrigin(url: route.upstream).map { (route, $0) }
        }.enumerated().map { index, pair in
            let (route, origin) = pair
            let methods = route.methods ?? ProxyRoute.methods
            return DataPlane.Route(
                prefix: route.pathPrefix, origin: origin, audience: route.audience, template: route.pathPrefix + "/**", name: route.prefix, index: index,
                generation: generation, methods: methods.map { HTTPMethod(rawValue: $0.rawValue) }, allowedMethodNames: methods.map(\.rawValue),
                requiresToken: route.requiresToken, policy: route.policy, allowedOrigins: origins)
        }
    }

    /// The route serving a normalised `path` (`PREFIX` itself or `PREFIX/...`), and the
    /// part of the path below its prefix.
    package func route(for path: Substring) -> (route: DataPlane.Route, remainder: Substring)? {
        for route in routes {
            if let remainder = ProxyRoute.remainder(of: path, under: route.prefix) { return (route, remainder) }
        }
        return nil
    }

    /// Whether `head` is a CORS preflight (OPTIONS with `Access-Control-Request-Method`) from an
    /// origin in `gateway.allowed_origins`: those are answered by `OriginPolicyMiddleware`.
    func isAllowedPreflight(_ head: HTTPRequestHead) -> Bool {
        guard head.method == .OPTIONS, head.headers.contains(name: "access-control-request-method"), let origin = head.headers.first(name: "origin")
        else { return false }
        return allowedOrigins.contains(origin)
    }
}

/// The route table in force, shared by the data plane, forward-auth and the origin policy.
///
/// The data plane's connections keep a copy each and compare its generation with the one in
/// force (`refresh`): one atomic load per request, no lock taken on a line both loops write.
package final class LiveRouteTable: Sendable {
    private let table: Mutex<RouteTable>
    private let generation = Atomic<Int>(0)

    package init(_ table: RouteTable) {
        self.table = Mutex(table)
        generation.store(table.generation, ordering: .releasing)
    }

    /// The table in force now; read it once per request.
    package var current: RouteTable { table.withLock { $0 } }

    /// Replaces `copy` with the table in force when a reload has put another in force since.
    package func refresh(_ copy: inout RouteTable) {
        if copy.generation != generation.load(ordering: .acquiring) { copy = current }
    }

    /// Puts new routes and origins in force for the requests that start from now on.
    package func replace(routes: [ProxyRoute], allowedOrigins: [String]) {
        let next = table.withLock { table in
            table = RouteTable(routes: routes, allowedOrigins: allowedOrigins, generation: table.generation + 1)
            return table.generation
        }
        generation.store(next, ordering: .releasing)
    }
}
