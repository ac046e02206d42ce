import ConfigurationReading
import DataPlane
import EdgeHTTP
import Foundation
import Gateway
import NIOHTTP1
import PortcullisTestSupport
import Testing

/// Routes bound to a host, at `/`, with or without their prefix, and the identity fields they
/// send their upstream: read from the configuration, matched the most specific first, and
/// served through the real gateway.
@Suite("Routes by host, at /, with or without the prefix")
struct HostRouteTests {
    static func route(_ host: String?, _ prefix: String, _ upstream: String = "http://127.0.0.1:9000") -> ProxyRoute {
        var route = ProxyRoute(prefix: prefix, upstream: upstream)
        route.host = host.flatMap(RouteHost.init(configured:))
        return route
    }

    /// Who serves `path` on `host`: a route's upstream, "gateway" or "unrouted".
    static func served(_ table: RouteTable, _ host: String?, _ path: String) -> String {
        switch table.match(host: host, path: path[...]) {
        case .route(let route, _): route.name
        case .gateway: "gateway"
        case .unrouted: "unrouted"
        }
    }

    @Test("the most specific route serves: exact host, then a wildcard, then any host, the longest prefix first; on the public host the gateway's own paths win over /, on a route host only /.portcullis and forward-auth are the gateway's")
    func mostSpecificFirst() {
        let table = RouteTable(
            routes: [
                Self.route(nil, "/"), Self.route(nil, "/api/billing"), Self.route("*.example.com", "/app"), Self.route("grafana.example.com", "/"),
                Self.route("grafana.example.com", "/api/billing"),
            ], allowedOrigins: [], publicHost: "auth.example.com")
        let cases: [(String?, String, String)] = [
            ("grafana.example.com", "/api/billing/x", "grafana.example.com/api/billing"),
            ("grafana.example.com", "/dashboards", "grafana.example.com/"),
            ("Grafana.EXAMPLE.com.:443", "/", "grafana.example.com/"),
            ("grafana.example.com", "/api/auth/login", "grafana.example.com/"),
            ("grafana.example.com", "/.portcullis/sign_in", "gateway"),
            ("grafana.example.com", "/.portcullis", "gateway"),
            ("grafana.example.com", "/api/auth/verify", "gateway"),
            ("grafana.example.com", "/api/auth/verifyx", "grafana.example.com/"),
            ("other.example.com", "/app/x", "*.example.com/app"),
            ("other.example.com", "/api/billing", "/api/billing"),
            ("a.b.example.com", "/app/x", "/"),
            ("example.com", "/app/x", "/"),
            ("badexample.com", "/app/x", "/"),
            ("auth.example.com", "/api/auth/login", "gateway"),
            ("auth.example.com", "/healthz", "gateway"),
            ("auth.example.com", "/api/billing/x", "/api/billing"),
            ("auth.example.com", "/anything", "/"),
            (nil, "/api/session", "gateway"),
            (nil, "/portcullis", "/"),
            ("grafana.example.com/x", "/dashboards", "/"),
        ]
        for (host, path, expected) in cases {
            #expect(Self.served(table, host, path) == expected, "\(host ?? "no Host") \(path)")
        }
    }

    @Test("on a route host a path no route serves is nobody's (404), never the gateway's API; on the public host and on other hosts it is the gateway's")
    func routeHostsDoNotServeTheAPI() {
        let table = RouteTable(
            routes: [Self.route("grafana.example.com", "/grafana"), Self.route(nil, "/api/billing")], allowedOrigins: [], publicHost: "auth.example.com")
        #expect(Self.served(table, "grafana.example.com", "/api/auth/login") == "unrouted")
        #expect(Self.served(table, "grafana.example.com", "/api/billing/x") == "/api/billing")
        #expect(Self.served(table, "grafana.example.com", "/.portcullis/sign_in") == "gateway")
        #expect(Self.served(table, "auth.example.com", "/api/auth/login") == "gateway")
        #expect(Self.served(table, "127.0.0.1:8080", "/api/auth/login") == "gateway")
        #expect(Self.served(table, "auth.example.com", "/grafana/x") == "gateway")
        // A wildcard that also covers the public host never takes the gateway's paths there (the configuration refuses it too).
        let wildcard = RouteTable(routes: [Self.route("*.example.com", "/.well-known")], allowedOrigins: [], publicHost: "auth.example.com")
        #expect(Self.served(wildcard, "auth.example.com", "/.well-known/jwks.json") == "gateway")
        #expect(Self.served(wildcard, "app.example.com", "/.well-known/x") == "*.example.com/.well-known")
        // The public host named by a route stays the public host.
        let onPublic = RouteTable(routes: [Self.route("auth.example.com", "/")], allowedOrigins: [], publicHost: "auth.example.com")
        #expect(Self.served(onPublic, "auth.example.com", "/api/session") == "gateway")
        #expect(Self.served(onPublic, "auth.example.com", "/wiki") == "auth.example.com/")
    }

    @Test("a request's Host is matched lower-cased, without its port and one trailing dot; a value that is no host name matches no host route")
    func requestHostSpelling() {
        let cases: [(String, String?)] = [
            ("grafana.example.com", "grafana.example.com"), ("GRAFANA.Example.Com", "grafana.example.com"), ("grafana.example.com:8443", "grafana.example.com"),
            ("grafana.example.com.", "grafana.example.com"), ("grafana.example.com.:80", "grafana.example.com"), ("127.0.0.1:8080", "127.0.0.1"),
            ("", nil), (":80", nil), ("a/b", nil), ("user@grafana.example.com", nil), ("[::1]:80", nil), ("grafana.example.com:x", nil),
            ("graf\u{0430}na.example.com", nil), ("grafana.example.com..", nil), ("grafana example.com", nil),
        ]
        for (value, expected) in cases {
            #expect(RouteHost.requestHost(value[...]).map(String.init) == expected, "\(value)")
        }
    }

    @Test("a route's host is a DNS name or *. and one, without scheme, port, path or trailing dot; a wildcard covers exactly one label")
    func configuredHosts() {
        for accepted in ["grafana.example.com", "Grafana.Example.com", "*.example.com", "localhost", "127.0.0.1", "a-b.example.com"] {
            #expect(RouteHost(configured: accepted) != nil, "\(accepted)")
        }
        for refused in ["", "*", "*.com", "*example.com", "a.*.example.com", "https://grafana.example.com", "grafana.example.com:443", "grafana.example.com.",
            "grafana.example.com/x", "-grafana.example.com", "grafana-.example.com", "graf_ana.example.com", "grafana..example.com", "gr\u{0430}fana.example.com",
            "evil。com"]
        {
            #expect(RouteHost(configured: refused) == nil, "\(refused)")
        }
        let wildcard = RouteHost(configured: "*.example.com")
        #expect(wildcard?.matches("grafana.example.com") == true)
        #expect(wildcard?.matches("example.com") == false)
        #expect(wildcard?.matches("a.b.example.com") == false)
        #expect(wildcard?.matches("badexample.com") == false)
        #expect(wildcard?.matches(".example.com") == false)
    }

    static func configuration(_ gateway: String) async throws -> GatewayConfiguration {
        try GatewayConfiguration(reading: try await RoutePolicyTests.load("gateway:\n  port: 9999\n" + gateway))
    }

    static func refusal(_ gateway: String) async throws -> ConfigurationError? {
        do {
            _ = try await configuration(gateway)
            return nil
        } catch let error as ConfigurationError {
            return error
        }
    }

    @Test("host, strip_prefix and identity_headers are read from a route; a route host must be the public host or lie under cookie_domain at a dot, named by its key")
    func readFromTheConfiguration() async throws {
        let read = try await Self.configuration(
            """
              public_url: https://auth.example.com
              cookie_domain: Example.com
              routes:
                - host: Grafana.example.com
                  prefix: /
                  upstream: http://127.0.0.1:3000
                  strip_prefix: false
                  identity_headers: {user: X-WEBAUTH-USER, email: X-WEBAUTH-EMAIL, groups: X-WEBAUTH-GROUPS, tenant: X-WEBAUTH-TENANT}
                - host: "*.example.com"
                  prefix: /
                  upstream: http://127.0.0.1:3001
                - host: auth.example.com
                  prefix: /wiki
                  upstream: http://127.0.0.1:3002
                - prefix: /
                  upstream: http://127.0.0.1:3003
            """)
        #expect(read.cookieDomain == "example.com")
        #expect(read.routes.map(\.host) == [.exact("grafana.example.com"), .wildcard(suffix: ".example.com"), .exact("auth.example.com"), nil])
        #expect(read.routes.map(\.stripsPrefix) == [false, true, true, true])
        #expect(read.routes[0].identityFields == IdentityFieldNames(user: "X-WEBAUTH-USER", email: "X-WEBAUTH-EMAIL", groups: "X-WEBAUTH-GROUPS", tenant: "X-WEBAUTH-TENANT"))

        let refused: [(String, String)] = [
            ("  public_url: https://auth.example.com\n  routes:\n    - {host: grafana.example.com, prefix: /, upstream: 'http://127.0.0.1:3000'}\n",
             "gateway.routes[0].host"),
            ("  public_url: https://auth.example.com\n  cookie_domain: example.com\n  routes:\n    - {host: grafana.badexample.com, prefix: /, upstream: 'http://127.0.0.1:3000'}\n",
             "gateway.routes[0].host"),
            ("  public_url: https://auth.example.com\n  cookie_domain: example.com\n  routes:\n    - {host: badexample.com, prefix: /, upstream: 'http://127.0.0.1:3000'}\n",
             "gateway.routes[0].host"),
            ("  public_url: https://auth.example.com\n  cookie_domain: other.com\n", "gateway.cookie_domain"),
            ("  public_url: https://auth.example.com\n  cookie_domain: com\n", "gateway.cookie_domain"),
            ("  public_url: https://auth.example.com\n  cookie_domain: .example.com\n", "gateway.cookie_domain"),
            ("  routes:\n    - {host: 'grafana.example.com:3000', prefix: /, upstream: 'http://127.0.0.1:3000'}\n", "gateway.routes[0].host"),
            ("  routes:\n    - {prefix: /api/v1, upstream: 'http://127.0.0.1:3000'}\n    - {prefix: /api/v1/, upstream: 'http://127.0.0.1:3001'}\n", "gateway.routes[1]"),
            ("  public_url: https://auth.example.com\n  routes:\n    - {host: auth.example.com, prefix: /api, upstream: 'http://127.0.0.1:3000'}\n",
             "gateway.routes[0].prefix"),
            ("  public_url: https://auth.example.com\n  cookie_domain: example.com\n  routes:\n    - {host: app.example.com, prefix: /.portcullis, upstream: 'http://127.0.0.1:3000'}\n",
             "gateway.routes[0].prefix"),
            ("  public_url: https://auth.example.com\n  cookie_domain: example.com\n  routes:\n    - {host: '*.example.com', prefix: /.well-known, upstream: 'http://127.0.0.1:3000'}\n",
             "gateway.routes[0].prefix"),
            ("  public_url: https://auth.example.com\n  cookie_domain: example.com\n  routes:\n    - {host: '*.example.com', prefix: /api/auth/login, upstream: 'http://127.0.0.1:3000'}\n",
             "gateway.routes[0].prefix"),
            ("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', strip_prefix: sometimes}\n", "gateway.routes[0].strip_prefix"),
            ("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', identity_headers: {user: Host}}\n", "gateway.routes[0].identity_headers.user"),
            ("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', identity_headers: {user: X-Portcullis-User}}\n", "gateway.routes[0].identity_headers.user"),
            ("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', identity_headers: {email: 'X Mail'}}\n", "gateway.routes[0].identity_headers.email"),
            ("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', identity_headers: {user: Cookie}}\n", "gateway.routes[0].identity_headers.user"),
            ("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', identity_headers: {user: X-User, email: x_user}}\n",
             "gateway.routes[0].identity_headers.email"),
            ("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', identity_headers: {login: X-User}}\n", "gateway.routes[0].identity_headers.login"),
            ("  public_url: http://auth.example.com\n  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', auth: browser}\n", "gateway.routes[0].auth"),
            ("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', sign_in: acme}\n", "gateway.routes[0].sign_in"),
        ]
        for (yaml, key) in refused {
            let error = try await Self.refusal(yaml)
            #expect(error?.key == key, "\(yaml): \(error?.message ?? "accepted")")
        }
    }

    @Test("a WebDAV route and another that reach one upstream folder at different paths are refused, naming the later route (any spelling of the server, any slashes); nested routes that reach it at the inner route's own prefix, other servers, and plain routes sharing an app are accepted")
    func webDAVNamespacesDoNotOverlap() async throws {
        let dav = "methods: [GET, PUT, DELETE, PROPFIND, MKCOL, COPY, MOVE]"
        let refused = [
            "    - {prefix: /dav/adm, upstream: 'http://127.0.0.1:9000/adm', \(dav)}\n    - {prefix: /dav/all, upstream: 'http://127.0.0.1:9000', \(dav)}\n",
            "    - {prefix: /dav/all, upstream: 'http://LOCALHOST:9000//', \(dav)}\n    - {prefix: /dav/adm, upstream: 'http://localhost:9000/adm', require: {tenants: [admins]}}\n",
            "    - {prefix: /files, upstream: 'http://127.0.0.1:9000/files', strip_prefix: false, \(dav)}\n    - {prefix: /x, upstream: 'http://127.0.0.1:9000/files', \(dav)}\n",
            "    - {prefix: /a, upstream: 'http://127.0.0.1:9000/f', \(dav)}\n    - {prefix: /b, upstream: 'http://127.0.0.1:9000/f/', \(dav)}\n",
        ]
        for routes in refused {
            let error = try await Self.refusal("  routes:\n" + routes)
            #expect(error?.key == "gateway.routes[1]" && error?.message.contains("folder") == true, "\(routes): \(error?.message ?? "accepted")")
        }
        let accepted = [
            "    - {prefix: /dav, upstream: 'http://127.0.0.1:9000', \(dav)}\n    - {prefix: /dav/adm, upstream: 'http://127.0.0.1:9000/adm', \(dav)}\n",
            "    - {prefix: /dav/a, upstream: 'http://127.0.0.1:9000/a', \(dav)}\n    - {prefix: /dav/b, upstream: 'http://127.0.0.1:9000/b', \(dav)}\n",
            "    - {prefix: /dav/a, upstream: 'http://127.0.0.1:9000', \(dav)}\n    - {prefix: /dav/b, upstream: 'http://127.0.0.1:9001', \(dav)}\n",
            "    - {prefix: /app, upstream: 'http://127.0.0.1:9000'}\n    - {prefix: /admin, upstream: 'http://127.0.0.1:9000', require: {tenants: [admins]}}\n",
        ]
        for routes in accepted {
            let error = try await Self.refusal("  routes:\n" + routes)
            #expect(error == nil, "\(routes): \(error?.message ?? "")")
        }
    }

    @Test("through the gateway: a route on its own host at / gets the whole path (strip_prefix false) and the identity fields; the client's copies of any route's identity fields, in any spelling, reach no upstream")
    func servedByHost() async throws {
        let upstream = try await RecordingUpstream.start()
        let other = try await RecordingUpstream.start()
        let fixture = try await GatewayFixture {
            var app = Self.route("app.127.0.0.1.nip.test", "/", "http://127.0.0.1:\(upstream.port)/base")
            app.stripsPrefix = false
            app.identityFields = IdentityFieldNames(user: "X-WEBAUTH-USER", email: "X-WEBAUTH-EMAIL", groups: "X-WEBAUTH-GROUPS", tenant: "X-WEBAUTH-TENANT")
            var stripped = Self.route(nil, "/api/echo", "http://127.0.0.1:\(other.port)")
            stripped.stripsPrefix = true
            $0.routes = [app, stripped]
        }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let spoofed: [(String, String)] = [
            ("X-WEBAUTH-USER", "admin"), ("x_webauth_user", "admin"), ("X.Webauth.Email", "admin@evil.example"), ("X-Webauth-Groups", "admins"),
            ("X-WEBAUTH-TENANT", "other"), ("X-Kept", "yes"),
        ]
        let onHost = try await fixture.send(.GET, "/dashboards/x?q=1", bearer: login.accessToken, headers: [("Host", "APP.127.0.0.1.nip.test:8080")] + spoofed)
        #expect(onHost.status == 200, "\(onHost.raw)")
        #expect(onHost["path"] == "/base/dashboards/x", "strip_prefix false: the whole path below the upstream's base")
        #expect(onHost["query"] == "q=1")
        let received = onHost.receivedHeaders
        #expect(received["x-webauth-user"]?.count == 1 && received["x-webauth-user"]?.first?.hasPrefix("usr_") == true, "\(received)")
        #expect(received["x-webauth-tenant"] == ["default"])
        #expect(received["x-webauth-email"] == nil && received["x-webauth-groups"] == nil, "no claim, no field; the client's copies stripped")
        #expect(received["x_webauth_user"] == nil && received["x.webauth.email"] == nil)
        #expect(received["x-kept"] == ["yes"])
        #expect(received["x-portcullis-assertion"]?.count == 1)

        // The same client copies sent to a route that sets no identity field: stripped there too.
        let elsewhere = try await fixture.send(.GET, "/api/echo/things", bearer: login.accessToken, headers: spoofed)
        #expect(elsewhere.status == 200, "\(elsewhere.raw)")
        #expect(elsewhere["path"] == "/things")
        for name in elsewhere.receivedHeaders.keys {
            #expect(!HeaderScreen.folded(name).hasPrefix("x-webauth-"), "\(name) reached the upstream")
        }

        // The route host is the route's from /: the gateway's API is not there, and /.portcullis is the gateway's.
        let apiOnRouteHost = try await fixture.send(.GET, "/healthz", headers: [("Host", "app.127.0.0.1.nip.test")])
        #expect(apiOnRouteHost.status == 401, "the route's (a token is required), not the gateway's health check: \(apiOnRouteHost.raw)")
        let apiOnPublicHost = try await fixture.send(.GET, "/healthz")
        #expect(apiOnPublicHost.status == 200)
        let reserved = try await fixture.send(.GET, "/.portcullis/nothing", headers: [("Host", "app.127.0.0.1.nip.test")])
        #expect(reserved.status == 404 && reserved.error == "not_found", "\(reserved.raw)")
        try await fixture.stop()
        try await upstream.stop()
        try await other.stop()
    }

    /// Every X-Forwarded-Host the recording upstream received.
    static func forwardedHosts(_ answer: Answer) -> [String] {
        guard case .array(let headers)? = answer.json["headers"] else { return [] }
        return headers.compactMap { header -> String? in
            guard case .array(let pair) = header, pair.count == 2, pair[0].stringValue?.lowercased() == "x-forwarded-host" else { return nil }
            return pair[1].stringValue
        }
    }

    @Test("preserve_host: true sends the upstream the client's Host (with its port) when the route was matched by it, or is on any host and it is the public host; another name a client chose, or no host name, gets the upstream's own and no X-Forwarded-Host; read from the configuration")
    func preserveHost() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await GatewayFixture {
            var kept = Self.route("wiki.127.0.0.1.nip.test", "/", "http://127.0.0.1:\(upstream.port)")
            kept.preservesHost = true
            var anyHost = Self.route(nil, "/kept", "http://127.0.0.1:\(upstream.port)")
            anyHost.preservesHost = true
            $0.routes = [kept, anyHost, Self.route(nil, "/own", "http://127.0.0.1:\(upstream.port)")]
        }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let kept = try await fixture.send(.GET, "/x", bearer: login.accessToken, headers: [("Host", "Wiki.127.0.0.1.nip.test:8443")])
        #expect(kept.status == 200 && kept["authority"] == "Wiki.127.0.0.1.nip.test:8443", "\(kept.raw)")
        let publicHost = try await fixture.send(.GET, "/kept/x", bearer: login.accessToken, headers: [("Host", "127.0.0.1:8080")])
        #expect(publicHost.status == 200 && publicHost["authority"] == "127.0.0.1:8080", "\(publicHost.raw)")
        let chosen = try await fixture.send(.GET, "/kept/x", bearer: login.accessToken, headers: [("Host", "attacker.example")])
        #expect(chosen.status == 200 && chosen["authority"] == "127.0.0.1:\(upstream.port)", "a name the client chose is not passed on: \(chosen.raw)")
        #expect(Self.forwardedHosts(chosen).isEmpty, "nor as X-Forwarded-Host: \(chosen.raw)")
        #expect(Self.forwardedHosts(kept) == ["Wiki.127.0.0.1.nip.test:8443"] && Self.forwardedHosts(publicHost) == ["127.0.0.1:8080"], "the host decided on is")
        let own = try await fixture.send(.GET, "/own/x", bearer: login.accessToken, headers: [("Host", "127.0.0.1:8080")])
        #expect(own.status == 200 && own["authority"] == "127.0.0.1:\(upstream.port)", "\(own.raw)")
        let odd = try await fixture.send(.GET, "/kept/x", bearer: login.accessToken, headers: [("Host", "user@127.0.0.1")])
        #expect(odd.status == 200 && odd["authority"] == "127.0.0.1:\(upstream.port)" && Self.forwardedHosts(odd).isEmpty, "\(odd.raw)")
        #expect(Self.forwardedHosts(own) == ["127.0.0.1:8080"], "without preserve_host, as before: \(own.raw)")
        let read = try await Self.configuration("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', preserve_host: true}\n    - {prefix: /b, upstream: 'http://127.0.0.1:3000'}\n")
        #expect(read.routes.map(\.preservesHost) == [true, false])
        #expect(try await Self.refusal("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', preserve_host: sometimes}\n")?.key == "gateway.routes[0].preserve_host")
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("through the gateway: on a route host a path no route serves is 404 not_found, the agent socket path included; the public host keeps the API")
    func routeHostWithoutCatchAll() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await GatewayFixture {
            $0.routes = [Self.route("app.127.0.0.1.nip.test", "/app", "http://127.0.0.1:\(upstream.port)")]
        }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let routed = try await fixture.send(.GET, "/app/x", bearer: login.accessToken, headers: [("Host", "app.127.0.0.1.nip.test")])
        #expect(routed.status == 200 && routed["path"] == "/x", "\(routed.raw)")
        for path in ["/api/auth/login", "/healthz", "/api/session", "/demo/", "/elsewhere"] {
            let answer = try await fixture.send(.GET, path, headers: [("Host", "app.127.0.0.1.nip.test")])
            #expect(answer.status == 404 && answer.error == "not_found", "\(path): \(answer.raw)")
        }
        let (port, token, sessionID) = (fixture.gatewayPort, login.accessToken, login.sessionID)
        let upgrade = try await onOwnThread {
            try RawUpgrade.send(
                port: port, target: "/api/runtime/agent", headers: [("Authorization", "Bearer \(token)"), ("X-Session-Id", sessionID)], host: "app.127.0.0.1.nip.test")
        }
        #expect(upgrade.status == 404, "\(upgrade.head)")
        let onPublic = try await fixture.send(.GET, "/healthz")
        #expect(onPublic.status == 200)
        // An absolute-form target's host is the request's, whatever Host says (RFC 9112 §3.2.2): the route's answer, not the gateway's 404.
        let absolute = try await onOwnThread { () throws -> String in
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            connection.send("GET http://app.127.0.0.1.nip.test/app/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            return String(decoding: connection.readUntil("\r\n\r\n"), as: UTF8.self)
        }
        #expect(absolute.hasPrefix("HTTP/1.1 401"), "\(absolute)")
        try await fixture.stop()
        try await upstream.stop()
    }
}
