import DataPlane
import Foundation
import Gateway
import JOSE
import NIOHTTP1
import Testing
import TrafficCop

/// Forward-auth (issue 38): `/api/auth/verify` answers, for a request a proxy in front
/// describes, what the route itself would answer, and the identity to pass on.
@Suite("Forward-auth: /api/auth/verify decides for a proxy in front")
struct ForwardAuthTests {
    @Test("an allowed caller gets 200 with the assertion (aud = the route's upstream) and oauth2-proxy's X-Auth-Request-* headers; a wrong scope is 403, no token 401, a .. above the root or a token in the URI 400, an unknown path 404, a method off the route 405; nginx's and Caddy's header names both work; every answer is no-store")
    func decisions() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let upstream = "http://billing.internal:8443"
        let fixture = try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            configuration.routes = [
                ProxyRoute(prefix: "/api/billing", upstream: upstream, methods: [.get, .head, .post], policy: RoutePolicy(scopes: ["billing:read"])),
                ProxyRoute(prefix: "/public", upstream: "http://status.internal:8080", requiresToken: false),
            ]
        })
        let allowed = try provider.token(claims: ["scope": "billing:read", "email": "ann@example.com", "groups": ["finance", "ops"]])
        func verify(_ headers: [(String, String)], bearer: String? = nil, method: HTTPMethod = .GET) async throws -> Answer {
            try await fixture.send(method, "/api/auth/verify", bearer: bearer, headers: headers)
        }
        let ok = try await verify([("X-Original-URI", "/api/billing/invoices?page=2"), ("X-Original-Method", "POST")], bearer: allowed)
        #expect(ok.status == 200, "\(ok.raw)")
        #expect(ok.headers["Cache-Control"].first == "no-store")
        #expect(ok.headers["X-Auth-Request-Tenant"].first == "acme" && ok.headers["X-Auth-Request-User"].first?.hasPrefix("ext_") == true)
        #expect(ok.headers["X-Auth-Request-Email"].first == "ann@example.com" && ok.headers["X-Auth-Request-Groups"].first == "finance,ops")
        let assertion = try #require(ok.headers["X-Portcullis-Assertion"].first)
        fixture.remember(assertion)
        let claims = try StrictJSONReader().parseObject(try JWSCompact.parse(assertion).payload)
        #expect(claims["aud"] == .string(upstream) && claims["idp_sub"] == "user-1")
        // Caddy's and Traefik's names, and any method of the subrequest itself.
        let caddy = try await verify([("X-Forwarded-Uri", "/api/billing/x"), ("X-Forwarded-Method", "GET"), ("X-Forwarded-Host", "app.example.com")], bearer: allowed, method: .POST)
        #expect(caddy.status == 200, "\(caddy.raw)")
        let refusals: [(String, [(String, String)], String?, Int, String?)] = [
            ("wrong scope", [("X-Original-URI", "/api/billing/x")], try provider.token(claims: ["scope": "openid"]), 403, "insufficient_scope"),
            ("no token", [("X-Original-URI", "/api/billing/x")], nil, 401, "token_missing"),
            ("climbs above /", [("X-Original-URI", "/api/billing/../../../etc/passwd")], allowed, 400, "invalid_request"),
            ("token in the URI", [("X-Original-URI", "/api/billing/x?access_token=\(allowed)")], nil, 400, "token_in_url"),
            ("token in the URI, other case", [("X-Original-URI", "/api/billing/x?%61ccess_TOKEN=abc")], allowed, 400, "token_in_url"),
            ("unknown path", [("X-Original-URI", "/api/other")], allowed, 404, "not_found"),
            (".. into another prefix", [("X-Original-URI", "/public/../api/billing/x")], nil, 401, "token_missing"),
            ("method off the route", [("X-Original-URI", "/api/billing/x"), ("X-Original-Method", "DELETE")], allowed, 405, "method_not_allowed"),
            ("no original URI", [], allowed, 400, "invalid_request"),
        ]
        for (name, headers, token, status, error) in refusals {
            let answer = try await verify(headers, bearer: token)
            #expect(answer.status == status && answer.error == error, "\(name): \(answer.status) \(answer.raw)")
            #expect(answer.headers["X-Portcullis-Assertion"].isEmpty && answer.headers["Cache-Control"].first == "no-store", "\(name)")
        }
        let scope = try await verify([("X-Original-URI", "/api/billing/x")], bearer: try provider.token(claims: ["scope": "openid"]))
        #expect(scope.headers["WWW-Authenticate"].first?.contains("scope=\"billing:read\"") == true)
        let method = try await verify([("X-Original-URI", "/api/billing/x"), ("X-Original-Method", "DELETE")], bearer: allowed)
        #expect(method.headers["Allow"].first == "GET, HEAD, POST")
        // auth: none: 200 without a token, with an assertion naming no user.
        let open = try await verify([("X-Original-URI", "/public/status")])
        #expect(open.status == 200 && open.headers["X-Auth-Request-User"].isEmpty)
        try await fixture.stop()
        try await provider.stop()
    }
}
