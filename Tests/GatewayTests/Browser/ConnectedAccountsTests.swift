import ConfigurationReading
import ConnectedAccounts
import DataPlane
import Foundation
import Gateway
import JOSE
import MCPPolicy
import ProviderLogin
import SecurityGuard
import TrafficCop
import StateSurface
import AsyncHTTPClient
import NIOCore
import PortcullisTestSupport
import Testing

/// Connected accounts (issue 66, first part): a signed-in person connects a service once, the
/// gateway their OAuth client there, through the real gateway and a service of the test's own.
@Suite("Connected accounts: connecting a service")
struct ConnectedAccountsTests {
    static func connection(_ service: FakeOAuthService, secretFile: String, issuer: String? = nil) -> ConnectionSettings {
        ConnectionSettings(
            name: "github", displayName: "GitHub", authorizationEndpoint: service.base + "/login/oauth/authorize",
            tokenEndpoint: service.base + "/login/oauth/access_token", revocationEndpoint: service.base + "/login/oauth/revoke", clientID: "portcullis-connect",
            clientSecretFile: secretFile, scopes: ["repo", "read:org"], issuer: issuer)
    }

    /// A gateway with the connection `github` at `service`; sign-in and connecting share the per-client
    /// rate limit, so a test that signs several people in from one address has room (`loginBurst`).
    static func gateway(
        _ service: FakeOAuthService, secretFile: String, loginPerMinute: Double = 6_000, loginBurst: Int = 200, routes: [ProxyRoute] = [], issuer: String? = nil
    ) async throws -> GatewayFixture {
        try await GatewayFixture { configuration in
            configuration.routes = routes
            configuration.connections = ConnectionsConfiguration(connections: [Self.connection(service, secretFile: secretFile, issuer: issuer)])
            configuration.rateLimits[.loginPerClient] = RateLimit(perMinute: loginPerMinute, burst: loginBurst)
        }
    }

    /// A browser signed in with the account form as `username`.
    static func signedIn(_ fixture: GatewayFixture, _ username: String) async throws -> CookieJar {
        let answer = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/sign_in", headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded")],
            body: "username=\(username)&password=correct+horse+battery&rd=%2F", followRedirects: false)
        var jar = CookieJar()
        jar.take(answer)
        fixture.remember(try #require(jar["portcullis"], "\(answer.raw)"))
        return jar
    }

    /// The connect page's button, pressed in `jar`'s browser: the answer (303 to the service).
    static func pressConnect(_ fixture: GatewayFixture, _ jar: CookieJar, rd: String = "%2Fafter") async throws -> Answer {
        let page = try await BrowserSessionTests.get(fixture, "/.portcullis/connect/github?rd=" + rd, jar)
        let nonce = try #require(page.raw.firstMatch(of: /name="nonce" value="([^"]+)"/)?.1, "\(page.raw)")
        return try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/connect/github?rd=" + rd,
            headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded"), jar.header], body: "nonce=\(nonce)",
            followRedirects: false)
    }

    /// `/gh`, acting as the person at the service (`upstream_credential: {connection: github}`).
    static func actingRoute(_ service: FakeOAuthService) -> ProxyRoute {
        var route = ProxyRoute(prefix: "/gh", upstream: service.base + "/api")
        route.upstreamCredential = .connection("github")
        return route
    }

    /// Connects the service in `jar`'s browser: the button, the service's approval, the callback's page.
    static func connect(_ fixture: GatewayFixture, _ jar: CookieJar) async throws {
        let back = try await serviceSendsBack(try #require(try await pressConnect(fixture, jar).headers.first(name: "location")))
        let completed = try await BrowserSessionTests.get(fixture, back, jar)
        #expect(completed.status == 303 && completed.headers.first(name: "location")?.hasPrefix("/.portcullis/connect/github/connected?rd=") == true, "the callback completes the connection: \(completed.raw)")
    }

    /// The service's answer to the authorization URL: the path and query of the gateway's callback it sends the browser to.
    static func serviceSendsBack(_ location: String) async throws -> String {
        let answer = try await Answer.request(.GET, location, followRedirects: false)
        let back = try #require(answer.headers.first(name: "location"), "\(answer.raw)")
        return BrowserSessionTests.pathOf(back)
    }

    @Test(
        "a signed-in person connects a service: the page names them and what is asked; only the page's own POST starts it, to the service with PKCE S256 and a state; the callback completes only in the browser and for the person that started it, once; the tokens are kept sealed to that person and connection and work at the service as them; no token reaches the log"
    )
    func connecting() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let fixture = try await Self.gateway(service, secretFile: secret)
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        let alice = try await Self.signedIn(fixture, "alice")
        let bob = try await Self.signedIn(fixture, "bob")

        // Unsigned: sign in first, then back to the page.
        let unsigned = try await BrowserSessionTests.get(fixture, "/.portcullis/connect/github", CookieJar())
        #expect(unsigned.status == 303 && unsigned.headers.first(name: "location")?.hasPrefix("/.portcullis/sign_in?rd=%2F.portcullis%2Fconnect%2Fgithub") == true, "\(unsigned.raw)")
        #expect(try await BrowserSessionTests.get(fixture, "/.portcullis/connect/gitlab", alice).status == 404)
        let page = try await BrowserSessionTests.get(fixture, "/.portcullis/connect/github", alice)
        #expect(page.status == 200 && page.raw.contains("alice") && page.raw.contains("<code>repo</code> <code>read:org</code>"), "\(page.raw)")
        #expect(page.headers.first(name: "content-security-policy")?.contains("form-action") == false, "the service's redirect chain is its own")

        // Only the page's own POST: another site's is refused, as is a nonce of another browser's.
        let crossSite = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/connect/github", headers: [("Origin", "https://evil.example"), ("Content-Type", "application/x-www-form-urlencoded"), alice.header],
            body: "nonce=x", followRedirects: false)
        #expect(crossSite.status == 403 && crossSite.headers.first(name: "x-portcullis-error") == "csrf_refused", "\(crossSite.raw)")
        let bobsPage = try await BrowserSessionTests.get(fixture, "/.portcullis/connect/github", bob)
        let bobsNonce = try #require(bobsPage.raw.firstMatch(of: /name="nonce" value="([^"]+)"/)?.1)
        let wrongNonce = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/connect/github",
            headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded"), alice.header], body: "nonce=\(bobsNonce)",
            followRedirects: false)
        #expect(wrongNonce.status == 403, "\(wrongNonce.raw)")

        // The start: to the service, PKCE S256, a state of 256 bits, the gateway's one callback.
        let started = try await Self.pressConnect(fixture, alice)
        let location = try #require(started.headers.first(name: "location"), "\(started.raw)")
        #expect(started.status == 303 && location.hasPrefix(service.base + "/login/oauth/authorize?"))
        let callback = try await Self.serviceSendsBack(location)
        let asked = service.books.withLock { $0.lastAuthorization }
        #expect(asked["code_challenge_method"] == "S256" && asked["code_challenge"]?.count == 43 && asked["state"]?.count == 43 && asked["scope"] == "repo read:org")
        #expect(asked["redirect_uri"] == fixture.server.gateway.effectivePublicURL + "/.portcullis/connect/callback")
        #expect(!location.contains("alice") && !location.contains("usr_"), "nothing about the person in the URL")

        // Another person's browser with alice's callback: refused, and the flow is spent.
        let stolen = try await BrowserSessionTests.get(fixture, callback, bob)
        #expect(stolen.status == 403 && stolen.headers.first(name: "x-portcullis-error") == "connect_browser_mismatch", "\(stolen.raw)")
        let afterTheft = try await BrowserSessionTests.get(fixture, callback, alice)
        #expect(afterTheft.status == 400 && afterTheft.headers.first(name: "x-portcullis-error") == "connect_flow_unknown", "\(afterTheft.raw)")
        #expect(try await fixture.state.connectedAccounts(userID: nil).isEmpty, "nothing connected by either")

        // Again, in alice's own browser: connected.
        let callbackAgain = try await Self.serviceSendsBack(try #require(try await Self.pressConnect(fixture, alice).headers.first(name: "location")))
        let completed = try await BrowserSessionTests.get(fixture, callbackAgain, alice)
        let shown = try #require(completed.headers.first(name: "location"), "\(completed.raw)")
        #expect(completed.status == 303 && shown == "/.portcullis/connect/github/connected?rd=%2Fafter", "on to a page whose address holds no code or state: \(shown)")
        for _ in 0..<2 {  // shown, then shown again on a reload
            let done = try await BrowserSessionTests.get(fixture, shown, alice)
            #expect(done.status == 200 && done.raw.contains("GitHub connected") && done.raw.contains("href=\"/after\""), "\(done.raw)")
        }
        let notBobs = try await BrowserSessionTests.get(fixture, shown, bob)
        #expect(notBobs.status == 303 && notBobs.headers.first(name: "location") == "/.portcullis/connect/github?rd=%2Fafter", "bob has not connected: to the connect page: \(notBobs.raw)")
        let replayed = try await BrowserSessionTests.get(fixture, callbackAgain, alice)
        #expect(replayed.headers.first(name: "x-portcullis-error") == "connect_flow_unknown", "a callback is used once")

        // Kept sealed: the store holds no token; it opens for alice at github only, and works at the service as her.
        let issued = service.books.withLock { Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) }
        for token in issued { fixture.remember(token) }
        let aliceID = try #require(try await fixture.state.user(tenantID: "default", username: "alice")).id
        let account = try #require(try await fixture.state.connectedAccount(userID: aliceID, tenantID: "default", connection: "github"))
        #expect(account.scope == "repo read:org" && account.refreshToken != nil && (account.expiresAt ?? 0) > Date().timeIntervalSince1970 + 28_000)
        for file in ["/portcullis.sqlite", "/portcullis.sqlite-wal"] {
            let bytes = (try? Data(contentsOf: URL(fileURLWithPath: fixture.directory + file))) ?? Data()
            for token in issued { #expect(bytes.range(of: Data(token.utf8)) == nil, "\(file) holds a token in the clear") }
        }
        let accounts = fixture.server.services.connectedAccounts
        let owner = ConnectionTokenVault.Owner(userID: aliceID, tenantID: "default", connection: "github")
        let token = try #require(try await accounts.accessToken(for: owner))
        #expect(service.books.withLock { $0.accessTokens[token] } == "octocat")
        let vault = try #require(accounts.directory.vault)
        #expect(vault.open(account.accessToken, kind: .accessToken, for: ConnectionTokenVault.Owner(userID: "usr_other", tenantID: "default", connection: "github")) == nil)
        #expect(vault.open(account.accessToken, kind: .accessToken, for: ConnectionTokenVault.Owner(userID: aliceID, tenantID: "default", connection: "drive")) == nil)
        #expect(vault.open(account.accessToken, kind: .refreshToken, for: owner) == nil)
        let user = try await Answer.request(.GET, service.base + "/api/user", headers: [("Authorization", "Bearer " + token)])
        #expect(user.json["login"] == "octocat")

        // Declined at the service: nothing is kept.
        service.books.withLock { $0.denies = true }
        let declinedBack = try await Self.serviceSendsBack(try #require(try await Self.pressConnect(fixture, bob).headers.first(name: "location")))
        let declined = try await BrowserSessionTests.get(fixture, declinedBack, bob)
        #expect(declined.status == 400 && declined.headers.first(name: "x-portcullis-error") == "connect_declined", "\(declined.raw)")
        #expect(try await fixture.state.connectedAccounts(userID: nil).map(\.userID) == [aliceID])

        try await fixture.stop()
        try await service.stop()
    }

    @Test(
        "a connection that names its issuer takes a way back only with iss equal to it (RFC 9207): another service's name, or none, is 400 connect_issuer_mismatch before any code is presented or an error believed, and the flow is spent; a connection without issuer ignores iss"
    )
    func issuerIdentification() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let fixture = try await Self.gateway(service, secretFile: secret, issuer: service.base)
        try await fixture.addUser("alice")
        let alice = try await Self.signedIn(fixture, "alice")
        for (named, declines) in [(Optional("https://evil.example"), false), (nil, false), (Optional(service.base + "/"), false), (Optional("https://evil.example"), true), (nil, true)] {
            service.books.withLock {
                $0.namesItself = named
                $0.denies = declines
            }
            let back = try await Self.serviceSendsBack(try #require(try await Self.pressConnect(fixture, alice).headers.first(name: "location")))
            let refused = try await BrowserSessionTests.get(fixture, back, alice)
            #expect(refused.status == 400 && refused.headers.first(name: "x-portcullis-error") == "connect_issuer_mismatch", "\(named ?? "no iss"): \(refused.raw)")
            let again = try await BrowserSessionTests.get(fixture, back, alice)
            #expect(again.headers.first(name: "x-portcullis-error") == "connect_flow_unknown", "the flow is spent")
        }
        #expect(service.books.withLock { $0.tokenRequests } == 0, "no code was presented at the token endpoint")
        #expect(try await fixture.state.connectedAccounts(userID: nil).isEmpty)
        service.books.withLock {
            $0.namesItself = service.base
            $0.denies = false
        }
        try await Self.connect(fixture, alice)
        try await fixture.stop()

        // Without issuer, an iss is neither required nor read.
        let plain = try await Self.gateway(service, secretFile: secret)
        try await plain.addUser("alice")
        service.books.withLock { $0.namesItself = "https://evil.example" }
        try await Self.connect(plain, try await Self.signedIn(plain, "alice"))
        for token in service.books.withLock({ Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) }) { plain.remember(token) }
        try await plain.stop()
        try await service.stop()
    }

    @Test("a route with upstream_credential sends the person's own token at the connected service as Authorization: Bearer (never the client's), so the service answers as them; a person who has not connected it is refused 403 connection_required naming where to connect")
    func upstreamCredential() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let fixture = try await Self.gateway(service, secretFile: secret, routes: [Self.actingRoute(service)])
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        let alice = try await Self.signedIn(fixture, "alice")
        try await Self.connect(fixture, alice)
        for token in service.books.withLock({ Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) }) { fixture.remember(token) }

        let aliceLogin = try await fixture.login("alice")
        for _ in 0..<2 {  // the store's read, then the cache's answer
            let answer = try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: aliceLogin.accessToken)
            #expect(answer.status == 200 && answer.json["login"] == "octocat", "\(answer.raw)")
        }
        let bobLogin = try await fixture.login("bob")
        let refused = try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: bobLogin.accessToken)
        #expect(refused.status == 403 && refused.json["error"] == "connection_required", "\(refused.raw)")
        #expect(refused.json["message"]?.stringValue?.contains("/.portcullis/connect/github") == true)
        let navigated = try await Answer.request(
            .GET, fixture.baseURL + "/gh/user?tab=repos", bearer: bobLogin.accessToken, headers: [("Sec-Fetch-Mode", "navigate"), ("Accept", "text/html")],
            followRedirects: false)
        let location = navigated.headers.first(name: "location") ?? ""
        #expect(navigated.status == 303 && location.contains("/.portcullis/connect/github?rd="), "a page load goes to the connect page: \(navigated.raw)")
        #expect(location.removingPercentEncoding?.hasSuffix("/gh/user?tab=repos") == true, "and back to the page: \(location)")
        try await fixture.stop()
        try await service.stop()
    }

    @Test(
        "a disconnect ends the connection's use at once: a request under way upstream with its token is cut within a second, the next is refused connection_required (no minute of cached token), and another connection's or person's use goes on"
    )
    func disconnectEndsUse() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let fixture = try await Self.gateway(service, secretFile: secret, routes: [Self.actingRoute(service)])
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        var jars: [String: CookieJar] = [:]
        for name in ["alice", "bob"] {
            let jar = try await Self.signedIn(fixture, name)
            service.books.withLock { $0.person = name == "alice" ? "octocat" : "hubot" }
            try await Self.connect(fixture, jar)
            jars[name] = jar
        }
        for token in service.books.withLock({ Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) }) { fixture.remember(token) }
        let alice = try await fixture.login("alice")
        let bob = try await fixture.login("bob")
        for login in [alice, bob] {  // both tokens cached now
            #expect(try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: login.accessToken).status == 200)
        }
        let baseURL = fixture.baseURL
        let aliceSlow = Task { try await Answer.request(.GET, baseURL + "/gh/slow", bearer: alice.accessToken) }
        let bobSlow = Task { try await Answer.request(.GET, baseURL + "/gh/slow", bearer: bob.accessToken) }
        try await Task.sleep(for: .milliseconds(300))

        let jar = try #require(jars["alice"])
        let page = try await BrowserSessionTests.get(fixture, "/.portcullis/agents", jar)
        let nonce = try #require(page.raw.firstMatch(of: /name="nonce" value="([^"]+)"/)?.1)
        let disconnectedAt = Date()
        let done = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/connect/github/disconnect",
            headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded"), jar.header], body: "nonce=\(nonce)",
            followRedirects: false)
        #expect(done.status == 303, "\(done.raw)")
        // At once, on the instance that was asked: not a tick of the access-change feed later (0.5 s on SQLite),
        // when a request sent meanwhile would still have carried the token.
        let atOnce = try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: alice.accessToken)
        #expect(atOnce.status == 403 && atOnce.json["error"] == "connection_required", "the next request right after the 303: \(atOnce.raw)")
        let cut = try await aliceSlow.value
        let waited = Date().timeIntervalSince(disconnectedAt)
        #expect(cut.status == 403 && cut.json["error"] == "access_ended", "\(cut.raw)")
        // The service answers after 5 s: a 403 well before that was the gateway's cut (about 0.5 s on an idle machine, the feed's tick).
        #expect(waited < 4, "the request under way ended \(waited) s after the disconnect, not when the service answered")
        let next = try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: alice.accessToken)
        #expect(next.status == 403 && next.json["error"] == "connection_required", "\(next.raw)")
        let bobs = try await bobSlow.value
        #expect(bobs.status == 200 && bobs.json["slow"] == true, "another person's request is untouched: \(bobs.raw)")
        let bobNext = try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: bob.accessToken)
        #expect(bobNext.status == 200 && bobNext.json["login"] == "hubot", "\(bobNext.raw)")
        try await fixture.stop()
        try await service.stop()
    }

    @Test(
        "a token about to expire is refreshed before it is sent: of ten requests that need it at once, one refresh reaches the service (a rotating refresh token used once) and all ten go upstream with the new token; a refresh the service refuses forgets the account, and the person is asked to connect again"
    )
    func refreshBeforeExpiry() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let fixture = try await Self.gateway(service, secretFile: secret, routes: [Self.actingRoute(service)])
        try await fixture.addUser("alice")
        let jar = try await Self.signedIn(fixture, "alice")
        // Issued to live 2 s: past half of that (the refresh margin of a token that short) a second later.
        service.books.withLock { $0.tokenLifetime = 2 }
        try await Self.connect(fixture, jar)
        let first = service.books.withLock { (Array($0.accessTokens.keys), Array($0.refreshTokens.keys)) }
        service.books.withLock { $0.tokenLifetime = 28_800 }
        let login = try await fixture.login("alice")
        try await Task.sleep(for: .milliseconds(1_100))
        let baseURL = fixture.baseURL
        let answers = try await withThrowingTaskGroup(of: Answer.self) { group in
            for _ in 0..<10 { group.addTask { try await Answer.request(.GET, baseURL + "/gh/user", bearer: login.accessToken) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.status == 200 && $0.json["login"] == "octocat" }, "\(answers.map(\.raw))")
        #expect(service.books.withLock { $0.refreshRequests } == 1, "one refresh for ten requests")
        let books = service.books.withLock { $0 }
        #expect(books.accessTokens.count == 1 && !first.0.contains(books.accessTokens.keys.first ?? ""), "the old token ended at the service; the new one worked")
        for token in first.0 + first.1 + Array(books.accessTokens.keys) + Array(books.refreshTokens.keys) { fixture.remember(token) }
        let aliceID = try #require(try await fixture.state.user(tenantID: "default", username: "alice")).id
        let kept = try #require(try await fixture.state.connectedAccount(userID: aliceID, tenantID: "default", connection: "github"))
        #expect((kept.expiresAt ?? 0) > Date().timeIntervalSince1970 + 28_000 && kept.lastUsedAt != nil, "the new expiry and the use are kept")

        // Connected again with a short-lived token whose refresh the service then refuses (invalid_grant).
        service.books.withLock { $0.tokenLifetime = 2 }
        try await Self.connect(fixture, jar)
        for token in service.books.withLock({ Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) }) { fixture.remember(token) }
        service.books.withLock { $0.refreshTokens.removeAll() }
        try await Task.sleep(for: .milliseconds(1_100))
        // Connecting again drops the token kept in memory, on every instance, within a second (the feed).
        var refused = try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: login.accessToken)
        for _ in 0..<20 where refused.status == 200 {
            try await Task.sleep(for: .milliseconds(100))
            refused = try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: login.accessToken)
        }
        #expect(refused.status == 403 && refused.json["error"] == "connection_required", "\(refused.raw)")
        #expect(try await fixture.state.connectedAccount(userID: aliceID, tenantID: "default", connection: "github") == nil, "a refused refresh forgets the account")
        try await fixture.stop()
        try await service.stop()
    }

    @Test(
        "a disconnect ends an MCP tool call under way that carries the connected token: its SSE stream ends between two events within seconds (not the minute the server would take), the MCP server is told notifications/cancelled without the token, and the next call asks to connect again"
    )
    func disconnectEndsMCPCall() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let seen = EventStreamUpstream.Seen()
        let upstream = try await EventStreamUpstream.start(seen: seen)
        var route = try MCPRouteTests.mcpRoute("/mcp/s", upstream: upstream.port, base: "")
        route.upstreamCredential = .connection("github")
        let fixture = try await Self.gateway(service, secretFile: secret, routes: [route])
        defer { Task { try? await upstream.stop(); try? await service.stop() } }
        try await fixture.addUser("alice")
        let aliceID = try #require(try await fixture.state.user(tenantID: "default", username: "alice")).id
        let jar = try await Self.signedIn(fixture, "alice")
        try await Self.connect(fixture, jar)
        let connected = service.books.withLock { Array($0.accessTokens.keys) }
        for token in connected + service.books.withLock({ Array($0.refreshTokens.keys) }) { fixture.remember(token) }
        let token = try MCPRouteTests.token(fixture, audience: MCPRouteTests.publicURL + "/mcp/s", subject: aliceID)
        func call() -> HTTPClientRequest {
            var request = HTTPClientRequest(url: fixture.baseURL + "/mcp/s")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer " + token)
            request.headers.add(name: "Accept", value: "application/json, text/event-stream")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "Mcp-Session-Id", value: "mcp-session-acting")
            request.headers.add(name: "MCP-Protocol-Version", value: "2025-11-25")
            request.body = .bytes(ByteBuffer(string: #"{"jsonrpc":"2.0","id":"call-9","method":"tools/call","params":{"name":"slow"}}"#))
            return request
        }
        let stream = HeldStream(call())
        await stream.wait(seconds: TimeBounds.seconds(5)) { $0.text.contains("\"progress\":2") }
        #expect(stream.text.contains("\"progress\":2"), "the upstream's events did not come: \(stream.text)")
        #expect(seen.callAuthorizations == ["Bearer " + (connected.first ?? "-")], "the call went upstream with the person's connected token, and nothing else")
        let page = try await BrowserSessionTests.get(fixture, "/.portcullis/agents", jar)
        let nonce = try #require(page.raw.firstMatch(of: /name="nonce" value="([^"]+)"/)?.1)
        let done = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/connect/github/disconnect",
            headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded"), jar.header], body: "nonce=\(nonce)",
            followRedirects: false)
        #expect(done.status == 303, "\(done.raw)")
        let disconnected = ContinuousClock.now
        // The upstream's stream runs a minute: an end within seconds is the disconnect's (about 0.5 s idle, the feed's tick).
        await stream.wait(seconds: TimeBounds.seconds(5)) { $0.ended != nil }
        let ended = try #require(stream.ended, "the stream was not ended within \(TimeBounds.seconds(5)) s of the disconnect")
        #expect(ended - disconnected < .seconds(TimeBounds.seconds(3)), "ended \(ended - disconnected) after the disconnect")
        #expect(!stream.failed && stream.text.hasSuffix("}\n\n"), "ended between two events, not cut in one")
        let deadline = ContinuousClock.now + .seconds(TimeBounds.seconds(5))
        while seen.cancellations.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let cancellation = try #require(seen.cancellations.first, "the MCP server was not told to stop")
        #expect(cancellation.body.contains("call-9") && cancellation.hasAssertion, "\(cancellation.body)")
        #expect(cancellation.authorization == nil, "the cancel carries no token of the ended connection (it carried an Authorization field)")
        let again = try await fixture.send(
            .POST, "/mcp/s", bearer: token, headers: [("MCP-Protocol-Version", "2025-11-25")],
            body: #"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"slow"}}"#)
        #expect(again.status == 200 && again.raw.contains("-32042"), "the next call asks to connect again: \(again.raw)")
        try await fixture.stop()  // and the log holds none of the service's tokens
    }

    @Test(
        "on an MCP route, a tool call of a person who has not connected the service is answered with a URL elicitation naming the connect page (-32042 with an elicitation id; an InputRequiredResult for 2026-07-28), its link bound to that person: another person is refused it, it can start connecting again until the person has connected, and then it is used up; initialize and ping go on without a credential; once connected, the retried call goes upstream with the person's token"
    )
    func mcpElicitation() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let upstream = try await RecordingUpstream.start()
        var route = try MCPRouteTests.mcpRoute("/mcp/gh", upstream: upstream.port)
        route.upstreamCredential = .connection("github")
        let fixture = try await Self.gateway(service, secretFile: secret, routes: [route])
        try await fixture.addUser("alice")
        let aliceID = try #require(try await fixture.state.user(tenantID: "default", username: "alice")).id
        let token = try MCPRouteTests.token(fixture, audience: MCPRouteTests.publicURL + "/mcp/gh", subject: aliceID)
        let call = #"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search"}}"#
        let initialize = #"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"t","version":"1"}}}"#
        for body in [initialize, MCPRouteTests.ping] {
            let passed = try await fixture.send(.POST, "/mcp/gh", bearer: token, headers: [("Content-Type", "application/json")], body: body)
            #expect(passed.status == 200 && passed.json["path"]?.stringValue == "/mcp" && passed.receivedHeaders["authorization"] == nil, "\(passed.raw)")
        }
        var ids: [String] = []
        var link = ""
        for _ in 0..<2 {
            let asked = try await fixture.send(.POST, "/mcp/gh", bearer: token, headers: [("Content-Type", "application/json")], body: call)
            #expect(asked.status == 200 && asked.json["id"] == 7, "\(asked.raw)")
            let error = try #require(asked.json["error"]?.objectValue, "\(asked.raw)")
            #expect(error["code"] == -32042 && error["data"]?.objectValue?["code"] == "connection_required")
            guard case .array(let elicitations)? = error["data"]?.objectValue?["elicitations"], case .object(let elicitation)? = elicitations.first else {
                Issue.record("no elicitation: \(asked.raw)")
                continue
            }
            let id = try #require(elicitation["elicitationId"]?.stringValue)
            #expect(elicitation["mode"] == "url" && elicitation["url"]?.stringValue?.hasSuffix("/.portcullis/connect/github?elicitation=" + id) == true, "\(elicitation)")
            #expect(asked.json["path"] == nil, "nothing reached the MCP server")
            #expect(error["message"]?.stringValue?.contains(elicitation["url"]?.stringValue ?? "-") == true, "a client without URL elicitation shows the link")
            ids.append(id)
            link = elicitation["url"]?.stringValue ?? ""
        }
        #expect(Set(ids).count == 1 && ids[0].count >= 20, "an agent asking again within ten minutes gets the link it was given")
        let newer = try await fixture.send(
            .POST, "/mcp/gh", bearer: token, headers: [("Content-Type", "application/json"), ("MCP-Protocol-Version", "2026-07-28")], body: call)
        let input = newer.json["result"]?.objectValue?["inputRequests"]?.objectValue?["connect_github"]?.objectValue
        #expect(newer.json["result"]?.objectValue?["resultType"] == "input_required" && input?["method"] == "elicitation/create", "\(newer.raw)")
        #expect(input?["params"]?.objectValue?["mode"] == "url" && input?["params"]?.objectValue?["url"]?.stringValue == link, "\(newer.raw)")

        // The link opens for alice only, and starts one connecting.
        let path = String(try #require(link.range(of: "/.portcullis/").map { link[$0.lowerBound...] }))
        try await fixture.addUser("bob")
        let bob = try await Self.signedIn(fixture, "bob")
        let notBobs = try await BrowserSessionTests.get(fixture, path, bob)
        #expect(notBobs.status == 403 && notBobs.raw.contains("connect_elicitation_other_person") || notBobs.headers.first(name: "x-portcullis-error") == "connect_elicitation_other_person", "\(notBobs.raw)")
        let jar = try await Self.signedIn(fixture, "alice")
        let page = try await BrowserSessionTests.get(fixture, path, jar)
        #expect(page.status == 200 && page.raw.contains("elicitation=" + ids[0]), "\(page.raw)")
        let nonce = try #require(page.raw.firstMatch(of: /name="nonce" value="([^"]+)"/)?.1)
        let start = { () async throws -> Answer in
            try await Answer.request(
                .POST, fixture.baseURL + path, headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded"), jar.header],
                body: "nonce=\(nonce)", followRedirects: false)
        }
        #expect(try await start().status == 303, "a connect abandoned at the service starts again from the same link")
        let started = try await start()
        #expect(started.status == 303, "\(started.raw)")
        let back = try await Self.serviceSendsBack(try #require(started.headers.first(name: "location")))
        #expect(try await BrowserSessionTests.get(fixture, back, jar).status == 303)
        let used = try await BrowserSessionTests.get(fixture, path, jar)
        #expect(
            used.status == 400 && (used.raw.contains("connect_elicitation_unknown") || used.headers.first(name: "x-portcullis-error") == "connect_elicitation_unknown"),
            "once connected, the link is used up: \(used.raw)")
        let issued = try #require(service.books.withLock { $0.accessTokens.keys.first })
        for token in service.books.withLock({ Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) }) { fixture.remember(token) }
        let retried = try await fixture.send(.POST, "/mcp/gh", bearer: token, headers: [("Content-Type", "application/json")], body: call)
        #expect(retried.status == 200 && retried.receivedHeaders["authorization"] == ["Bearer " + issued], "\(retried.raw)")
        try await fixture.stop()
        try await upstream.stop()
        try await service.stop()
    }

    @Test(
        "connecting is told to the client that was given the link, on its open GET stream (2025-11-25): notifications/elicitation/complete with its elicitationId, an event of its own between the MCP server's, never inside one, on a route that filters lists too; another client's stream, a 2026-07-28 client's and a compressed one hear nothing"
    )
    func elicitationCompleteOnStream() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let upstream = try await EventStreamUpstream.start()
        var route = try MCPRouteTests.mcpRoute("/mcp/s", upstream: upstream.port, base: "")
        route.upstreamCredential = .connection("github")
        // The same server behind a route with tool rules: its GET streams pass through the list filter.
        var filtered = try MCPRouteTests.mcpRoute(
            "/mcp/f", upstream: upstream.port, policy: MCPCallPolicy(tools: [MCPRule(pattern: try #require(NamePattern("*")))]), base: "")
        filtered.upstreamCredential = .connection("github")
        let fixture = try await Self.gateway(service, secretFile: secret, routes: [route, filtered])
        defer { Task { try? await upstream.stop(); try? await service.stop() } }
        try await fixture.addUser("alice")
        let aliceID = try #require(try await fixture.state.user(tenantID: "default", username: "alice")).id
        let resource = MCPRouteTests.publicURL + "/mcp/s"
        let agent = try MCPRouteTests.token(fixture, audience: resource, subject: aliceID, clientID: "https://agent.example/a/client.json")
        let agentAtFiltered = try MCPRouteTests.token(
            fixture, audience: MCPRouteTests.publicURL + "/mcp/f", subject: aliceID, clientID: "https://agent.example/a/client.json")
        let other = try MCPRouteTests.token(fixture, audience: resource, subject: aliceID, clientID: "desk-app")
        let asked = try await fixture.send(
            .POST, "/mcp/s", bearer: agent, headers: [("Content-Type", "application/json"), ("MCP-Protocol-Version", "2025-11-25")],
            body: #"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search"}}"#)
        guard case .array(let elicitations)? = asked.json["error"]?.objectValue?["data"]?.objectValue?["elicitations"], case .object(let elicitation)? = elicitations.first,
            let id = elicitation["elicitationId"]?.stringValue, let link = elicitation["url"]?.stringValue
        else {
            Issue.record("no elicitation: \(asked.raw)")
            return
        }
        // The MCP server's events come in two halves 150 ms apart (?split=1): the notice must wait for an event's end.
        func stream(_ token: String, version: String, path: String = "/mcp/s?split=1") -> HeldStream {
            var request = HTTPClientRequest(url: fixture.baseURL + path)
            request.headers.add(name: "Authorization", value: "Bearer " + token)
            request.headers.add(name: "Accept", value: "text/event-stream")
            request.headers.add(name: "Mcp-Session-Id", value: "mcp-session-listening")
            request.headers.add(name: "MCP-Protocol-Version", value: version)
            return HeldStream(request)
        }
        let (listening, otherClient, newer) = (stream(agent, version: "2025-11-25"), stream(other, version: "2025-11-25"), stream(agent, version: "2026-07-28"))
        let (throughFilter, compressed) = (
            stream(agentAtFiltered, version: "2025-11-25", path: "/mcp/f?split=1"), stream(agent, version: "2025-11-25", path: "/mcp/s?encoded=1")
        )
        let streams = [listening, otherClient, newer, throughFilter, compressed]
        defer { for held in streams { held.task.cancel() } }
        for held in streams { await held.wait(seconds: TimeBounds.seconds(5)) { $0.text.contains("\"progress\":1}") } }
        #expect(!listening.text.contains("elicitation/complete"), "nothing is told before the person connects")

        let jar = try await Self.signedIn(fixture, "alice")
        let path = String(try #require(link.range(of: "/.portcullis/").map { link[$0.lowerBound...] }))
        let page = try await BrowserSessionTests.get(fixture, path, jar)
        let nonce = try #require(page.raw.firstMatch(of: /name="nonce" value="([^"]+)"/)?.1)
        let started = try await Answer.request(
            .POST, fixture.baseURL + path, headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded"), jar.header],
            body: "nonce=\(nonce)", followRedirects: false)
        let back = try await Self.serviceSendsBack(try #require(started.headers.first(name: "location")))
        #expect(try await BrowserSessionTests.get(fixture, back, jar).status == 303)
        for token in service.books.withLock({ Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) }) { fixture.remember(token) }

        let notice = #"{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"\#(id)"}}"#
        await listening.wait(seconds: TimeBounds.seconds(5)) { $0.text.contains("elicitation/complete") }
        let text = listening.text
        #expect(text.contains("event: message\ndata: " + notice + "\n\n"), "the client that was given the link hears its end: \(text.suffix(600))")
        let events = text.components(separatedBy: "\n\n").dropLast()
        #expect(
            events.allSatisfy { $0.hasPrefix("event: message\ndata: {") && $0.hasSuffix("}") && $0.components(separatedBy: "\n").count == 2 },
            "every event whole, the gateway's between two of the server's: \(text.suffix(600))")
        await throughFilter.wait(seconds: TimeBounds.seconds(5)) { $0.text.contains("elicitation/complete") }
        #expect(throughFilter.text.contains("event: message\ndata: " + notice + "\n\n"), "a stream through the list filter hears it too")
        #expect(
            throughFilter.text.components(separatedBy: "\n\n").dropLast().allSatisfy { $0.hasPrefix("event: message\ndata: {") && $0.hasSuffix("}") },
            "between two of the filter's whole events: \(throughFilter.text.suffix(600))")
        await listening.wait(seconds: 0.5) { _ in false }
        #expect(!otherClient.text.contains("elicitation/complete") && !newer.text.contains("elicitation/complete"), "only that client, and only on 2025-11-25")
        #expect(!compressed.text.contains("elicitation/complete") && compressed.text.contains("\"progress\":3}"), "a compressed stream is not added to: \(compressed.failed) \(compressed.text.suffix(200))")
        #expect(otherClient.text.contains("\"progress\":3}") && !otherClient.failed, "the other streams go on")
        // The clients go (their streams would run two and a half minutes), then the gateway.
        for held in streams { held.task.cancel() }
        for held in streams { await held.wait(seconds: TimeBounds.seconds(5)) { $0.ended != nil } }
        try await fixture.stop()
    }

    @Test(
        "a refresh the service refuses for the gateway's own fault (invalid_client: a client secret rotated there) forgets nobody's account: the token is sent while it lasts, then 503 connection_unavailable, and the refresh works again once the secret is right"
    )
    func refreshRefusedForTheClient() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let fixture = try await Self.gateway(service, secretFile: secret, routes: [Self.actingRoute(service)])
        try await fixture.addUser("alice")
        let jar = try await Self.signedIn(fixture, "alice")
        // A 6 s token is refreshed from half its life (3 s) on; the times are measured from the
        // connection (its token was given just before), so a slow machine moves them together.
        service.books.withLock { $0.tokenLifetime = 6 }
        let login = try await fixture.login("alice")
        try await Self.connect(fixture, jar)
        let connected = ContinuousClock.now
        for token in service.books.withLock({ Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) }) { fixture.remember(token) }
        service.books.withLock { $0.clientSecret = "rotated-at-the-service" }
        try await Task.sleep(until: connected + .milliseconds(3_300))
        let lasting = try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: login.accessToken)
        #expect(lasting.status == 200 && lasting.json["login"] == "octocat", "the token still lasts: \(lasting.raw)")
        try await Task.sleep(until: connected + .milliseconds(6_300))
        let expired = try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: login.accessToken)
        #expect(expired.status == 503 && expired.json["error"] == "connection_unavailable", "\(expired.raw)")
        let aliceID = try #require(try await fixture.state.user(tenantID: "default", username: "alice")).id
        #expect(try await fixture.state.connectedAccount(userID: aliceID, tenantID: "default", connection: "github") != nil, "kept")
        service.books.withLock { $0.clientSecret = "service-secret-of-portcullis" }
        let mended = try await Answer.request(.GET, fixture.baseURL + "/gh/user", bearer: login.accessToken)
        #expect(mended.status == 200 && mended.json["login"] == "octocat", "\(mended.raw)")
        for token in service.books.withLock({ Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) }) { fixture.remember(token) }
        try await fixture.stop()
        try await service.stop()
    }

    @Test("starting a connection and its callback count against the client's rate limit (rate_limits.login_per_client), as signing in does: past it, 429")
    func rateLimited() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        // One for the sign-in, one for the start, one for its callback; the next start is one too many.
        let fixture = try await Self.gateway(service, secretFile: secret, loginPerMinute: 1, loginBurst: 3)
        try await fixture.addUser("alice")
        let alice = try await Self.signedIn(fixture, "alice")
        try await Self.connect(fixture, alice)
        let limited = try await Self.pressConnect(fixture, alice)
        #expect(limited.status == 429, "\(limited.raw)")
        for token in service.books.withLock({ Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) }) { fixture.remember(token) }
        try await fixture.stop()
        try await service.stop()
    }

    @Test(
        "the agents page lists the person's connected services with their scopes, each with a Disconnect button; only that page's POST disconnects: the tokens are forgotten at once and the service is told (RFC 7009, the refresh token), and another person's account is untouched"
    )
    func disconnecting() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let fixture = try await Self.gateway(service, secretFile: secret)
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        let alice = try await Self.signedIn(fixture, "alice")
        let bob = try await Self.signedIn(fixture, "bob")
        for jar in [alice, bob] {
            try await Self.connect(fixture, jar)
        }
        let issued = service.books.withLock { $0 }
        for token in Array(issued.accessTokens.keys) + Array(issued.refreshTokens.keys) { fixture.remember(token) }

        let page = try await BrowserSessionTests.get(fixture, "/.portcullis/agents", alice)
        #expect(page.status == 200 && page.raw.contains("<h3>GitHub</h3>") && page.raw.contains("<code>read:org</code>"), "\(page.raw)")
        #expect(page.raw.contains("action=\"/.portcullis/connect/github/disconnect\""))
        let nonce = try #require(page.raw.firstMatch(of: /name="nonce" value="([^"]+)"/)?.1)
        let crossSite = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/connect/github/disconnect",
            headers: [("Origin", "https://evil.example"), ("Content-Type", "application/x-www-form-urlencoded"), alice.header], body: "nonce=\(nonce)",
            followRedirects: false)
        #expect(crossSite.status == 403, "\(crossSite.raw)")
        let done = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/connect/github/disconnect",
            headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded"), alice.header], body: "nonce=\(nonce)",
            followRedirects: false)
        #expect(done.status == 303 && done.headers.first(name: "location") == "/.portcullis/agents?done=disconnected", "\(done.raw)")
        let bobID = try #require(try await fixture.state.user(tenantID: "default", username: "bob")).id
        #expect(try await fixture.state.connectedAccounts(userID: nil).map(\.userID) == [bobID], "alice's forgotten, bob's kept")
        let revoked = service.books.withLock { $0.revoked }
        #expect(revoked.count == 1 && revoked.first?.hint == "refresh_token" && issued.refreshTokens[revoked[0].token] == "octocat", "the service was told")
        #expect(try await BrowserSessionTests.get(fixture, "/.portcullis/agents?done=disconnected", alice).raw.contains("You have connected no service."))
        // Again: nothing left to disconnect.
        let again = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/connect/github/disconnect",
            headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded"), alice.header], body: "nonce=\(nonce)",
            followRedirects: false)
        #expect(again.headers.first(name: "location") == "/.portcullis/agents?done=gone")
        try await fixture.stop()
        try await service.stop()
    }

    @Test("a service's token answer is read as RFC 6749 says and no further: a 200 with an error and no token is a refusal (GitHub's way), fields a sign-in never read are left out when malformed, scopes are kept space-separated (commas too) or as asked, and only visible-ASCII tokens are kept")
    func tokenAnswers() throws {
        #expect(throws: TokenEndpointFailure.refused("bad_verification_code")) {
            try TokenEndpoint.read(status: .ok, body: Array(#"{"error":"bad_verification_code","error_description":"The code passed is incorrect"}"#.utf8))
        }
        let lenient = try TokenEndpoint.read(status: .ok, body: Array(#"{"access_token":"gho_x","token_type":"bearer","expires_in":-5,"scope":7}"#.utf8))
        #expect(lenient.accessToken == "gho_x" && lenient.expiresIn == nil && lenient.scope == nil && lenient.tokenType == "bearer")
        #expect(try TokenEndpoint.read(status: .ok, body: Array(#"{"access_token":"a","expires_in":"3600"}"#.utf8)).expiresIn == 3600)
        #expect(ConnectedAccountService.grantedScope("repo,read:org", asked: ["x"]) == "repo read:org")
        #expect(ConnectedAccountService.grantedScope("repo\nFORGED line", asked: ["repo"]) == "repo", "a newline is not a scope: the asked ones are kept")
        #expect(ConnectedAccountService.grantedScope(nil, asked: ["repo", "gist"]) == "repo gist")
        #expect(ConnectedAccountService.isTokenText("gho_16C7e42F292c6912E7710c838347Ae178B4a"))
        #expect(!ConnectedAccountService.isTokenText("a\r\nX-Injected: 1") && !ConnectedAccountService.isTokenText("") && !ConnectedAccountService.isTokenText("with space"))
    }

    @Test("a route's upstream_credential names a configured connection: read with the route; an unknown connection, an unknown kind, or one on a route without an upstream stop start naming the key")
    func upstreamCredentialConfiguration() async throws {
        func read(_ routes: String, connections: Bool = true) async throws -> GatewayConfiguration {
            let path = NSTemporaryDirectory() + "upstream-credential-" + UUID().uuidString + ".yaml"
            let connection = """
                connections:
                  - {name: github, authorization_endpoint: https://github.com/login/oauth/authorize, token_endpoint: https://github.com/login/oauth/access_token, client_id: x, client_secret_file: keys/github.secret}

                """
            try ((connections ? connection : "") + "gateway:\n  routes:\n" + routes).write(toFile: path, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: path) }
            return try GatewayConfiguration(reading: try await ConfigurationValues.load(path: path, environment: false))
        }
        let good = try await read("    - {prefix: /gh, upstream: http://127.0.0.1:9100, upstream_credential: {connection: github}}\n")
        #expect(good.routes.first?.upstreamCredential == .connection("github"))
        let cases: [(String, Bool, String)] = [
            ("    - {prefix: /gh, upstream: http://127.0.0.1:9100, upstream_credential: {connection: gitlab}}\n", true, "gateway.routes[0].upstream_credential.connection"),
            ("    - {prefix: /gh, upstream: http://127.0.0.1:9100, upstream_credential: {connection: github}}\n", false, "none is configured"),
            ("    - {prefix: /gh, upstream: http://127.0.0.1:9100, upstream_credential: {token: x}}\n", true, "gateway.routes[0].upstream_credential.token"),
            ("    - {prefix: /gh, upstream_credential: {connection: github}}\n", true, "gateway.routes[0].upstream_credential"),
        ]
        for (routes, connections, key) in cases {
            await #expect(performing: { _ = try await read(routes, connections: connections) }, throws: { ($0 as? ConfigurationError)?.message.contains(key) == true })
        }
    }

    @Test("connections read themselves: an unknown key, a bad name, an endpoint neither https nor loopback http, a missing client, an unreadable ca_file and two entries with one name each stop start naming connections[N].KEY")
    func configuration() async throws {
        func read(_ yaml: String) async throws -> ConnectionsConfiguration {
            let path = NSTemporaryDirectory() + "connections-" + UUID().uuidString + ".yaml"
            try yaml.write(toFile: path, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: path) }
            return try ConnectionsConfiguration(reading: try await ConfigurationValues.load(path: path, environment: false))
        }
        let good = """
            connections:
              - name: github
                authorization_endpoint: https://github.com/login/oauth/authorize
                token_endpoint: https://github.com/login/oauth/access_token
                client_id: Iv1.abc
                client_secret_file: keys/github.secret
                scopes: [repo, read:org]

            """
        let read1 = try await read(good)
        #expect(read1.connections.map(\.name) == ["github"] && read1.connection(named: "github")?.scopes == ["repo", "read:org"])
        #expect(read1.connection(named: "github")?.displayName == "github" && read1.connection(named: "github")?.issuer == nil)
        let named = try await read(good.replacingOccurrences(of: "scopes: [repo, read:org]", with: "scopes: [repo]\n    issuer: https://login.example.com/tenant-a"))
        #expect(named.connection(named: "github")?.issuer == "https://login.example.com/tenant-a")
        let cases: [(String, String, String)] = [
            ("client_id: Iv1.abc", "client_id: Iv1.abc\n    colour: red", "connections[0].colour"),
            ("name: github", "name: GitHub", "connections[0].name"),
            ("name: github", "name: callback", "connections[0].name"),
            ("token_endpoint: https://github.com/login/oauth/access_token", "token_endpoint: http://github.com/token", "connections[0].token_endpoint"),
            ("    client_id: Iv1.abc\n", "", "connections[0].client_id"),
            ("scopes: [repo, read:org]", "scopes: [\"repo read\"]", "connections[0].scopes"),
            ("scopes: [repo, read:org]", "scopes: [repo]\n    ca_file: /nonexistent/service-ca.pem", "connections[0].ca_file"),
            ("scopes: [repo, read:org]", "scopes: [repo]\n    issuer: http://login.example.com", "connections[0].issuer"),
            ("scopes: [repo, read:org]", "scopes: [repo]\n    issuer: https://login.example.com/?tenant=a", "connections[0].issuer"),
        ]
        for (from, to, key) in cases {
            await #expect(performing: { _ = try await read(good.replacingOccurrences(of: from, with: to)) }, throws: { ($0 as? ConfigurationError)?.message.contains(key) == true })
        }
        let twice = good + good.replacingOccurrences(of: "connections:\n", with: "")
        await #expect(performing: { _ = try await read(twice) }, throws: { ($0 as? ConfigurationError)?.message.contains("connections[1].name") == true })
    }
}
