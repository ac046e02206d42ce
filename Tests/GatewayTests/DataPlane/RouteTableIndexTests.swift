import DataPlane
import Gateway
import Testing

/// The route table's index answers as trying every route, most specific first, would: the rule
/// `RouteTable` states, written here the slow way as the specification it is checked against.
@Suite("Route table: one lookup per path ancestor, the same answer as trying every route")
struct RouteTableIndexTests {
    /// Who serves `path` on `host` by trying `table.routes` in order (most specific first).
    static func triedInOrder(_ table: RouteTable, _ host: String?, _ path: Substring) -> String {
        if ReservedPaths.isOnEveryHost(path) { return "gateway" }
        let requested = table.hasHostRoutes ? host.flatMap { RouteHost.requestHost($0[...]) } : nil
        let onRouteHost = requested.map { requested in requested != table.publicHost?[...] && table.routes.contains { $0.host?.matches(requested) == true } } ?? false
        for route in table.routes {
            if let bound = route.host {
                guard let requested, bound.matches(requested) else { continue }
            }
            guard let remainder = ProxyRoute.remainder(of: path, under: route.prefix) else { continue }
            if table.hasHostRoutes ? !onRouteHost && ReservedPaths.covers(path) : route.prefix.isEmpty && ReservedPaths.covers(path) { return "gateway" }
            return "\(route.index) \(remainder)"
        }
        return onRouteHost ? "unrouted" : "gateway"
    }

    static func answer(_ table: RouteTable, _ host: String?, _ path: Substring) -> String {
        switch table.match(host: host, path: path) {
        case .route(let route, let remainder): "\(route.index) \(remainder)"
        case .gateway: "gateway"
        case .unrouted: "unrouted"
        }
    }

    /// SplitMix64: the same tables and requests on every run.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let routeHosts: [String?] = [nil, nil, "a.example.com", "b.example.com", "*.example.com", "*.b.example.com", "x.b.example.com", "auth.example.com", "*.auth.example.com"]
    static let prefixes = ["/", "/api", "/api/v1", "/api/v1/items", "/app", "/a", "/a/b", "/a/b/c", "/api/auth", "/.well-known", "/apix", "/ws", "/mcp/github", "/K"]
    static let requestHosts: [String?] = [
        nil, "a.example.com", "A.Example.COM:8443", "b.example.com.", "x.b.example.com", "y.b.example.com", "a.b.example.com", "z.example.com", "example.com",
        "auth.example.com", "q.auth.example.com", "other.test", "bad/host", "",
    ]
    static let paths = [
        "/", "/api", "/api/", "/api/v1", "/api/v1/", "/api/v1/items/7", "/api/v1x", "/apix/y", "/app/x/y/z", "/a", "/a/b", "/a/b/c/d/e", "/a/bc",
        "/api/auth/login", "/api/auth/verify", "/.portcullis/sign_in", "/.well-known/jwks.json", "/healthz", "/ws", "/ws/agent", "/mcp/github", "/mcp", "/zzz",
        // Targets match may be given before normalisation (an upgrade's raw target): none, `*`, no leading `/`, an
        // escape, and a Kelvin sign, which Swift's String calls equal to `K` but whose bytes are not `/K`'s.
        "", "*", "api/v1", "/%41pi", "/K/x", "/\u{212A}", "/\u{212A}/x",
    ]

    @Test("for random tables of every host class (exact, wildcard, any, the public host among them), every request host and path gets the route trying each route in order gives, with the same remainder")
    func indexAgreesWithTryingEveryRoute() {
        var random = Seeded(state: 0x5EED)
        var compared = 0
        for _ in 0..<300 {
            let count = Int.random(in: 0...12, using: &random)
            let routes = (0..<count).map { _ in
                HostRouteTests.route(Self.routeHosts.randomElement(using: &random) ?? nil, Self.prefixes.randomElement(using: &random) ?? "/")
            }
            let table = RouteTable(routes: routes, allowedOrigins: [], publicHost: Bool.random(using: &random) ? "auth.example.com" : nil)
            for host in Self.requestHosts {
                for path in Self.paths {
                    #expect(Self.answer(table, host, path[...]) == Self.triedInOrder(table, host, path[...]), "\(routes.map { ($0.host?.description ?? "") + $0.prefix }) \(host ?? "no Host") \(path)")
                    compared += 1
                }
            }
        }
        #expect(compared == 300 * Self.requestHosts.count * Self.paths.count)
    }

    @Test("with 10,000 prefix routes and 1,000 hosts each request gets its own route, the first configured of two with one host and prefix, and the host checks name exactly the route hosts")
    func largeTablesServeTheRightRoute() {
        var routes = (0..<10_000).map { HostRouteTests.route(nil, "/service\($0)/api") }
        routes += (0..<1_000).map { HostRouteTests.route("app\($0).example.com", "/") }
        routes += [HostRouteTests.route(nil, "/service42/api", "http://127.0.0.1:9001"), HostRouteTests.route("*.wild.example.com", "/w")]
        let table = RouteTable(routes: routes, allowedOrigins: [], publicHost: "auth.example.com")
        for index in [0, 42, 9_999] {
            guard case .route(let route, let remainder) = table.match(host: "auth.example.com", path: "/service\(index)/api/v1/x") else {
                Issue.record("no route for /service\(index)")
                continue
            }
            #expect(route.name == "/service\(index)/api" && remainder == "/v1/x")
            #expect(route.origin.port == 9000, "the first of two routes with one prefix serves")
        }
        #expect(Self.answer(table, "app999.example.com", "/x") == Self.triedInOrder(table, "app999.example.com", "/x"))
        #expect(Self.answer(table, "app1000.example.com", "/service3/api") == Self.triedInOrder(table, "app1000.example.com", "/service3/api"))
        #expect(table.servesHost("app7.example.com") && table.servesHost("one.wild.example.com"))
        #expect(!table.servesHost("app1000.example.com") && !table.servesHost("a.one.wild.example.com") && !table.servesHost("wild.example.com"))
    }
}
