import AuthorizationServer
import Foundation
import DataPlane
import Gateway
import JOSE
import MCPResource
import NIOHTTP1
import PortcullisTestSupport
import ProviderLogin
import StateSurface
import Testing
import TrafficCop

/// The gateway as an OAuth 2.1 authorization server (issue 55, part A): a configured client
/// signs a person in through the browser session, asks consent, and gets tokens bound to one MCP
/// server; every refusal the spec names, through the real gateway.
@Suite("The authorization server: authorize, consent, token, refresh, revoke")
struct AuthorizationServerTests {
    static let redirect = "http://127.0.0.1:5555/callback"
    static let verifier = "the-code-verifier-of-this-test-0123456789-abcdefgh"
    static var challenge: String { (try? Digest.sha256Base64URL(verifier)) ?? "" }
    static let resource = MCPRouteTests.publicURL + "/mcp/a"
    static let own = [("Origin", MCPRouteTests.publicURL), ("Content-Type", "application/x-www-form-urlencoded")]

    /// A gateway with the MCP route `/mcp/a` (scope `tools`), a plain route, the client `ops-cli` and the account `alice`.
    static func gateway(
        dynamicRegistration: Bool = false, configure: (inout GatewayConfiguration) -> Void = { _ in }, _ body: (GatewayFixture, CookieJar) async throws -> Void
    ) async throws {
        let upstream = try await RecordingUpstream.start()
        let port = upstream.port
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [try! MCPRouteTests.mcpRoute("/mcp/a", upstream: port, scopes: ["tools"]), ProxyRoute(prefix: "/api/plain", upstream: "http://127.0.0.1:\(port)")]
            var settings = AuthorizationServerSettings()
            settings.clients = [
                RegisteredClient(clientID: "ops-cli", name: "Ops CLI", redirectURIs: ["http://127.0.0.1/callback"], source: .configured),
                RegisteredClient(clientID: "other-cli", name: "Other", redirectURIs: ["https://other.example/cb"], source: .configured),
            ]
            settings.dynamicRegistration = dynamicRegistration
            configuration.authorizationServer = settings
            configure(&configuration)
        }
        try await fixture.addUser("alice")
        let signedIn = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/sign_in", headers: own, body: "username=alice&password=correct+horse+battery&rd=%2F", followRedirects: false)
        #expect(signedIn.status == 303, "\(signedIn.raw)")
        var jar = CookieJar()
        jar.take(signedIn)
        fixture.remember(try #require(jar["portcullis"]))
        try await body(fixture, jar)
        try await fixture.stop()
    }

    static func query(_ parameters: [(String, String)]) -> String {
        parameters.map { $0.0 + "=" + FormEncoding.encode($0.1) }.joined(separator: "&")
    }

    static func authorizeParameters(redirect: String = redirect, client: String = "ops-cli", extra: [(String, String)] = []) -> [(String, String)] {
        [("response_type", "code"), ("client_id", client), ("redirect_uri", redirect), ("code_challenge", challenge), ("code_challenge_method", "S256"),
         ("resource", resource), ("scope", "tools"), ("state", "st-123")] + extra
    }

    static func authorize(_ fixture: GatewayFixture, _ jar: CookieJar, _ parameters: [(String, String)]) async throws -> Answer {
        try await Answer.request(.GET, fixture.baseURL + "/api/auth/oauth/authorize?" + query(parameters), headers: [jar.header], followRedirects: false)
    }

    /// The query parameters of a redirect's `Location`.
    static func redirectParameters(_ answer: Answer) -> [String: String] {
        guard let location = answer.headers["Location"].first, let query = location.split(separator: "?", maxSplits: 1).last else { return [:] }
        return FormEncoding.fields(query) ?? [:]
    }

    /// The consent form's nonce, from the page.
    static func nonce(_ page: Answer) -> String {
        guard let range = page.raw.range(of: #"name="consent_nonce" value=""#) else { return "" }
        return String(page.raw[range.upperBound...].prefix { $0 != "\"" })
    }

    /// Posts the consent form of `page` with `decision`.
    static func consent(_ fixture: GatewayFixture, _ jar: CookieJar, _ parameters: [(String, String)], page: Answer, decision: String = "allow",
                        headers: [(String, String)] = own) async throws -> Answer {
        try await Answer.request(
            .POST, fixture.baseURL + "/api/auth/oauth/consent", headers: headers + [jar.header],
            body: query(parameters + [("consent_nonce", nonce(page)), ("decision", decision)]), followRedirects: false)
    }

    /// Consent given through the page's form (or remembered), and the code from the redirect.
    static func consentedCode(_ fixture: GatewayFixture, _ jar: CookieJar, redirect: String = redirect) async throws -> String {
        let page = try await authorize(fixture, jar, authorizeParameters(redirect: redirect))
        // Consent given before for these scopes: the code comes at once.
        if page.status == 303, let code = redirectParameters(page)["code"] { return code }
        #expect(page.status == 200 && page.raw.contains("Ops CLI") && page.raw.contains(resource), "\(page.raw)")
        let answer = try await consent(fixture, jar, authorizeParameters(redirect: redirect), page: page)
        #expect(answer.status == 303 && answer.headers["Location"].first?.hasPrefix(redirect + "?") == true, "\(answer.raw)")
        return try #require(redirectParameters(answer)["code"])
    }

    static func token(_ fixture: GatewayFixture, _ parameters: [(String, String)]) async throws -> Answer {
        try await Answer.request(
            .POST, fixture.baseURL + "/api/auth/oauth/token", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: query(parameters), followRedirects: false)
    }

    static func exchange(_ fixture: GatewayFixture, code: String, client: String = "ops-cli", verifier: String = verifier, redirect: String = redirect, resource: String? = nil)
        async throws -> Answer
    {
        try await token(
            fixture,
            [("grant_type", "authorization_code"), ("code", code), ("client_id", client), ("redirect_uri", redirect), ("code_verifier", verifier)]
                + (resource.map { [("resource", $0)] } ?? []))
    }

    @Test("the metadata (RFC 8414) names the endpoints, S256 only, code only, public clients, iss in responses and the MCP routes' scopes; openid-configuration is not served (no OpenID Provider: no ID tokens)")
    func metadata() async throws {
        try await Self.gateway { fixture, _ in
            let openID = try await fixture.send(.GET, "/.well-known/openid-configuration")
            #expect(openID.status == 404, "\(openID.raw)")
            for path in ["/.well-known/oauth-authorization-server"] {
                let document = try await fixture.send(.GET, path)
                #expect(document.status == 200)
                #expect(document["authorization_endpoint"] == "http://127.0.0.1:8080/api/auth/oauth/authorize" && document["token_endpoint"] == "http://127.0.0.1:8080/api/auth/oauth/token")
                #expect(document["revocation_endpoint"] == "http://127.0.0.1:8080/api/auth/oauth/revoke" && document.json["registration_endpoint"] == nil)
                #expect(document.json["code_challenge_methods_supported"] == ["S256"] && document.json["response_types_supported"] == ["code"])
                #expect(document.json["grant_types_supported"] == ["authorization_code", "refresh_token"] && document.json["token_endpoint_auth_methods_supported"] == ["none"])
                #expect(document.json["authorization_response_iss_parameter_supported"] == true && document.json["scopes_supported"] == ["tools"])
            }
        }
    }

    @Test("a person signs in, consents on a page nobody may frame, and the client's code becomes a token for that MCP server only (aud, client_id, scope); a second authorization to a loopback redirect asks again; the code works once and its second use revokes what the first gave")
    func codeFlow() async throws {
        try await Self.gateway { fixture, jar in
            // Not signed in: sent to sign in, and back here after.
            let anonymous = try await Self.authorize(fixture, CookieJar(), Self.authorizeParameters())
            #expect(anonymous.status == 303 && anonymous.headers["Location"].first?.hasPrefix("/.portcullis/sign_in?rd=%2Fapi%2Fauth%2Foauth%2Fauthorize%3F") == true, "\(anonymous.raw)")
            let page = try await Self.authorize(fixture, jar, Self.authorizeParameters())
            #expect(page.headers["Content-Security-Policy"].first?.contains("frame-ancestors 'none'") == true && page.headers["X-Frame-Options"].first == "DENY")
            #expect(page.headers["Content-Security-Policy"].first?.contains("form-action 'self' http://127.0.0.1:5555") == true)
            let code = try await Self.consentedCode(fixture, jar)
            let tokens = try await Self.exchange(fixture, code: code, resource: Self.resource)
            #expect(tokens.status == 200 && tokens.headers["Cache-Control"].first == "no-store", "\(tokens.raw)")
            let access = try #require(tokens["access_token"])
            let refresh = try #require(tokens["refresh_token"])
            fixture.remember(access)
            fixture.remember(refresh)
            #expect(refresh.hasPrefix("rto_") && tokens["scope"] == "tools" && tokens["token_type"] == "Bearer")
            let claims = try StrictJSONReader().parseObject(try JWSCompact.parse(access, maximumBytes: 16_384, reader: StrictJSONReader()).payload)
            #expect(claims["aud"]?.stringValue == Self.resource && claims["client_id"]?.stringValue == "ops-cli" && claims["scope"]?.stringValue == "tools")
            #expect(claims["preferred_username"]?.stringValue == "alice")
            let called = try await fixture.send(.POST, "/mcp/a", bearer: access, body: MCPRouteTests.ping)
            #expect(called.status == 200, "\(called.raw)")
            #expect(try await fixture.send(.GET, "/api/plain/x", bearer: access).status == 401)
            // The refresh token is no API refresh token.
            let asAPI = try await fixture.post("/api/auth/refresh", ["refresh_token": .string(refresh)])
            #expect(asAPI.status == 401, "\(asAPI.raw)")
            // A second authorization asking no more, to a loopback redirect on another port (any
            // program on the machine may listen there): the page again, naming what was allowed.
            let again = try await Self.authorize(fixture, jar, Self.authorizeParameters(redirect: "http://127.0.0.1:6666/callback"))
            #expect(again.status == 200 && again.raw.contains("You allowed it before: <code>tools</code>") && again.raw.contains("any program on your computer"), "\(again.raw)")
            // The first code again: refused, and what it gave is revoked.
            let reused = try await Self.exchange(fixture, code: code)
            #expect(reused.status == 400 && reused.error == "invalid_grant", "\(reused.raw)")
            let refreshed = try await Self.token(fixture, [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", "ops-cli")])
            #expect(refreshed.status == 400 && refreshed.error == "invalid_grant", "\(refreshed.raw)")
            // A call already admitted when the revocation lands is ended with 401 access_ended; the next one is refused outright.
            let revoked = try await Answer.eventually(within: 3, { try await fixture.send(.POST, "/mcp/a", bearer: access, body: MCPRouteTests.ping) }, until: { $0.status == 401 && $0.error != "access_ended" })
            #expect(revoked.status == 401 && revoked.error == "token_revoked", "\(revoked.raw)")
        }
    }

    @Test("the consent page names the MCP server by its configured name and says what each scope allows, escaped")
    func consentPageWords() async throws {
        try await Self.gateway(configure: { configuration in
            let route = configuration.routes[0]
            configuration.routes[0].mcp = MCPResource(
                publicURL: MCPRouteTests.publicURL, host: nil, pathPrefix: route.pathPrefix, scopes: ["tools"], name: "Team <tools>",
                scopeDescriptions: ["tools": "Call the tools & read their answers"])
        }) { fixture, jar in
            let page = try await Self.authorize(fixture, jar, Self.authorizeParameters())
            #expect(page.status == 200, "\(page.raw)")
            #expect(page.raw.contains("<strong>Team &lt;tools&gt;</strong>") && page.raw.contains("<code>tools</code>: Call the tools &amp; read their answers"), "\(page.raw)")
        }
    }

    @Test("a consent given before is taken without a page only where the redirect identifies the client (an https URI registered exactly) and the client did not ask prompt=consent; prompt=none answers login_required or consent_required instead of a page")
    func rememberedConsent() async throws {
        try await Self.gateway { fixture, jar in
            let https = Self.authorizeParameters(redirect: "https://other.example/cb", client: "other-cli")
            let none = try await Self.authorize(fixture, jar, https + [("prompt", "none")])
            #expect(none.status == 303 && Self.redirectParameters(none)["error"] == "consent_required", "\(none.raw)")
            let anonymous = try await Self.authorize(fixture, CookieJar(), https + [("prompt", "none")])
            #expect(anonymous.status == 303 && Self.redirectParameters(anonymous)["error"] == "login_required", "\(anonymous.raw)")
            let first = try await Self.authorize(fixture, jar, https)
            #expect(first.status == 200 && !first.raw.contains("You allowed it before"), "\(first.raw)")
            let allowed = try await Self.consent(fixture, jar, https, page: first)
            #expect(allowed.status == 303 && Self.redirectParameters(allowed)["code"] != nil, "\(allowed.raw)")
            // The same again: no page, the code at once.
            let again = try await Self.authorize(fixture, jar, https)
            let parameters = Self.redirectParameters(again)
            #expect(again.status == 303 && parameters["code"] != nil && parameters["state"] == "st-123" && parameters["iss"] == "http://127.0.0.1:8080", "\(again.raw)")
            #expect(again.headers["Location"].first?.hasPrefix("https://other.example/cb?") == true)
            // Signing in on the way (a new browser): the sign-in form may be sent on to where the
            // authorization goes next, the client's redirect (its CSP form-action names it); a state
            // and scope holding an escaped space (encodeURIComponent's %20) sign in too.
            var spaced = https.filter { $0.0 != "state" }
            spaced.append(("state", "a b/c"))
            let rd = "/api/auth/oauth/authorize?" + Self.query(spaced)
            #expect(rd.contains("a%20b"), "\(rd)")
            let form = try await Answer.request(.GET, fixture.baseURL + "/.portcullis/sign_in?rd=" + FormEncoding.encode(rd), followRedirects: false)
            #expect(form.status == 200 && form.headers["Content-Security-Policy"].first?.contains("form-action 'self' https://other.example;") == true, "\(form.headers) \(form.raw)")
            let signedIn = try await Answer.request(
                .POST, fixture.baseURL + "/.portcullis/sign_in", headers: Self.own,
                body: "username=alice&password=correct+horse+battery&rd=" + FormEncoding.encode(rd), followRedirects: false)
            #expect(signedIn.status == 303 && signedIn.headers["Location"].first == rd, "\(signedIn.raw)")
            var fresh = CookieJar()
            fresh.take(signedIn)
            let onward = try await Answer.request(.GET, fixture.baseURL + rd, headers: [fresh.header], followRedirects: false)
            #expect(onward.status == 303 && Self.redirectParameters(onward)["state"] == "a b/c" && onward.headers["Location"].first?.hasPrefix("https://other.example/cb?") == true, "\(onward.raw)")
            let quiet = try await Self.authorize(fixture, jar, https + [("prompt", "none")])
            #expect(quiet.status == 303 && Self.redirectParameters(quiet)["code"] != nil, "\(quiet.raw)")
            // The client asks for the page: shown, with what was allowed.
            let asked = try await Self.authorize(fixture, jar, https + [("prompt", "consent")])
            #expect(asked.status == 200 && asked.raw.contains("You allowed it before") && asked.raw.contains("asked for this page again"), "\(asked.raw)")
            let twice = try await Self.authorize(fixture, jar, https + [("prompt", "none consent")])
            #expect(twice.status == 303 && Self.redirectParameters(twice)["error"] == "invalid_request", "\(twice.raw)")
            // The loopback client, consent remembered: asked again at every port, the same port too.
            _ = try await Self.consentedCode(fixture, jar)
            for redirect in [Self.redirect, "http://127.0.0.1:7777/callback"] {
                let page = try await Self.authorize(fixture, jar, Self.authorizeParameters(redirect: redirect))
                #expect(page.status == 200 && page.raw.contains("You allowed it before"), "\(redirect): \(page.raw)")
            }
        }
    }

    @Test("a grant the company's provider made (an identity assertion's) never stands in for the person's consent: prompt=none is consent_required and the page is shown; once the person consents it is theirs")
    func assertionGrantIsNoConsent() async throws {
        try await Self.gateway { fixture, jar in
            let alice = try #require(try await fixture.state.user(tenantID: "default", username: "alice")).id
            let now = Date().timeIntervalSince1970
            try await fixture.state.upsertOAuthGrant(
                OAuthGrantRecord(
                    userID: alice, tenantID: "default", clientID: "other-cli", clientName: "Other", resource: Self.resource, scope: "tools", createdAt: now,
                    updatedAt: now, byAssertion: true))
            let https = Self.authorizeParameters(redirect: "https://other.example/cb", client: "other-cli")
            let none = try await Self.authorize(fixture, jar, https + [("prompt", "none")])
            #expect(none.status == 303 && Self.redirectParameters(none)["error"] == "consent_required", "\(none.raw)")
            let page = try await Self.authorize(fixture, jar, https)
            #expect(page.status == 200 && !page.raw.contains("You allowed it before"), "\(page.raw)")
            let allowed = try await Self.consent(fixture, jar, https, page: page)
            #expect(allowed.status == 303 && Self.redirectParameters(allowed)["code"] != nil, "\(allowed.raw)")
            #expect(try await fixture.state.oauthGrant(userID: alice, tenantID: "default", clientID: "other-cli", resource: Self.resource)?.byAssertion == false)
            let quiet = try await Self.authorize(fixture, jar, https + [("prompt", "none")])
            #expect(quiet.status == 303 && Self.redirectParameters(quiet)["code"] != nil, "now the person's consent: \(quiet.raw)")
        }
    }

    @Test("a client with one registered https redirect_uri may leave it out of the authorization, and then out of the token request too; naming it there is refused")
    func redirectURILeftOut() async throws {
        try await Self.gateway { fixture, jar in
            let parameters = Self.authorizeParameters(client: "other-cli").filter { $0.0 != "redirect_uri" }
            let page = try await Self.authorize(fixture, jar, parameters)
            #expect(page.status == 200, "\(page.raw)")
            func code() async throws -> String {
                let page = try await Self.authorize(fixture, jar, parameters)
                if page.status == 303 { return try #require(Self.redirectParameters(page)["code"]) }
                let answer = try await Self.consent(fixture, jar, parameters, page: page)
                #expect(answer.headers["Location"].first?.hasPrefix("https://other.example/cb?") == true, "\(answer.raw)")
                return try #require(Self.redirectParameters(answer)["code"])
            }
            let named = try await Self.exchange(fixture, code: try await code(), client: "other-cli", redirect: "https://other.example/cb")
            #expect(named.status == 400 && named.error == "invalid_grant", "\(named.raw)")
            let left = try await Self.token(fixture, [("grant_type", "authorization_code"), ("code", try await code()), ("client_id", "other-cli"), ("code_verifier", Self.verifier)])
            #expect(left.status == 200, "\(left.raw)")
            fixture.remember(left["access_token"] ?? "")
            fixture.remember(left["refresh_token"] ?? "")
        }
    }

    @Test("refresh rotates (the old token then revokes its family); the revocation endpoint ends a family; a refresh by another client or for another resource is refused")
    func refreshAndRevoke() async throws {
        try await Self.gateway { fixture, jar in
            let first = try await Self.exchange(fixture, code: try await Self.consentedCode(fixture, jar))
            let refresh = try #require(first["refresh_token"])
            fixture.remember(refresh)
            #expect(try await Self.token(fixture, [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", "other-cli")]).error == "invalid_grant")
            #expect(try await Self.token(fixture, [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", "ops-cli"), ("resource", "http://127.0.0.1:8080/mcp/b")]).error == "invalid_target")
            let second = try await Self.token(fixture, [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", "ops-cli")])
            #expect(second.status == 200, "\(second.raw)")
            let next = try #require(second["refresh_token"])
            fixture.remember(next)
            #expect(next != refresh)
            #expect(try await Self.token(fixture, [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", "ops-cli")]).error == "invalid_grant")
            #expect(try await Self.token(fixture, [("grant_type", "refresh_token"), ("refresh_token", next), ("client_id", "ops-cli")]).error == "invalid_grant", "reuse revoked the family")
            // A fresh family, revoked at the revocation endpoint.
            let third = try await Self.exchange(fixture, code: try await Self.consentedCode(fixture, jar))
            let other = try #require(third["refresh_token"])
            fixture.remember(other)
            let revoked = try await Answer.request(
                .POST, fixture.baseURL + "/api/auth/oauth/revoke", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: "token=" + other, followRedirects: false)
            #expect(revoked.status == 200)
            #expect(try await Self.token(fixture, [("grant_type", "refresh_token"), ("refresh_token", other), ("client_id", "ops-cli")]).error == "invalid_grant")
            let unknown = try await Answer.request(
                .POST, fixture.baseURL + "/api/auth/oauth/revoke", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: "token=nothing", followRedirects: false)
            #expect(unknown.status == 200, "RFC 7009: 200 for a token it does not know")
        }
    }

    @Test("a redirect_uri by prefix, on another host, with a fragment or userinfo, or an unknown client, is the gateway's own page, never a redirect; a loopback redirect matches on any port")
    func redirectRules() async throws {
        try await Self.gateway { fixture, jar in
            for bad in ["http://127.0.0.1/callback/evil", "http://127.0.0.1:5555/callbackx", "http://evil.example/callback", "http://127.0.0.1/callback#x", "http://user@127.0.0.1/callback",
                        "http://127.0.0.2/callback", "https://127.0.0.1/callback"] {
                let answer = try await Self.authorize(fixture, jar, Self.authorizeParameters(redirect: bad))
                #expect(answer.status == 400 && answer.headers["Location"].isEmpty && answer.headers["X-Portcullis-Error"].first == "redirect_uri_invalid", "\(bad): \(answer.raw)")
            }
            let unknown = try await Self.authorize(fixture, jar, Self.authorizeParameters(client: "nobody"))
            #expect(unknown.status == 400 && unknown.headers["Location"].isEmpty && unknown.headers["X-Portcullis-Error"].first == "client_unknown")
            let otherClientsURI = try await Self.authorize(fixture, jar, Self.authorizeParameters(redirect: "https://other.example/cb"))
            #expect(otherClientsURI.status == 400 && otherClientsURI.headers["Location"].isEmpty)
            for port in ["1", "65535", "40000"] {
                #expect(try await Self.authorize(fixture, jar, Self.authorizeParameters(redirect: "http://127.0.0.1:\(port)/callback")).status == 200, "port \(port)")
            }
        }
    }

    @Test("errors after the client and redirect are checked go back to it with state and iss: PKCE missing, plain or malformed; a resource naming no MCP route; a scope the route lacks; another response_type")
    func redirectedErrors() async throws {
        try await Self.gateway { fixture, jar in
            func parameters(without names: Set<String> = [], with extra: [(String, String)] = []) -> [(String, String)] {
                Self.authorizeParameters().filter { !names.contains($0.0) && !extra.map(\.0).contains($0.0) } + extra
            }
            let cases: [([(String, String)], String)] = [
                (parameters(without: ["code_challenge", "code_challenge_method"]), "invalid_request"),
                (parameters(with: [("code_challenge_method", "plain")]), "invalid_request"),
                (parameters(with: [("code_challenge", "short")]), "invalid_request"),
                (parameters(without: ["resource"]), "invalid_target"),
                (parameters(with: [("resource", "http://127.0.0.1:8080/api/plain")]), "invalid_target"),
                (parameters(with: [("resource", "http://127.0.0.1:8080/mcp/a/")]), "invalid_target"),
                (parameters(with: [("scope", "admin")]), "invalid_scope"),
                (parameters(with: [("response_type", "token")]), "unsupported_response_type"),
            ]
            for (asked, error) in cases {
                let answer = try await Self.authorize(fixture, jar, asked)
                let back = Self.redirectParameters(answer)
                #expect(answer.status == 303 && answer.headers["Location"].first?.hasPrefix(Self.redirect + "?") == true, "\(error): \(answer.raw)")
                #expect(back["error"] == error && back["state"] == "st-123" && back["iss"] == "http://127.0.0.1:8080" && back["code"] == nil, "\(error): \(back)")
            }
        }
    }

    @Test("a configured client with a client_secret_file is confidential: the token and revocation endpoints take it only with its secret (Basic, or client_secret in the form; never both), a wrong or missing one is 401 invalid_client (with WWW-Authenticate: Basic after Basic) and spends no code; a public client that sends a secret is refused, and only the client itself revokes its tokens; Basic form-encoded or as curl sends it; the metadata offers both methods")
    func confidentialClient() async throws {
        let secret = "s3cret+of/ops:cli=long enough"
        try await Self.gateway(configure: { configuration in
            configuration.authorizationServer.clients[0] = RegisteredClient(
                clientID: "ops-cli", name: "Ops CLI", redirectURIs: ["http://127.0.0.1/callback"], source: .configured, secret: try! ClientSecret(Array(secret.utf8)))
        }) { fixture, jar in
            fixture.remember(secret)
            let document = try await fixture.send(.GET, "/.well-known/oauth-authorization-server")
            #expect(document.json["token_endpoint_auth_methods_supported"] == ["none", "client_secret_basic", "client_secret_post"])
            #expect(document.json["revocation_endpoint_auth_methods_supported"] == ["none", "client_secret_basic", "client_secret_post"])
            func basic(_ id: String, _ password: String) -> (String, String) {
                ("Authorization", "Basic " + Data((FormEncoding.encode(id) + ":" + FormEncoding.encode(password)).utf8).base64EncodedString())
            }
            func post(_ path: String, _ parameters: [(String, String)], headers: [(String, String)] = []) async throws -> Answer {
                try await Answer.request(
                    .POST, fixture.baseURL + path, headers: [("Content-Type", "application/x-www-form-urlencoded")] + headers, body: Self.query(parameters), followRedirects: false)
            }
            let code = try await Self.consentedCode(fixture, jar)
            let grant = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirect), ("code_verifier", Self.verifier)]
            let missing = try await post("/api/auth/oauth/token", grant + [("client_id", "ops-cli")])
            #expect(missing.status == 401 && missing.error == "invalid_client" && missing.headers["WWW-Authenticate"].isEmpty, "\(missing.raw)")
            let wrong = try await post("/api/auth/oauth/token", grant, headers: [basic("ops-cli", "not the secret at all")])
            #expect(wrong.status == 401 && wrong.error == "invalid_client" && wrong.headers["WWW-Authenticate"].first?.hasPrefix("Basic") == true, "\(wrong.raw)")
            let garbled = try await post("/api/auth/oauth/token", grant, headers: [("Authorization", "Basic !!!")])
            #expect(garbled.status == 401 && garbled.error == "invalid_client", "\(garbled.raw)")
            let twice = try await post("/api/auth/oauth/token", grant + [("client_secret", secret)], headers: [basic("ops-cli", secret)])
            #expect(twice.status == 400 && twice.error == "invalid_request", "\(twice.raw)")
            let otherID = try await post("/api/auth/oauth/token", grant + [("client_id", "other-cli")], headers: [basic("ops-cli", secret)])
            #expect(otherID.status == 400 && otherID.error == "invalid_request", "\(otherID.raw)")
            // None of the refusals spent the code: with the secret (Basic, form-encoded), it is exchanged.
            let issued = try await post("/api/auth/oauth/token", grant, headers: [basic("ops-cli", secret)])
            #expect(issued.status == 200 && issued["token_type"] == "Bearer", "\(issued.raw)")
            let refresh = try #require(issued["refresh_token"])
            fixture.remember(refresh)
            #expect(!issued.raw.contains(secret))
            let unauthenticated = try await post("/api/auth/oauth/token", [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", "ops-cli")])
            #expect(unauthenticated.status == 401 && unauthenticated.error == "invalid_client", "\(unauthenticated.raw)")
            // Basic as curl -u sends it, not form-encoded ("+" is a plus, not a space): the same secret.
            let raw = ("Authorization", "Basic " + Data(("ops-cli:" + secret).utf8).base64EncodedString())
            let refreshed = try await post("/api/auth/oauth/token", [("grant_type", "refresh_token"), ("refresh_token", refresh)], headers: [raw])
            #expect(refreshed.status == 200, "the unauthenticated attempt did not spend the refresh token: \(refreshed.raw)")
            let next = try #require(refreshed["refresh_token"])
            fixture.remember(next)
            // A public client has no secret to send.
            let publicWithSecret = try await post("/api/auth/oauth/token", [("grant_type", "refresh_token"), ("refresh_token", next), ("client_id", "other-cli"), ("client_secret", "anything-at-all")])
            #expect(publicWithSecret.status == 401 && publicWithSecret.error == "invalid_client", "\(publicWithSecret.raw)")
            // Revocation (RFC 7009 2.1): the confidential client authenticates.
            let revokeWrong = try await post("/api/auth/oauth/revoke", [("token", next)], headers: [basic("ops-cli", "not the secret at all")])
            #expect(revokeWrong.status == 401 && revokeWrong.error == "invalid_client", "\(revokeWrong.raw)")
            let revokeUnnamed = try await post("/api/auth/oauth/revoke", [("token", next), ("client_id", "ops-cli")])
            #expect(revokeUnnamed.status == 401, "\(revokeUnnamed.raw)")
            // Only the client the token was issued to may revoke it (RFC 7009 2.1), not a stranger holding it.
            let revokeAnonymous = try await post("/api/auth/oauth/revoke", [("token", next)])
            #expect(revokeAnonymous.status == 401 && revokeAnonymous.error == "invalid_client", "\(revokeAnonymous.raw)")
            let revokePublic = try await post("/api/auth/oauth/revoke", [("token", next), ("client_id", "other-cli")])
            #expect(revokePublic.status == 401 && revokePublic.error == "invalid_client", "\(revokePublic.raw)")
            let kept = try await post("/api/auth/oauth/token", [("grant_type", "refresh_token"), ("refresh_token", next), ("client_id", "ops-cli"), ("client_secret", secret)])
            #expect(kept.status == 200, "the refused revocations revoked nothing: \(kept.raw)")
            let last = try #require(kept["refresh_token"])
            fixture.remember(last)
            #expect(try await post("/api/auth/oauth/revoke", [("token", last)], headers: [basic("ops-cli", secret)]).status == 200)
            let ended = try await post("/api/auth/oauth/token", [("grant_type", "refresh_token"), ("refresh_token", last), ("client_id", "ops-cli"), ("client_secret", secret)])
            #expect(ended.error == "invalid_grant", "the authenticated revocation ended the family: \(ended.raw)")
        }
    }

    @Test("the token endpoint refuses a wrong verifier, another client, another redirect_uri, another resource, and each burns the code; a consent posted from another origin is refused on a page")
    func tokenRefusals() async throws {
        try await Self.gateway { fixture, jar in
            let wrongVerifier = try await Self.exchange(fixture, code: try await Self.consentedCode(fixture, jar), verifier: String(repeating: "x", count: 43))
            #expect(wrongVerifier.status == 400 && wrongVerifier.error == "invalid_grant", "\(wrongVerifier.raw)")
            let byOther = try await Self.exchange(fixture, code: try await Self.consentedCode(fixture, jar), client: "other-cli")
            #expect(byOther.error == "invalid_grant")
            let code = try await Self.consentedCode(fixture, jar)
            #expect(try await Self.exchange(fixture, code: code, redirect: "http://127.0.0.1:5556/callback").error == "invalid_grant")
            #expect(try await Self.exchange(fixture, code: code).error == "invalid_grant", "a refused exchange spent the code")
            #expect(try await Self.exchange(fixture, code: try await Self.consentedCode(fixture, jar), resource: "http://127.0.0.1:8080/mcp/b").error == "invalid_target")
            #expect(try await Self.exchange(fixture, code: "ac_unknown").error == "invalid_grant")
            let json = try await Answer.request(.POST, fixture.baseURL + "/api/auth/oauth/token", body: "{}", followRedirects: false)
            #expect(json.status == 400 && json.error == "invalid_request")
            // A fresh person's page (no consent yet): bob.
            try await fixture.addUser("bob")
            let bobSignedIn = try await Answer.request(
                .POST, fixture.baseURL + "/.portcullis/sign_in", headers: Self.own, body: "username=bob&password=correct+horse+battery&rd=%2F", followRedirects: false)
            var bob = CookieJar()
            bob.take(bobSignedIn)
            fixture.remember(bob["portcullis"] ?? "")
            let page = try await Self.authorize(fixture, bob, Self.authorizeParameters())
            #expect(page.status == 200 && !Self.nonce(page).isEmpty, "\(page.raw)")
            let crossSite = try await Self.consent(fixture, bob, Self.authorizeParameters(), page: page, headers: [("Origin", "https://evil.example"), Self.own[1]])
            #expect(crossSite.status == 403 && crossSite.headers["Location"].isEmpty && crossSite.headers["Content-Type"].first?.hasPrefix("text/html") == true, "\(crossSite.raw)")
            // Without the page's nonce (a same-site page that can post but not read the page), or with another browser's: refused.
            let noNonce = try await Answer.request(
                .POST, fixture.baseURL + "/api/auth/oauth/consent", headers: Self.own + [bob.header], body: Self.query(Self.authorizeParameters() + [("decision", "allow")]),
                followRedirects: false)
            #expect(noNonce.status == 403 && noNonce.headers["Location"].isEmpty, "\(noNonce.raw)")
            let alicesNonce = try await Answer.request(
                .POST, fixture.baseURL + "/api/auth/oauth/consent", headers: Self.own + [bob.header],
                body: Self.query(Self.authorizeParameters() + [("consent_nonce", String(repeating: "A", count: 32)), ("decision", "allow")]), followRedirects: false)
            #expect(alicesNonce.status == 403 && alicesNonce.headers["Location"].isEmpty)
            let denied = try await Self.consent(fixture, bob, Self.authorizeParameters(), page: page, decision: "deny")
            #expect(Self.redirectParameters(denied)["error"] == "access_denied")
        }
    }

    @Test("with dynamic_registration a client registers itself (RFC 7591) as a public client, is shown as unverified at consent, and completes the flow; a registration without redirect URIs, with an unsafe one, another grant type or not JSON is refused; without it the endpoint is 404 and the metadata names none")
    func dynamicRegistration() async throws {
        try await Self.gateway { fixture, _ in
            let off = try await fixture.send(.POST, "/api/auth/oauth/register", body: #"{"redirect_uris":["http://127.0.0.1/cb"]}"#)
            #expect(off.status == 404)
        }
        try await Self.gateway(dynamicRegistration: true) { fixture, jar in
            let metadata = try await fixture.send(.GET, "/.well-known/oauth-authorization-server")
            #expect(metadata["registration_endpoint"] == "http://127.0.0.1:8080/api/auth/oauth/register")
            let refusals: [(String, String)] = [
                (#"{"client_name":"x"}"#, "invalid_redirect_uri"),
                (#"{"redirect_uris":["http://evil.example/cb"]}"#, "invalid_redirect_uri"),
                (#"{"redirect_uris":["https://ok.example/cb#frag"]}"#, "invalid_redirect_uri"),
                (#"{"redirect_uris":["https://ok.example/cb"],"grant_types":["implicit"]}"#, "invalid_client_metadata"),
                (#"{"redirect_uris":["https://ok.example/cb"],"client_name":"a\u0007b"}"#, "invalid_client_metadata"),
                (#"{"redirect_uris":["https://ok.example/cb"],"redirect_uris":["https://x.example/cb"]}"#, "invalid_client_metadata"),
                ("not json", "invalid_client_metadata"),
            ]
            for (body, error) in refusals {
                let refused = try await fixture.send(.POST, "/api/auth/oauth/register", body: body)
                #expect(refused.status == 400 && refused.error == error, "\(body): \(refused.raw)")
            }
            let registered = try await fixture.send(
                .POST, "/api/auth/oauth/register",
                body: #"{"client_name":"Agent <b>X</b>","redirect_uris":["http://127.0.0.1/callback"],"token_endpoint_auth_method":"client_secret_post","grant_types":["authorization_code","refresh_token"]}"#)
            #expect(registered.status == 201, "\(registered.raw)")
            let clientID = try #require(registered["client_id"])
            #expect(clientID.hasPrefix("dyn_") && registered["token_endpoint_auth_method"] == "none" && registered.json["client_secret"] == nil)
            let parameters = Self.authorizeParameters(client: clientID)
            let page = try await Self.authorize(fixture, jar, parameters)
            #expect(page.status == 200 && page.raw.contains("unverified") && page.raw.contains("Agent &lt;b&gt;X&lt;/b&gt;") && !page.raw.contains("<b>X</b>"), "\(page.raw)")
            let answer = try await Self.consent(fixture, jar, parameters, page: page)
            let code = try #require(Self.redirectParameters(answer)["code"])
            // An error of a client nobody vouches for is the gateway's page: it would otherwise redirect anywhere it registered.
            let bad = try await Self.authorize(fixture, jar, parameters.filter { $0.0 != "code_challenge" })
            #expect(bad.status == 400 && bad.headers["Location"].isEmpty && bad.headers["X-Portcullis-Error"].first == "invalid_request", "\(bad.raw)")
            // prompt=none, where a page would be needed, likewise: signed in or not, no redirect without a click.
            for (cookies, error) in [(jar, "consent_required"), (CookieJar(), "login_required")] {
                let quiet = try await Self.authorize(fixture, cookies, parameters + [("prompt", "none")])
                #expect(quiet.status == 400 && quiet.headers["Location"].isEmpty && quiet.headers["X-Portcullis-Error"].first == error, "\(quiet.raw)")
            }
            let tokens = try await Self.exchange(fixture, code: code, client: clientID)
            #expect(tokens.status == 200, "\(tokens.raw)")
            fixture.remember(tokens["access_token"] ?? "")
            fixture.remember(tokens["refresh_token"] ?? "")
            #expect(try await fixture.send(.POST, "/mcp/a", bearer: try #require(tokens["access_token"]), body: MCPRouteTests.ping).status == 200)
        }
    }

    @Test("open registration is bounded as a whole: past max_unused_registrations live unused ones it is 503 temporarily_unavailable until one is used or ten minutes pass; the per-address limit counts an IPv6 /64 as one client; redirect URIs over 2 KiB together are refused")
    func registrationBounds() async throws {
        try await Self.gateway(dynamicRegistration: true, configure: { configuration in
            configuration.authorizationServer.maximumUnusedRegistrations = 2
            configuration.rateLimits.registrationPerClient = RateLimit(perMinute: 1, burst: 3)
            configuration.trustedProxies = [IPNetwork("127.0.0.1")!]
        }) { fixture, jar in
            func register(from address: String, _ body: String = #"{"redirect_uris":["http://127.0.0.1/callback"]}"#) async throws -> Answer {
                try await fixture.send(.POST, "/api/auth/oauth/register", headers: [("X-Forwarded-For", address)], body: body)
            }
            // Three from one /64, whatever their host bits, then that /64 is limited; its neighbour is not.
            for address in ["2001:db8:0:f::1", "2001:db8:0:f::2", "2001:0DB8:0000:000F:ffff:ffff:ffff:fffe"] {
                #expect(try await register(from: address, "not json").status == 400)
            }
            let limited = try await register(from: "2001:db8:0:f:1234::9", "not json")
            #expect(limited.status == 429 && limited.headers["Retry-After"].first != nil, "\(limited.raw)")
            #expect(try await register(from: "2001:db8:0:e::1", "not json").status == 400)
            let long = "https://app.example/" + String(repeating: "a", count: 700)
            let tooLong = try await register(from: "198.51.100.1", #"{"redirect_uris":["# + [long + "1", long + "2", long + "3"].map { "\"\($0)\"" }.joined(separator: ",") + "]}")
            #expect(tooLong.status == 400 && tooLong.error == "invalid_redirect_uri", "\(tooLong.raw)")
            // Two unused registrations stand; a third waits, from any address.
            let first = try await register(from: "198.51.100.2")
            #expect(try await register(from: "198.51.100.3").status == 201)
            let full = try await register(from: "198.51.100.4")
            #expect(full.status == 503 && full.error == "temporarily_unavailable" && full.headers["Retry-After"].first == "60", "\(full.raw)")
            #expect(fixture.log.text.contains("max_unused_registrations"))
            // A registration a person authorized no longer counts.
            let clientID = try #require(first["client_id"])
            let parameters = Self.authorizeParameters(client: clientID)
            let answer = try await Self.consent(fixture, jar, parameters, page: try await Self.authorize(fixture, jar, parameters))
            #expect(Self.redirectParameters(answer)["code"] != nil, "\(answer.raw)")
            #expect(try await register(from: "198.51.100.5").status == 201)
            // An unused one lives ten minutes; the used one a month.
            let now = Date().timeIntervalSince1970
            let live = try await fixture.state.oauthClients(now: now + 601).map(\.clientID)
            #expect(live == [clientID], "\(live)")
        }
    }
}
