import MCPPolicy
import EdgeHTTP
import NIOHTTP1
import Synchronization

/// The routes and CORS origins the data plane serves by: one value, read once per request and
/// replaced whole by a configuration reload, so a request finishes under the table it started with.
///
/// The most specific route serves a request: one bound to its exact host, then to a wildcard
/// host, then to any host; within those, the longest prefix. On the public host (and any host
/// no route names) the gateway's own paths win over a catch-all `/`; on a route host only
/// `/.portcullis` and forward-auth are the gateway's, and a path no route serves there is nobody's (404).
package struct RouteTable: Sendable {
    /// The routes, most specific first (the order they are tried in).
    package let routes: [DataPlane.Route]
    /// `gateway.allowed_origins`.
    package let allowedOrigins: Set<String>
    /// Counts the tables put in force (0 at start); metric handles are kept per generation.
    package let generation: Int
    /// The public host (`gateway.public_url`'s), lower case: the API's host, never a route host.
    package let publicHost: String?
    /// Whether any route is bound to a host: without one, the request's `Host` is never read.
    package let hasHostRoutes: Bool
    /// Every `identity_headers` name of every route, folded (`HeaderScreen.folded`): stripped from every request.
    package let identityFieldNames: Set<String>
    /// The routes bound to no host, by prefix.
    private let anyHost: RoutePrefixIndex
    /// The routes bound to each exact host (lower case), by prefix.
    private let exactHosts: [Substring: RoutePrefixIndex]
    /// The routes bound to each wildcard, keyed by its suffix (`.example.com`), by prefix.
    private let wildcardHosts: [Substring: RoutePrefixIndex]

    package init(routes: [ProxyRoute], allowedOrigins: [String], publicHost: String? = nil, generation: Int = 0) {
        let origins = Set(allowedOrigins)
        self.allowedOrigins = origins
        self.generation = generation
        self.publicHost = publicHost?.lowercased()
        hasHostRoutes = routes.contains { $0.host != nil }
        let identityFieldNames = Set(routes.flatMap { $0.identityFields?.names ?? [] }.map(HeaderScreen.folded))
        self.identityFieldNames = identityFieldNames
        let served = routes.compactMap { route -> (ProxyRoute, UpstreamOrigin)? in
            UpstreamOrigin(url: route.isForwardAuthOnly ? ProxyRoute.forwardAuthOnlyOrigin : route.upstream).map { origin in
                var origin = origin
                origin.transport = route.upstreamProtocol
                return (route, origin)
            }
        }
        // Most specific first; configuration order among equals (the configuration refuses two with the same host and prefix).
        let ordered = served.enumerated().sorted { a, b in
            let (x, y) = (a.element.0, b.element.0)
            if Self.hostRank(x.host) != Self.hostRank(y.host) { return Self.hostRank(x.host) < Self.hostRank(y.host) }
            if x.pathPrefix.utf8.count != y.pathPrefix.utf8.count { return x.pathPrefix.utf8.count > y.pathPrefix.utf8.count }
            return a.offset < b.offset
        }.map(\.element)
        self.routes = ordered.enumerated().map { index, pair in
            let (route, origin) = pair
            // An MCP route takes the transport's methods only, whatever else `methods` lists: its
            // 405 names those (RFC 9110 §15.5.6), never a PUT or PATCH it would refuse anyway.
            let methods = (route.methods ?? ProxyRoute.methods).filter { method in
                route.mcp == nil || ProxyExchange.mcpMethods.contains { $0.rawValue == method.rawValue }
            }
            let name = (route.host.map(\.description) ?? "") + route.prefix
            return DataPlane.Route(
                prefix: route.pathPrefix, host: route.host, origin: origin, audience: route.audience,
                template: (route.host.map(\.description) ?? "") + route.pathPrefix + "/**", name: name, index: index,
                generation: generation, methods: methods.map { HTTPMethod(rawValue: $0.rawValue) }, allowedMethodNames: methods.map(\.rawValue),
                requiresToken: route.requiresToken, policy: route.policy, allowedOrigins: origins, stripsPrefix: route.stripsPrefix, preservesHost: route.preservesHost, forwardAuthOnly: route.isForwardAuthOnly,
                identityFields: route.identityFields, identityFieldNames: identityFieldNames, acceptsSessionCookie: route.acceptsSessionCookie,
                signIn: route.signIn, grpcOnly: route.grpcOnly, mcp: route.mcp,
                mcpPolicy: route.mcp == nil ? nil : route.mcpPolicy ?? MCPCallPolicy(), upstreamCredential: route.upstreamCredential)
        }
        // Indexed most specific first, so that among equals the one tried first in `routes` keeps its prefix.
        var anyHost = RoutePrefixIndex()
        var exactHosts: [Substring: RoutePrefixIndex] = [:]
        var wildcardHosts: [Substring: RoutePrefixIndex] = [:]
        for route in self.routes {
            switch route.host {
            case nil: anyHost.insert(prefix: route.prefix, index: route.index)
            case .exact(let name)?: exactHosts[name[...], default: RoutePrefixIndex()].insert(prefix: route.prefix, index: route.index)
            case .wildcard(let suffix)?: wildcardHosts[suffix[...], default: RoutePrefixIndex()].insert(prefix: route.prefix, index: route.index)
            }
        }
        (self.anyHost, self.exactHosts, self.wildcardHosts) = (anyHost, exactHosts, wildcardHosts)
    }

    /// Exact hosts first, then wildcards (the longer domain first), then any host.
    private static func hostRank(_ host: RouteHost?) -> Int {
        switch host {
        case .exact?: 0
        case .wildcard(let suffix)?: 1_000 - suffix.utf8.count
        case nil: 10_000
        }
    }

    /// Who serves a request.
    package enum Match {
        /// This route, with the part of the path below its prefix.
        case route(DataPlane.Route, remainder: Substring)
        /// The gateway itself (its API, sign-in, the demo page, or its 404).
        case gateway
        /// Nobody: a path on a route host that no route serves and that is not the gateway's (404).
        case unrouted
    }

    /// Who serves the normalised `path` asked of `host` (the request's `Host` field as it came, `nil` when it had none).
    ///
    /// One lookup per ancestor of the path in each host class that applies (the exact host, the one
    /// wildcard that can cover it, every host), most specific first: the cost follows the path's
    /// depth, never the number of routes.
    package func match(host: String?, path: Substring) -> Match {
        if ReservedPaths.isOnEveryHost(path) { return .gateway }
        guard hasHostRoutes else {
            guard let (index, remainder) = anyHost.longestMatch(path) else { return .gateway }
            let route = routes[index]
            if route.prefix.isEmpty, ReservedPaths.covers(path) { return .gateway }
            return .route(route, remainder: remainder)
        }
        var found: (index: Int, remainder: Substring)?
        // A host some route is bound to, other than the public host: the API is not served there.
        var onRouteHost = false
        if let requested = host.flatMap({ RouteHost.requestHost($0[...]) }) {
            let exact = exactHosts[requested]
            let wildcard = Self.wildcardSuffix(of: requested).flatMap { wildcardHosts[$0] }
            onRouteHost = (exact != nil || wildcard != nil) && requested != publicHost?[...]
            found = exact?.longestMatch(path) ?? wildcard?.longestMatch(path)
        }
        guard let (index, remainder) = found ?? anyHost.longestMatch(path) else { return onRouteHost ? .unrouted : .gateway }
        // Off route hosts (the public host above all) the gateway's own paths are the gateway's,
        // whatever route covers them (a wildcard that also names the public host included).
        if !onRouteHost, ReservedPaths.covers(path) { return .gateway }
        return .route(routes[index], remainder: remainder)
    }

    /// Whether some route is bound to `host` (as `RouteHost.requestHost(_:)` spells it), by name or by wildcard.
    package func servesHost(_ host: Substring) -> Bool {
        exactHosts[host] != nil || Self.wildcardSuffix(of: host).map { wildcardHosts[$0] != nil } == true
    }

    /// The one wildcard suffix that can cover `host`: from its first `.` (a wildcard covers one label).
    private static func wildcardSuffix(of host: Substring) -> Substring? {
        guard let dot = host.utf8.firstIndex(of: UInt8(ascii: ".")), dot > host.utf8.startIndex else { return nil }
        return host[dot...]
    }

    /// The route serving the normalised `path` asked of `host`, and the part of the path below its prefix.
    package func route(host: String?, path: Substring) -> (route: DataPlane.Route, remainder: Substring)? {
        guard case .route(let route, let remainder) = match(host: host, path: path) else { return nil }
        return (route, remainder)
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
            table = RouteTable(routes: routes, allowedOrigins: allowedOrigins, publicHost: table.publicHost, generation: table.generation + 1)
            return table.generation
        }
        generation.store(next, ordering: .releasing)
    }
}
