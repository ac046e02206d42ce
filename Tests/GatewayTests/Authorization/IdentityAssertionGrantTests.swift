import AuthorizationServer
import Foundation
import Gateway
import JOSE
import PortcullisTestSupport
import ProviderLogin
import SecurityGuard
import Testing
import TrustedIssuers

/// Enterprise-managed authorization: the company's provider issues an Identity Assertion JWT
/// Authorization Grant (ID-JAG) naming the client, the person and the MCP server, and the
/// gateway's authorization server exchanges it for an access token with no consent page. Every
/// check the extension and the conformance suite name, through the real gateway.
@Suite("Identity assertion grants (ID-JAG): the company's provider decides, the gateway checks")
struct IdentityAssertionGrantTests {
    static let secret = "s3cret-of-the-ops-cli-client"
    static let gatewayIssuer = MCPRouteTests.publicURL

    /// The authorization server's gateway, with `ops-cli` confidential and `provider` trusted with
    /// `enterprise_authorization` (and `other` trusted without it).
    static func gateway(_ provider: FakeProvider, other: FakeProvider, _ body: (GatewayFixture) async throws -> Void) async throws {
        try await AuthorizationServerTests.gateway(configure: { configuration in
            configuration.authorizationServer.clients[0] = RegisteredClient(
                clientID: "ops-cli", name: "Ops CLI", redirectURIs: ["http://127.0.0.1/callback"], source: .configured, secret: try! ClientSecret(Array(secret.utf8)))
            var enterprise = provider.trust()
            enterprise.enterpriseAuthorization = true
            enterprise.emailsVerified = true
            configuration.trust = TrustConfiguration(issuers: [enterprise, other.trust()])
        }) { fixture, _ in
            fixture.remember(secret)
            try await body(fixture)
        }
    }

    /// An ID-JAG `provider` would issue to `ops-cli` for alice at `/mcp/a`, changed by `claims` and `header`.
    static func assertion(_ provider: FakeProvider, claims: JSONObject = [:], header: JSONObject = [:], lifetime: Double = 300) throws -> String {
        var base: JSONObject = [
            "client_id": "ops-cli", "resource": .string(AuthorizationServerTests.resource), "scope": "tools admin", "email": "alice@example.com",
        ]
        for member in claims.members { base[member.name] = member.value }
        var typed: JSONObject = ["typ": "oauth-id-jag+jwt"]
        for member in header.members { typed[member.name] = member.value }
        return try provider.token(sub: "alice-at-idp", aud: .string(gatewayIssuer), lifetime: lifetime, header: typed, claims: base)
    }

    static func present(_ fixture: GatewayFixture, _ assertion: String, client: (String, String)? = ("ops-cli", secret), extra: [(String, String)] = []) async throws -> Answer {
        var headers = [("Content-Type", "application/x-www-form-urlencoded")]
        if let (id, password) = client {
            headers.append(("Authorization", "Basic " + Data((FormEncoding.encode(id) + ":" + FormEncoding.encode(password)).utf8).base64EncodedString()))
        }
        return try await Answer.request(
            .POST, fixture.baseURL + "/api/auth/oauth/token", headers: headers,
            body: AuthorizationServerTests.query([("grant_type", OAuthTokenService.jwtBearerGrantType), ("assertion", assertion)] + extra), followRedirects: false)
    }

    @Test(
        "an ID-JAG from an issuer marked enterprise_authorization, presented by its confidential client, is exchanged once for an access token to its MCP server with the granted scopes the server offers and no refresh token; the metadata offers the grant and the id-jag profile"
    )
    func exchanged() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "idp-1")])
        let other = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "other-1")])
        try await Self.gateway(provider, other: other) { fixture in
            let document = try await fixture.send(.GET, "/.well-known/oauth-authorization-server")
            #expect(document.json["grant_types_supported"] == ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:jwt-bearer"])
            #expect(document.json["authorization_grant_profiles_supported"] == ["urn:ietf:params:oauth:grant-profile:id-jag"])
            let assertion = try Self.assertion(provider)
            fixture.remember(assertion)
            let answer = try await Self.present(fixture, assertion)
            #expect(answer.status == 200 && answer["token_type"] == "Bearer", "\(answer.raw)")
            #expect(answer.json["refresh_token"] == nil && answer["scope"] == "tools" && answer["resource"] == AuthorizationServerTests.resource, "\(answer.raw)")
            let token = try #require(answer["access_token"])
            fixture.remember(token)
            let claims = try StrictJSONReader().parseObject(try JWSCompact.parse(token).payload)
            let alice = try AuthenticatedCaller.externalUserID(issuer: provider.issuer, subject: "alice-at-idp")
            #expect(claims["sub"]?.stringValue == alice && claims["tenant_id"]?.stringValue == "acme" && claims["client_id"]?.stringValue == "ops-cli")
            #expect(claims["aud"]?.stringValue == AuthorizationServerTests.resource && claims["email"]?.stringValue == "alice@example.com")
            #expect(try await fixture.send(.POST, "/mcp/a", bearer: token, body: MCPRouteTests.ping).status == 200, "the token opens its MCP server")
            // Known as a provider sign-in makes a person known.
            let person = try #require(try await fixture.state.providerUser(id: alice))
            #expect(person.subject == "alice-at-idp" && person.email == "alice@example.com")
            // Once.
            let replayed = try await Self.present(fixture, assertion)
            #expect(replayed.status == 400 && replayed.error == "invalid_grant" && replayed.raw.contains("used already"), "\(replayed.raw)")
            // The audience with a trailing slash is the same authorization server; a scope the request asks narrows;
            // an assertion without names keeps those the person had.
            let slashed = try await Self.present(
                fixture, try Self.assertion(provider, claims: ["aud": .string(Self.gatewayIssuer + "/"), "scope": "tools read", "email": .null]), extra: [("scope", "tools")])
            #expect(slashed.status == 200 && slashed["scope"] == "tools", "\(slashed.raw)")
            fixture.remember(slashed["access_token"] ?? "")
            #expect(try await fixture.state.providerUser(id: alice)?.email == "alice@example.com", "the email the first assertion gave is kept")
        }
        try await provider.stop()
        try await other.stop()
    }

    @Test(
        "an ID-JAG is refused, each with its own error and nothing issued: another typ, another or several audiences, without the scopes its server requires, expired, unsigned by its issuer, from an issuer not marked enterprise_authorization, for another client, for no or another resource, from a public client or an unauthenticated one, for a person disabled here"
    )
    func refusals() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "idp-1")])
        let other = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "other-1")])
        let stranger = try JWSKey.generate(algorithm: .es256, kid: "idp-1")
        try await Self.gateway(provider, other: other) { fixture in
            let cases: [(String, String, (String, String)?, String, String)] = [
                ("another typ", try Self.assertion(provider, header: ["typ": "JWT"]), ("ops-cli", Self.secret), "invalid_grant", "typ"),
                ("another audience", try Self.assertion(provider, claims: ["aud": "https://elsewhere.example"]), ("ops-cli", Self.secret), "invalid_grant", "aud"),
                ("several audiences", try Self.assertion(provider, claims: ["aud": [.string(Self.gatewayIssuer), "https://other-as.example"]]), ("ops-cli", Self.secret),
                 "invalid_grant", "alone"),
                ("without the scope the server requires", try Self.assertion(provider, claims: ["scope": "admin"]), ("ops-cli", Self.secret), "invalid_scope", "tools"),
                ("a scope that is no string", try Self.assertion(provider, claims: ["scope": .null]), ("ops-cli", Self.secret), "invalid_grant", "scope"),
                ("expired", try Self.assertion(provider, claims: ["exp": .number(Date().timeIntervalSince1970 - 600), "iat": .number(Date().timeIntervalSince1970 - 900)]),
                 ("ops-cli", Self.secret), "invalid_grant", "expired"),
                ("signed by another key", try provider.token(
                    sub: "alice-at-idp", aud: .string(Self.gatewayIssuer), key: stranger, header: ["typ": "oauth-id-jag+jwt"],
                    claims: ["client_id": "ops-cli", "resource": .string(AuthorizationServerTests.resource)]), ("ops-cli", Self.secret), "invalid_grant", "signature"),
                ("an issuer without enterprise_authorization", try other.token(
                    sub: "alice-at-idp", aud: .string(Self.gatewayIssuer), header: ["typ": "oauth-id-jag+jwt"],
                    claims: ["client_id": "ops-cli", "resource": .string(AuthorizationServerTests.resource)]), ("ops-cli", Self.secret), "invalid_grant", "enterprise_authorization"),
                ("another client", try Self.assertion(provider, claims: ["client_id": "other-cli"]), ("ops-cli", Self.secret), "invalid_grant", "another client"),
                ("no resource", try Self.assertion(provider, claims: ["resource": .null]), ("ops-cli", Self.secret), "invalid_grant", "resource"),
                ("another resource", try Self.assertion(provider, claims: ["resource": "http://127.0.0.1:8080/mcp/none"]), ("ops-cli", Self.secret), "invalid_target", "MCP server"),
                ("a wrong secret", try Self.assertion(provider), ("ops-cli", "not the secret at all"), "invalid_client", "secret"),
                ("no client authentication", try Self.assertion(provider), nil, "invalid_client", "confidential"),
            ]
            for (name, assertion, client, error, said) in cases {
                fixture.remember(assertion)
                let answer = try await Self.present(fixture, assertion, client: client)
                #expect(answer.error == error && answer.raw.contains(said) && answer.json["access_token"] == nil, "\(name): \(answer.raw)")
            }
            // A public client sending its id alone.
            let publicClient = try await Answer.request(
                .POST, fixture.baseURL + "/api/auth/oauth/token", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: AuthorizationServerTests.query([
                    ("grant_type", OAuthTokenService.jwtBearerGrantType), ("assertion", try Self.assertion(provider, claims: ["client_id": "other-cli"])), ("client_id", "other-cli"),
                ]), followRedirects: false)
            #expect(publicClient.status == 401 && publicClient.error == "invalid_client", "\(publicClient.raw)")
            // The form's resource must be the assertion's.
            let named = try await Self.present(fixture, try Self.assertion(provider), extra: [("resource", "http://127.0.0.1:8080/mcp/b")])
            #expect(named.error == "invalid_target", "\(named.raw)")
            // A person disabled here: no token, and the one issued before stops.
            let first = try await Self.present(fixture, try Self.assertion(provider))
            let token = try #require(first["access_token"], "\(first.raw)")
            fixture.remember(token)
            let alice = try AuthenticatedCaller.externalUserID(issuer: provider.issuer, subject: "alice-at-idp")
            _ = try await fixture.state.cutOffProviderUser(id: alice, now: Date().timeIntervalSince1970, forgetNames: false)
            var stopped = try await fixture.send(.POST, "/mcp/a", bearer: token, body: MCPRouteTests.ping)
            for _ in 0..<20 where stopped.status == 200 {
                try await Task.sleep(for: .milliseconds(100))
                stopped = try await fixture.send(.POST, "/mcp/a", bearer: token, body: MCPRouteTests.ping)
            }
            #expect(stopped.status == 401, "\(stopped.raw)")
            let disabled = try await Self.present(fixture, try Self.assertion(provider))
            #expect(disabled.error == "invalid_grant" && disabled.raw.contains("disabled"), "\(disabled.raw)")
        }
        try await provider.stop()
        try await other.stop()
    }

    @Test("revoking the grant (oauth revoke) ends the token an ID-JAG gave at once; the grant is listed like any other")
    func grantRevoked() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "idp-1")])
        let other = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "other-1")])
        try await Self.gateway(provider, other: other) { fixture in
            let answer = try await Self.present(fixture, try Self.assertion(provider))
            let token = try #require(answer["access_token"], "\(answer.raw)")
            fixture.remember(token)
            #expect(try await fixture.send(.POST, "/mcp/a", bearer: token, body: MCPRouteTests.ping).status == 200)
            let alice = try AuthenticatedCaller.externalUserID(issuer: provider.issuer, subject: "alice-at-idp")
            let grants = try await fixture.state.oauthGrants(userID: alice)
            #expect(grants.map(\.clientID) == ["ops-cli"], "\(grants)")
            _ = try await fixture.state.deleteOAuthGrant(userID: alice, tenantID: "acme", clientID: "ops-cli", resource: AuthorizationServerTests.resource, now: Date().timeIntervalSince1970)
            var stopped = try await fixture.send(.POST, "/mcp/a", bearer: token, body: MCPRouteTests.ping)
            for _ in 0..<20 where stopped.status == 200 {
                try await Task.sleep(for: .milliseconds(100))
                stopped = try await fixture.send(.POST, "/mcp/a", bearer: token, body: MCPRouteTests.ping)
            }
            #expect(stopped.status == 401, "\(stopped.raw)")
        }
        try await provider.stop()
        try await other.stop()
    }
}
