import ConfigurationReading
import DataPlane
import Foundation
import Gateway
import JOSE
import MCPPolicy
import MCPResource
import NIOHTTP1
import Testing
import TrafficCop

/// MCP servers behind routes (issue 55, part B): each route marked `mcp: true` is a protected
/// resource of its own, whose tokens name its canonical URL as `aud` and are taken nowhere else.
@Suite("MCP routes: the resource server's half")
struct MCPRouteTests {
    /// The public URL the fixture's gateway names resources by (its issuer's default).
    static let publicURL = "http://127.0.0.1:8080"
    /// A JSON-RPC request every MCP route passes (the standard `ping`).
    static let ping = #"{"jsonrpc":"2.0","id":1,"method":"ping"}"#

    static func mcpRoute(_ prefix: String, upstream: Int, scopes: [String] = [], policy: MCPCallPolicy? = nil, base: String = "/mcp") throws -> ProxyRoute {
        var route = ProxyRoute(prefix: prefix, upstream: "http://127.0.0.1:\(upstream)" + base, policy: scopes.isEmpty ? nil : RoutePolicy(scopes: scopes))
        route.servesMCP = true
        route.mcpPolicy = policy
        route.mcp = try #require(MCPResource(publicURL: publicURL, host: nil, pathPrefix: prefix, scopes: scopes, ruleScopes: policy?.ruleScopes ?? []))
        return route
    }

    /// A token of the gateway's own keys for `audience`, as its authorization server issues one.
    static func token(
        _ fixture: GatewayFixture, audience: String, subject: String = "usr_mcpcaller0001", scope: String? = nil, clientID: String = "https://client.example/agent.json"
    ) throws -> String {
        let issuer = AccessTokenIssuer(keys: fixture.keys, issuer: publicURL, audience: audience, lifetime: 300)
        let token = try issuer.issue(subject: subject, tenantID: "default", clientID: clientID, scope: scope).token
        fixture.remember(token)
        return token
    }

    @Test("mcp: true reads into a resource named by the public URL and the prefix (or the route's host); its mistakes stop start naming gateway.routes[N].mcp")
    func configuration() async throws {
        let routes = try await RoutePolicyTests.routes(
            """
                - {prefix: /mcp/github, upstream: http://127.0.0.1:9100/mcp, mcp: true, require: {scopes: [github]}}
                - {host: tools.example.com, prefix: /, upstream: http://127.0.0.1:9101, mcp: true}
              public_url: https://auth.example.com
              cookie_domain: example.com

            """)
        let github = try #require(routes[0].mcp)
        #expect(github.identifier == "https://auth.example.com/mcp/github" && github.scopes == ["github"])
        #expect(github.metadataURL == "https://auth.example.com/.well-known/oauth-protected-resource/mcp/github")
        let tools = try #require(routes[1].mcp)
        #expect(tools.identifier == "https://tools.example.com" && tools.metadataURL == "https://tools.example.com/.well-known/oauth-protected-resource")
        #expect(tools.origin == "https://tools.example.com")
        let mistakes = [
            "    - {prefix: /mcp, upstream: http://127.0.0.1:1, mcp: true, auth: browser}\n",
            "    - {prefix: /mcp, upstream: http://127.0.0.1:1, mcp: true, auth: none}\n",
            "    - {prefix: /mcp, upstream: http://127.0.0.1:1, mcp: true, grpc: true}\n",
            "    - {prefix: /mcp, mcp: true}\n",
            "    - {host: '*.example.com', prefix: /mcp, upstream: http://127.0.0.1:1, mcp: true}\n  cookie_domain: example.com\n  public_url: https://auth.example.com\n",
            "    - {prefix: /mcp, upstream: http://127.0.0.1:1, mcp: maybe}\n",
        ]
        for yaml in mistakes {
            let error = await #expect(throws: ConfigurationError.self, "\(yaml)") { _ = try await RoutePolicyTests.routes(yaml) }
            #expect(error?.message.contains("gateway.routes[0].mcp") == true, "\(error?.message ?? "no error")")
        }
        // mcp.name and mcp.scope_descriptions: what the consent page says; a description of a scope the route does not use is refused.
        let named = try #require(try await RoutePolicyTests.routes(
            """
                - prefix: /mcp/gh
                  upstream: http://127.0.0.1:9100/mcp
                  require: {scopes: [github]}
                  mcp:
                    name: GitHub tools
                    scope_descriptions: {github: "Read your repositories and issues"}

            """)[0].mcp)
        #expect(named.name == "GitHub tools" && named.scopeDescriptions == ["github": "Read your repositories and issues"])
        for yaml in [
            "    - prefix: /mcp/gh\n      upstream: http://127.0.0.1:1\n      mcp: {scope_descriptions: {admin: x}}\n",
            "    - prefix: /mcp/gh\n      upstream: http://127.0.0.1:1\n      mcp: {name: \"\"}\n",
        ] {
            let error = await #expect(throws: ConfigurationError.self, "\(yaml)") { _ = try await RoutePolicyTests.routes(yaml) }
            #expect(error?.message.contains("gateway.routes[0].mcp") == true, "\(error?.message ?? "no error")")
        }
        // An MCP server's URL is never an audience the gateway takes elsewhere.
        let asAudience = await #expect(throws: ConfigurationError.self) {
            _ = try await RoutePolicyTests.routes("    - {prefix: /, upstream: http://127.0.0.1:1, mcp: true}\n  public_url: https://auth.example.com\n  audience: https://auth.example.com\n")
        }
        #expect(asAudience?.message.contains("gateway.routes[0].mcp") == true, "\(asAudience?.message ?? "")")
        let asIssuerAudience = await #expect(throws: ConfigurationError.self) {
            _ = try await RoutePolicyTests.routes(
                "    - {prefix: /mcp/x, upstream: http://127.0.0.1:1, mcp: true}\n  public_url: https://auth.example.com\n",
                trust: "trust:\n  issuers:\n    - issuer: https://idp.example.com\n      audiences: [https://auth.example.com/mcp/x]\n      tenant: acme\n")
        }
        #expect(asIssuerAudience?.message.contains("trust.issuers[0].audiences") == true, "\(asIssuerAudience?.message ?? "")")
    }

    @Test("an MCP route takes only tokens whose aud is its canonical URL: no token or another's is 401 naming resource_metadata and the scope; the gateway's API token, another MCP route's token and a token for it elsewhere are refused naming the mix-up; the client's token never reaches the server, the assertion names the client")
    func audienceBinding() async throws {
        let upstream = try await RecordingUpstream.start()
        let port = upstream.port
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [
                try! Self.mcpRoute("/mcp/a", upstream: port, scopes: ["tools"]),
                try! Self.mcpRoute("/mcp/b", upstream: port),
                ProxyRoute(prefix: "/api/plain", upstream: "http://127.0.0.1:\(port)"),
            ]
            // Forward-auth answers trusted proxies only: the test asks as one.
            configuration.trustedProxies = ["127.0.0.1"].compactMap(IPNetwork.init)
        }
        defer { Task { try? await fixture.stop() } }
        let resourceA = Self.publicURL + "/mcp/a"
        let metadataA = Self.publicURL + "/.well-known/oauth-protected-resource/mcp/a"

        let anonymous = try await fixture.send(.POST, "/mcp/a", body: Self.ping)
        #expect(anonymous.status == 401)
        let challenge = anonymous.headers.first(name: "www-authenticate") ?? ""
        #expect(challenge.hasPrefix("Bearer ") && challenge.contains("resource_metadata=\"\(metadataA)\"") && challenge.contains("scope=\"tools\""), "\(challenge)")
        #expect(!challenge.contains("invalid_token"))

        let good = try Self.token(fixture, audience: resourceA, scope: "tools")
        let served = try await fixture.send(.POST, "/mcp/a", bearer: good, headers: [("Mcp-Method", "tools/call"), ("Mcp-Name", "search")], body: #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search"}}"#)
        #expect(served.status == 200, "\(served.raw)")
        #expect(served.json["path"]?.stringValue == "/mcp" && served.receivedHeaders["authorization"] == nil)
        #expect(served.receivedHeaders["mcp-method"] == ["tools/call"] && served.receivedHeaders["mcp-name"] == ["search"])
        let assertion = try #require(served.receivedHeaders["x-portcullis-assertion"]?.first)
        let claims = try StrictJSONReader().parseObject(try JWSCompact.parse(assertion, maximumBytes: 16_384, reader: StrictJSONReader()).payload)
        #expect(claims["client_id"]?.stringValue == "https://client.example/agent.json" && claims["sub"]?.stringValue == "usr_mcpcaller0001")

        try await fixture.addUser("alice")
        let api = try await fixture.login("alice").accessToken
        let apiRefused = try await fixture.send(.POST, "/mcp/a", bearer: api, body: Self.ping)
        #expect(apiRefused.status == 401 && apiRefused.error == "token_invalid" && apiRefused["message"]?.contains("gateway's API token") == true, "\(apiRefused.raw)")
        let apiChallenge = apiRefused.headers.first(name: "www-authenticate") ?? ""
        #expect(apiChallenge.contains("error=\"invalid_token\"") && apiChallenge.contains("resource_metadata=\"\(metadataA)\""), "\(apiChallenge)")

        let forB = try Self.token(fixture, audience: Self.publicURL + "/mcp/b")
        #expect(try await fixture.send(.POST, "/mcp/b", bearer: forB, body: Self.ping).status == 200)
        // Now cached as B's: at A it is still B's token.
        let crossed = try await fixture.send(.POST, "/mcp/a", bearer: forB, body: Self.ping)
        #expect(crossed.status == 401 && crossed["message"]?.contains("/mcp/b") == true, "\(crossed.raw)")
        // A's token (cached) at a plain route, at the API and at B.
        let plain = try await fixture.send(.GET, "/api/plain/x", bearer: good)
        #expect(plain.status == 401 && plain["message"]?.contains("MCP server") == true, "\(plain.raw)")
        #expect(try await fixture.send(.GET, "/api/session/ses_AAAAAAAAAAAAAAAAAAAAAA", bearer: good).status == 401)
        #expect(try await fixture.send(.POST, "/mcp/b", bearer: good, body: Self.ping).status == 401)
        // Uncached, an MCP token is refused at a plain route by its audience.
        let fresh = try Self.token(fixture, audience: resourceA, scope: "tools")
        #expect(try await fixture.send(.GET, "/api/plain/x", bearer: fresh).status == 401)
        // The API token still works where it belongs.
        #expect(try await fixture.send(.GET, "/api/plain/x", bearer: api).status == 200)
        // Forward-auth never decides an MCP route (the data plane checks its audience, Origin and challenge).
        let forwarded = try await fixture.send(.GET, "/api/auth/verify", bearer: api, headers: [("X-Original-URI", "/mcp/a"), ("X-Original-Method", "POST")])
        #expect(forwarded.status == 404 && forwarded["message"]?.contains("MCP server the gateway serves itself") == true, "\(forwarded.raw)")
        // The same proxy asking about the plain route is answered: the refusal is the MCP route's alone.
        let plainForwarded = try await fixture.send(.GET, "/api/auth/verify", bearer: api, headers: [("X-Original-URI", "/api/plain/x"), ("X-Original-Method", "GET")])
        #expect(plainForwarded.status == 200, "\(plainForwarded.raw)")
    }

    @Test("an MCP route's scopes are refused 403 insufficient_scope with scope= and resource_metadata, so a client can step up")
    func insufficientScope() async throws {
        let upstream = try await RecordingUpstream.start()
        let port = upstream.port
        let fixture = try await GatewayFixture { configuration in configuration.routes = [try! Self.mcpRoute("/mcp/a", upstream: port, scopes: ["tools"])] }
        defer { Task { try? await fixture.stop() } }
        let token = try Self.token(fixture, audience: Self.publicURL + "/mcp/a", scope: "other")
        let refused = try await fixture.send(.POST, "/mcp/a", bearer: token, body: Self.ping)
        #expect(refused.status == 403 && refused.error == "insufficient_scope", "\(refused.raw)")
        let challenge = refused.headers.first(name: "www-authenticate") ?? ""
        #expect(challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"tools\"") && challenge.contains("resource_metadata=\"http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp/a\""), "\(challenge)")
    }

    @Test("a request whose Origin is neither the resource's own nor an allowed origin is 403 origin_refused before its token is read (DNS rebinding); its own origin and an allowed one pass")
    func originRule() async throws {
        let upstream = try await RecordingUpstream.start()
        let port = upstream.port
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [try! Self.mcpRoute("/mcp/a", upstream: port)]
            configuration.allowedOrigins = ["https://inspector.example"]
        }
        defer { Task { try? await fixture.stop() } }
        let token = try Self.token(fixture, audience: Self.publicURL + "/mcp/a")
        for origin in ["http://evil.example", "http://127.0.0.1:8080.evil.example", "null"] {
            let refused = try await fixture.send(.POST, "/mcp/a", bearer: token, headers: [("Origin", origin)], body: Self.ping)
            #expect(refused.status == 403 && refused.error == "origin_refused", "\(origin): \(refused.raw)")
        }
        for origin in ["http://127.0.0.1:8080", "HTTP://127.0.0.1:8080", "https://inspector.example"] {
            #expect(try await fixture.send(.POST, "/mcp/a", bearer: token, headers: [("Origin", origin)], body: Self.ping).status == 200, "\(origin)")
        }
    }

    @Test("protected resource metadata (RFC 9728) is served at the well-known path plus the route's path: resource, authorization_servers, scopes, header only; a path below the server or of no MCP route is 404")
    func protectedResourceMetadata() async throws {
        let upstream = try await RecordingUpstream.start()
        let port = upstream.port
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [try! Self.mcpRoute("/mcp/a", upstream: port, scopes: ["tools", "read"]), ProxyRoute(prefix: "/api/plain", upstream: "http://127.0.0.1:\(port)")]
        }
        defer { Task { try? await fixture.stop() } }
        let document = try await fixture.send(.GET, "/.well-known/oauth-protected-resource/mcp/a")
        #expect(document.status == 200, "\(document.raw)")
        #expect(document["resource"] == Self.publicURL + "/mcp/a")
        #expect(document.json["authorization_servers"] == [.string(Self.publicURL)])
        #expect(document.json["scopes_supported"] == ["tools", "read"] && document.json["bearer_methods_supported"] == ["header"])
        #expect(document["resource_name"] != nil && document.headers.first(name: "access-control-allow-origin") == "*")
        for path in ["/.well-known/oauth-protected-resource/mcp/a/x", "/.well-known/oauth-protected-resource/api/plain", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
            let missing = try await fixture.send(.GET, path)
            #expect(missing.status == 404 && missing.error == "not_found", "\(path): \(missing.raw)")
        }
    }
}
