import ConfigurationReading
import ConnectedAccounts
import DataPlane
import ExtAuthz
import Foundation
import Gateway
import HTTPTypes
import JOSE
import MCPPolicy
import NIOHTTP1
import PortcullisTestSupport
import ProviderLogin
import Testing
import TrafficCop

/// Envoy's HTTP ext_authz (issue 67): a check request is the original request's head (its path
/// after `path_prefix`), and the answer is the decision forward-auth gives the same request, in
/// Envoy's terms: 200 exactly with the fields for the upstream, or the refusal the client gets.
@Suite("ext_authz over HTTP: Envoy's check decided as forward-auth decides")
struct ExtAuthzHTTPTests {
    /// ForwardAuthTests' routes: a scoped one, an `auth: none` one, a plain one.
    static let routes = [
        ProxyRoute(prefix: "/api/billing", upstream: ForwardAuthTests.upstream, methods: [.get, .head, .post], policy: RoutePolicy(scopes: ["billing:read"])),
        ProxyRoute(prefix: "/public", upstream: "http://status.internal:8080", requiresToken: false),
        ProxyRoute(prefix: "/api/plain", upstream: "http://plain.internal:8080"),
    ]

    /// A gateway trusting `provider` with `routes` and `extra`, ext_authz on as `listeners` sets it
    /// (HTTP mode under `pathPrefix` by default), answering `callers`.
    static func gateway(
        _ provider: FakeProvider, callers: [String] = ["127.0.0.1"], pathPrefix: String = "/ext-authz", routes extra: [ProxyRoute] = [],
        listeners: (inout ExtAuthzConfiguration) -> Void = { $0.httpPort = 0 }
    ) async throws -> GatewayFixture {
        try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            configuration.routes = routes + extra
            configuration.trustedProxies = [IPNetwork("127.0.0.1")].compactMap { $0 }
            var extAuthz = ExtAuthzConfiguration()
            listeners(&extAuthz)
            extAuthz.pathPrefix = pathPrefix
            extAuthz.callers = callers.compactMap(IPNetwork.init)
            configuration.extAuthz = extAuthz
        })
    }

    /// An Envoy's check request for `method` `path` (with `prefix` before it), the client's `headers` copied.
    static func check(
        _ fixture: GatewayFixture, _ method: HTTPMethod = .GET, _ path: String, prefix: String = "/ext-authz", bearer: String? = nil, headers: [(String, String)] = []
    ) async throws -> Answer {
        let port = try #require(fixture.extAuthzHTTPPort)
        return try await Answer.request(method, "http://127.0.0.1:\(port)\(prefix)\(path)", bearer: bearer, headers: headers, followRedirects: false)
    }

    /// The identity fields an answer carries, by lower-cased name, an absent one as empty (ext_authz
    /// removes an empty field upstream where forward-auth answers it empty); the assertion only as
    /// present or not: its signature differs each time.
    static func identity(_ answer: Answer) -> [String: String] {
        var fields: [String: String] = [:]
        for name in ["x-auth-request-user", "x-auth-request-tenant", "x-auth-request-email", "x-auth-request-groups", "x-auth-request-preferred-username"] {
            fields[name] = answer.headers[name].first ?? ""
        }
        fields["assertion"] = answer.headers["x-portcullis-assertion"].first.map { $0.isEmpty ? "empty" : "signed" }
        return fields
    }

    @Test("every forward-auth decision has an ext_authz twin that agrees with it: an allowed caller (200 exactly, the same identity, an assertion for the route's upstream), a wrong scope 403 with its challenge, no token 401, .. above the root, a token in the URI (any case), a path not in its one spelling 400, an unknown path 404, a method off the route 405 with Allow, auth: none 200 with every field empty")
    func twinsOfForwardAuth() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let fixture = try await Self.gateway(provider)
        let allowed = try provider.token(claims: ["scope": "billing:read", "email": "ann@example.com", "email_verified": true, "groups": ["finance", "ops"]])
        let narrow = try provider.token(claims: ["scope": "openid"])
        fixture.remember(allowed)
        fixture.remember(narrow)
        let cases: [(name: String, method: HTTPMethod, uri: String, token: String?)] = [
            ("allowed", .POST, "/api/billing/invoices?page=2", allowed),
            ("allowed, HEAD", .HEAD, "/api/billing/x", allowed),
            ("wrong scope", .GET, "/api/billing/x", narrow),
            ("no token", .GET, "/api/billing/x", nil),
            ("climbs above /", .GET, "/api/billing/../../../etc/passwd", allowed),
            ("token in the URI", .GET, "/api/billing/x?access_token=abc", nil),
            ("token in the URI, other case", .GET, "/api/billing/x?%61ccess_TOKEN=abc", allowed),
            ("unknown path", .GET, "/api/other", allowed),
            (".. into another prefix", .GET, "/public/../api/billing/x", nil),
            ("encoded slash spelled otherwise", .GET, "/api/billing//x", allowed),
            ("method off the route", .DELETE, "/api/billing/x", allowed),
            ("auth: none", .GET, "/public/status", nil),
            ("a token without email or groups", .GET, "/api/plain/x", try provider.token(claims: [:])),
        ]
        for (name, method, uri, token) in cases {
            let forwarded = try await fixture.send(
                .GET, "/api/auth/verify", bearer: token, headers: [("X-Original-URI", uri), ("X-Original-Method", method.rawValue)])
            let checked = try await Self.check(fixture, method, uri, bearer: token)
            #expect(checked.status == forwarded.status, "\(name): ext_authz \(checked.status) \(checked.raw), forward-auth \(forwarded.status) \(forwarded.raw)")
            if method != .HEAD { #expect(checked.error == forwarded.error, "\(name): \(checked.raw) and \(forwarded.raw)") }
            #expect(Self.identity(checked) == Self.identity(forwarded), "\(name): \(Self.identity(checked)) and \(Self.identity(forwarded))")
            #expect(checked.headers["WWW-Authenticate"] == forwarded.headers["WWW-Authenticate"], "\(name)")
            #expect(checked.headers["Allow"] == forwarded.headers["Allow"], "\(name)")
            #expect(checked.headers["Cache-Control"].first == "no-store", "\(name)")
            checked.headers["x-portcullis-assertion"].first.map(fixture.remember)
            forwarded.headers["X-Portcullis-Assertion"].first.map(fixture.remember)
        }
        let ok = try await Self.check(fixture, .POST, "/api/billing/invoices", bearer: allowed)
        #expect(ok.status == 200 && ok.raw.isEmpty, "allowed is 200 exactly, with no body: \(ok.status) \(ok.raw)")
        let assertion = try #require(ok.headers["x-portcullis-assertion"].first)
        fixture.remember(assertion)
        let claims = try StrictJSONReader().parseObject(try JWSCompact.parse(assertion).payload)
        #expect(claims["aud"] == .string(ForwardAuthTests.upstream) && claims["idp_sub"] == "user-1")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("what the client may have forged never reaches the upstream: every identity field it sent in another spelling (case, _ or .) and every one the gateway sets, spelled with _ or ., are in x-envoy-auth-headers-to-remove; the gateway's own fields are set with the true values; Authorization (the gateway's token) and a Cookie of only the gateway's cookies are removed")
    func forgedFieldsRemoved() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        var radicale = ProxyRoute(prefix: "/dav", upstream: "http://dav.internal:5232")
        radicale.identityFields = IdentityFieldNames(user: "X-Remote-User")
        let fixture = try await Self.gateway(provider, routes: [radicale])
        let token = try provider.token(claims: ["scope": "billing:read"])
        fixture.remember(token)
        let forged: [(String, String)] = [
            ("X-Auth-Request-User", "admin"), ("x_auth_request_user", "admin"), ("X-Remote_User", "root"), ("X-Forwarded-User", "root"),
            ("x-portcullis-assertion", "forged"), ("X-Pomerium-Jwt-Assertion", "forged"), ("X-User-Id", "usr_someone_else"),
            ("Cookie", "portcullis=not-one-of-ours"), ("X-Innocent", "kept"),
        ]
        let answer = try await Self.check(fixture, .GET, "/dav/calendars/", bearer: token, headers: forged)
        #expect(answer.status == 200, "\(answer.raw)")
        let removed = Set((answer.headers["x-envoy-auth-headers-to-remove"].first ?? "").split(separator: ",").map(String.init))
        for name in ["x_auth_request_user", "x-remote_user", "x-forwarded-user", "x-pomerium-jwt-assertion", "x-user-id", "authorization", "cookie"] {
            #expect(removed.contains(name), "\(name) is removed: \(removed.sorted())")
        }
        for name in ["x_remote_user", "x.remote.user", "x_portcullis_assertion", "x_auth_request_tenant"] {
            #expect(removed.contains(name), "the gateway's own field spelled \(name) is removed, sent or not: \(removed.sorted())")
        }
        // What the gateway sets is set, never removed (Envoy may remove after it sets), and holds the truth.
        for name in ["x-auth-request-user", "x-remote-user", "x-portcullis-assertion"] {
            #expect(!removed.contains(name), "\(name) is set, not removed")
        }
        let user = try #require(answer.headers["x-auth-request-user"].first)
        #expect(user.hasPrefix("ext_") && answer.headers["x-remote-user"].first == user, "\(answer.headers)")
        #expect(answer.headers["x-portcullis-assertion"].first != "forged")
        #expect(!removed.contains("x-innocent"))
        // A field without a value is removed, not set empty (Envoy drops a field set to nothing, which would leave the client's).
        #expect(answer.headers["x-auth-request-email"].isEmpty && removed.contains("x-auth-request-email"), "\(removed.sorted())")
        // Removed whether or not Envoy passed the client's copy: every identity field the gateway knows, in each spelling.
        for name in ["x-forwarded-user", "x_forwarded_user", "x-real-ip", "forwarded", "x_forwarded_for", "x_request_id", "proxy-authorization"] {
            #expect(removed.contains(name), "\(name) is always removed: \(removed.sorted())")
        }
        for name in ["x-forwarded-for", "x-request-id", "x-forwarded-proto"] {
            #expect(!removed.contains(name), "\(name) is Envoy's own to set")
        }
        answer.headers["x-portcullis-assertion"].first.map(fixture.remember)
        // The app's cookies stay, without the gateway's: set as Cookie itself.
        let mixed = try await Self.check(fixture, .GET, "/dav/x", bearer: token, headers: [("Cookie", "portcullis=abc; lang=en")])
        #expect(mixed.headers["cookie"].first == "lang=en", "\(mixed.headers)")
        mixed.headers["x-portcullis-assertion"].first.map(fixture.remember)
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("only ext_authz.callers may ask: a connection from any other address is closed before a byte is read, and logged; path_prefix is taken off exactly (a check outside it, or with Envoy's prefix missing, is 404); checks pipelined on one connection are answered in order, each framed for its own (a HEAD without a body)")
    func callersPrefixAndPipelining() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let token = try provider.token(claims: ["scope": "billing:read"])
        let strangers = try await Self.gateway(provider, callers: ["10.9.9.9"])
        await #expect(throws: (any Error).self, "a stranger's connection is closed") { _ = try await Self.check(strangers, .GET, "/api/billing/x", bearer: token) }
        #expect(strangers.log.text.contains("ext_authz refused a connection"), "the refusal is logged for the operator")
        try await strangers.stop()

        let fixture = try await Self.gateway(provider)
        fixture.remember(token)
        #expect(try await Self.check(fixture, .GET, "/api/billing/x", bearer: token).status == 200)
        for outside in ["/api/billing/x", "/ext-authzapi/billing/x", "/ext-authz", "/EXT-AUTHZ/api/billing/x"] {
            let answer = try await Self.check(fixture, .GET, outside, prefix: "", bearer: token)
            #expect(answer.status == 404 && answer.error == "not_found", "\(outside): \(answer.raw)")
        }
        let port = try #require(fixture.extAuthzHTTPPort)
        func request(_ method: String, _ path: String, bearer: String?) -> String {
            "\(method) /ext-authz\(path) HTTP/1.1\r\nHost: app.example.test\r\n" + (bearer.map { "Authorization: Bearer \($0)\r\n" } ?? "") + "Content-Length: 0\r\n\r\n"
        }
        let answers = try await ForwardAuthTests.rawAnswers(
            port: port,
            [request("GET", "/api/billing/a", bearer: token), request("HEAD", "/api/billing/b", bearer: nil), request("GET", "/nowhere", bearer: token), request("HEAD", "/api/billing/c", bearer: token)],
            methods: ["GET", "HEAD", "GET", "HEAD"])
        #expect(answers.map(\.status) == [200, 401, 404, 200], "\(answers.map(\.status))")
        #expect(answers.count == 4 && answers[1].body.isEmpty && answers[3].body.isEmpty)
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("an MCP route is decided, not refused as forward-auth refuses it: no token is 401 whose challenge names resource_metadata, a token for another audience 401, the route's own token 200 with an assertion naming its client, another origin 403 origin_refused; any request to a route with rules per tool is 403 mcp_rules_need_gateway (decided on bodies and lists a check never sees)")
    func mcpRoutes() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let open = try MCPRouteTests.mcpRoute("/mcp/a", upstream: 9)
        let ruled = try MCPRouteTests.mcpRoute("/mcp/ruled", upstream: 9, policy: MCPCallPolicy(tools: [MCPRule(pattern: try #require(NamePattern("search_*")))]))
        let fixture = try await Self.gateway(provider, routes: [open, ruled])
        let own = try MCPRouteTests.token(fixture, audience: MCPRouteTests.publicURL + "/mcp/a", scope: "tools")
        let other = try MCPRouteTests.token(fixture, audience: MCPRouteTests.publicURL + "/mcp/ruled")
        let none = try await Self.check(fixture, .POST, "/mcp/a")
        #expect(none.status == 401, "\(none.raw)")
        let challenge = none.headers["WWW-Authenticate"].first ?? ""
        #expect(challenge.contains("resource_metadata=\"\(MCPRouteTests.publicURL)/.well-known/oauth-protected-resource/mcp/a\""), "\(challenge)")
        let forwardAuth = try await fixture.send(.GET, "/api/auth/verify", bearer: own, headers: [("X-Original-URI", "/mcp/a"), ("X-Original-Method", "POST")])
        #expect(forwardAuth.status == 404, "forward-auth still leaves MCP routes to the gateway: \(forwardAuth.raw)")
        #expect(try await Self.check(fixture, .POST, "/mcp/a", bearer: other).status == 401)
        let allowed = try await Self.check(fixture, .POST, "/mcp/a", bearer: own)
        #expect(allowed.status == 200, "\(allowed.raw)")
        let assertion = try #require(allowed.headers["x-portcullis-assertion"].first)
        fixture.remember(assertion)
        let claims = try StrictJSONReader().parseObject(try JWSCompact.parse(assertion).payload)
        #expect(claims["client_id"] == "https://client.example/agent.json", "\(claims)")
        let elsewhere = try await Self.check(fixture, .POST, "/mcp/a", bearer: own, headers: [("Origin", "https://evil.example")])
        #expect(elsewhere.status == 403 && elsewhere.error == "origin_refused", "\(elsewhere.raw)")
        let ruledCall = try await Self.check(fixture, .POST, "/mcp/ruled", bearer: other)
        #expect(ruledCall.status == 403 && ruledCall.error == "mcp_rules_need_gateway", "\(ruledCall.raw)")
        // Its GET stream may carry the lists the rules filter: refused too.
        let ruledStream = try await Self.check(fixture, .GET, "/mcp/ruled", bearer: other)
        #expect(ruledStream.status == 403 && ruledStream.error == "mcp_rules_need_gateway", "\(ruledStream.raw)")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("a browser's session cookie is decided as forward-auth decides it: 200 with the route's identity fields; without a session a navigation is 302 to sign in (Location, the page to return to), a fetch 401; a cross-site POST with the cookie 403; the gateway's own token refused token_revoked by the next check after logout")
    func browserCookieAndRevocation() async throws {
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [BrowserSessionTests.browserRoute("/app", "http://127.0.0.1:9"), ProxyRoute(prefix: "/api/plain", upstream: "http://plain.internal:8080")]
            var extAuthz = ExtAuthzConfiguration()
            extAuthz.httpPort = 0
            configuration.extAuthz = extAuthz
        }
        try await fixture.addUser("alice")
        let signedIn = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/sign_in", headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded")],
            body: "username=alice&password=correct+horse+battery&rd=%2Fapp%2F", followRedirects: false)
        var jar = CookieJar()
        jar.take(signedIn)
        let value = try #require(jar["portcullis"])
        fixture.remember(value)
        let ok = try await Self.check(fixture, .GET, "/app/page", headers: [("Host", "app.example.test"), ("Cookie", jar.header.1 + "; lang=en")])
        #expect(ok.status == 200 && ok.headers["x-remote-user"].first?.hasPrefix("usr_") == true, "\(ok.raw)")
        #expect(ok.headers["cookie"].first == "lang=en", "the app's cookies without the gateway's: \(ok.headers)")
        ok.headers["x-portcullis-assertion"].first.map(fixture.remember)
        let navigation = try await Self.check(fixture, .GET, "/app/page?x=1", headers: [("Host", "127.0.0.1:8080")] + BrowserSessionTests.navigation)
        let expected = "http://127.0.0.1:8080/.portcullis/sign_in?rd=" + FormEncoding.encode("http://127.0.0.1:8080/app/page?x=1")
        #expect(navigation.status == 302 && navigation.headers["Location"].first == expected, "\(navigation.status) \(navigation.headers)")
        let fetch = try await Self.check(fixture, .GET, "/app/data", headers: [("Host", "app.example.test"), ("Accept", "application/json")])
        #expect(fetch.status == 401 && fetch.error == "token_missing" && fetch.headers["Location"].isEmpty, "\(fetch.raw)")
        let crossSite = try await Self.check(fixture, .POST, "/app/form", headers: [("Host", "app.example.test"), ("Origin", "https://evil.example"), jar.header])
        #expect(crossSite.status == 403 && crossSite.error == "csrf_refused", "\(crossSite.raw)")

        let login = try await fixture.login("alice")
        #expect(try await Self.check(fixture, .GET, "/api/plain/x", bearer: login.accessToken).status == 200)
        #expect(try await fixture.post("/api/auth/logout", bearer: login.accessToken, ["session_id": .string(login.sessionID)]).status == 204)
        let after = try await Self.check(fixture, .GET, "/api/plain/x", bearer: login.accessToken)
        #expect(after.status == 401 && after.error == "token_revoked", "\(after.raw)")
        try await fixture.stop()
    }

    @Test("a refusal is never a 200 in HTTP mode (Envoy allows on a 200): a gRPC request without a token is 401 with the JSON body; WebDAV methods that name other resources (PROPFIND, COPY, MOVE, LOCK) are 403 webdav_needs_gateway, another WebDAV method is decided")
    func refusalsEnvoyReadsAsRefusals() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        var dav = ProxyRoute(prefix: "/dav", upstream: "http://dav.internal:5232")
        dav.methods = [.get, .head, HTTPRequest.Method("PROPFIND")!, HTTPRequest.Method("MKCOL")!, HTTPRequest.Method("COPY")!]
        let fixture = try await Self.gateway(provider, routes: [dav])
        let token = try provider.token(claims: [:])
        fixture.remember(token)
        let grpc = try await Self.check(fixture, .POST, "/api/plain/pkg.Service/Method", headers: [("Content-Type", "application/grpc")])
        #expect(grpc.status == 401 && grpc.error == "token_missing" && grpc.headers["grpc-status"].isEmpty, "\(grpc.status) \(grpc.raw)")
        for method in ["PROPFIND", "COPY"] {
            let answer = try await Self.check(fixture, HTTPMethod(rawValue: method), "/dav/ann/", bearer: token)
            #expect(answer.status == 403 && answer.error == "webdav_needs_gateway", "\(method): \(answer.raw)")
        }
        let made = try await Self.check(fixture, HTTPMethod(rawValue: "MKCOL"), "/dav/ann/new/", bearer: token)
        #expect(made.status == 200, "\(made.raw)")
        made.headers["x-portcullis-assertion"].first.map(fixture.remember)
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("a route that sends the person's own credential upstream (upstream_credential) is 403 upstream_credential_needs_gateway over ext_authz, even for a caller the route admits: only the gateway's proxy sends that token")
    func upstreamCredentialRoutesNeedTheGateway() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [ConnectedAccountsTests.actingRoute(service), ProxyRoute(prefix: "/api/plain", upstream: "http://plain.internal:8080")]
            configuration.connections = ConnectionsConfiguration(connections: [ConnectedAccountsTests.connection(service, secretFile: secret)])
            var extAuthz = ExtAuthzConfiguration()
            extAuthz.httpPort = 0
            configuration.extAuthz = extAuthz
        }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let acting = try await Self.check(fixture, .GET, "/gh/user", bearer: login.accessToken)
        #expect(acting.status == 403 && acting.error == "upstream_credential_needs_gateway", "\(acting.raw)")
        #expect(acting.headers["x-portcullis-assertion"].isEmpty)
        // The same caller on a route without one is admitted: the refusal is the route's.
        let plain = try await Self.check(fixture, .GET, "/api/plain/x", bearer: login.accessToken)
        #expect(plain.status == 200, "\(plain.raw)")
        plain.headers["x-portcullis-assertion"].first.map(fixture.remember)
        try await fixture.stop()
        try await service.stop()
    }

    @Test("ext_authz reads itself: off without a port; callers are 127.0.0.1 and ::1 unless listed (not all of 127.0.0.0/8, where an Istio sidecar's traffic comes from); path_prefix is /ext-authz unless set, never empty; a bad caller, path_prefix or host is refused naming its key")
    func configurationRead() async throws {
        func read(_ yaml: String) async throws -> ExtAuthzConfiguration? {
            let path = NSTemporaryDirectory() + "ext-authz-\(UUID().uuidString).yaml"
            try yaml.write(toFile: path, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: path) }
            return try ExtAuthzConfiguration(reading: try await ConfigurationValues.load(path: path, environment: false))
        }
        #expect(try await read("ext_authz:\n  callers: [10.0.0.0/8]\n") == nil)
        let loopback = try #require(try await read("ext_authz:\n  http_port: 9192\n"))
        #expect(loopback.admits("127.0.0.1") && loopback.admits("::1") && !loopback.admits("10.0.0.5") && !loopback.admits("127.0.0.6"))
        #expect(loopback.pathPrefix == "/ext-authz")
        let listed = try #require(try await read("ext_authz:\n  http_port: 9192\n  path_prefix: /check\n  callers: [10.0.0.0/8]\n"))
        #expect(listed.admits("10.1.2.3") && !listed.admits("127.0.0.1") && listed.pathPrefix == "/check")
        for (yaml, key) in [
            ("ext_authz:\n  http_port: 9192\n  callers: [envoy.local]\n", "ext_authz.callers"),
            ("ext_authz:\n  http_port: 9192\n  path_prefix: check/\n", "ext_authz.path_prefix"),
            ("ext_authz:\n  http_port: 9192\n  path_prefix: /check/\n", "ext_authz.path_prefix"),
            ("ext_authz:\n  http_port: 9192\n  path_prefix: /\n", "ext_authz.path_prefix"),
            ("ext_authz:\n  grpc_port: 9191\n  host: envoy.local\n", "ext_authz.host"),
        ] {
            await #expect(throws: ConfigurationError.self, "\(yaml)") { _ = try await read(yaml) }
            do {
                _ = try await read(yaml)
            } catch let error as ConfigurationError {
                #expect(error.key == key, "\(error)")
            }
        }
    }
}
