import ConfigurationReading
import DataPlane
import Foundation
import Gateway
import JOSE
import PortcullisTestSupport
import ProviderLogin
import StateSurface
import Synchronization
import Testing
import TokenExchange

/// Token exchange with the company's provider (issue 66, second part): a route with
/// `upstream_credential: {exchange: ...}` sends a token the person's provider exchanged for the
/// route's audience, through the real gateway, the project's test provider and a recording upstream.
@Suite("Token exchange: acting as the person with the company's provider's tokens")
struct TokenExchangeTests {
    static let audience = "api://reports"

    /// `/reports`, acting as the person with a token for `api://reports` exchanged at the test provider.
    static func exchangeRoute(_ upstream: String, issuer: String, form: ExchangeTarget.Form = .rfc8693, scopes: [String] = ["reports.read"]) -> ProxyRoute {
        var route = BrowserSessionTests.browserRoute("/reports", upstream)
        route.upstreamCredential = .exchange(ExchangeTarget(issuer: issuer, audience: audience, scopes: scopes, form: form))
        return route
    }

    /// A gateway whose `/reports` exchanges at the provider it signs people in through.
    static func withExchangeGateway(
        form: ExchangeTarget.Form = .rfc8693, provider configure: @escaping (FakeProvider) -> Void = { _ in },
        _ body: (FakeProvider, GatewayFixture) async throws -> Void
    ) async throws {
        let issuer = IssuerBox()
        try await BrowserSessionTests.withBrowserGateway(
            routes: { upstream in [Self.exchangeRoute(upstream, issuer: issuer.value.withLock { $0 }, form: form)] },
            provider: { provider in
                issuer.value.withLock { $0 = provider.issuer }
                configure(provider)
            }
        ) { provider, fixture, _ in try await body(provider, fixture) }
    }

    /// The provider's issuer, known once it starts, for the routes made after.
    final class IssuerBox: Sendable {
        let value = Mutex("")
    }

    /// What the upstream received as Authorization on a GET of `/reports/q` in `jar`'s browser.
    static func sentUpstream(_ fixture: GatewayFixture, _ jar: CookieJar) async throws -> (Answer, String?) {
        let answer = try await BrowserSessionTests.get(fixture, "/reports/q", jar)
        return (answer, answer.receivedHeaders["authorization"]?.first)
    }

    static func remember(_ fixture: GatewayFixture, _ provider: FakeProvider) {
        for token in provider.flow.withLock({ Array($0.accessTokens.keys) + Array($0.exchanged.keys) + Array($0.refreshTokens.keys) }) {
            fixture.remember(token)
        }
    }

    @Test("a route with upstream_credential exchange sends the token the provider exchanged for the person (RFC 8693: their sign-in's access token as subject_token, the route's audience and scopes, the gateway's client credential), never the client's; the next request is answered from the cache without asking again")
    func exchangesForThePerson() async throws {
        try await Self.withExchangeGateway { provider, fixture in
            var jar = CookieJar()
            _ = try await BrowserSessionTests.signIn(fixture, provider, &jar)
            let signInToken = try #require(provider.flow.withLock { Array($0.accessTokens.keys) }.first)
            let (first, sent) = try await Self.sentUpstream(fixture, jar)
            Self.remember(fixture, provider)
            #expect(first.status == 200, "\(first.raw)")
            let exchanged = try #require(provider.flow.withLock { $0.exchanged.first })
            #expect(sent == "Bearer " + exchanged.key, "the exchanged token goes upstream as the person's")
            #expect(exchanged.value.subject == "user-1" && exchanged.value.audience == Self.audience)
            let form = provider.flow.withLock { $0.lastForm }
            #expect(form["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange")
            #expect(form["subject_token"] == signInToken, "the subject is the person's own token from their sign-in")
            #expect(form["subject_token_type"] == "urn:ietf:params:oauth:token-type:access_token")
            #expect(form["audience"] == Self.audience && form["scope"] == "reports.read")
            #expect(provider.flow.withLock { $0.lastAuthorization?.hasPrefix("Basic ") } == true, "the gateway authenticates as the login's client")
            #expect(!first.receivedHeaders.keys.contains("cookie"), "the browser's cookie is never passed on")

            let (second, sentAgain) = try await Self.sentUpstream(fixture, jar)
            #expect(second.status == 200 && sentAgain == sent)
            #expect(provider.flow.withLock { $0.exchangeRequests } == 1, "the second request is answered from the cache")
            let lines = await fixture.log.lines(containing: "")
            #expect(!lines.contains { $0.contains(exchanged.key) || $0.contains(signInToken) }, "no token reaches the log")
        }
    }

    @Test("a refusal at the provider is a 403 exchange_refused naming its error, an outage a 503 exchange_unavailable, neither a 502 nor a token; once the provider agrees, the same person's next request goes through")
    func refusalsAreClear() async throws {
        try await Self.withExchangeGateway(provider: { $0.flow.withLock { $0.exchangeRefusal = "invalid_target" } }) { provider, fixture in
            var jar = CookieJar()
            _ = try await BrowserSessionTests.signIn(fixture, provider, &jar)
            Self.remember(fixture, provider)
            let refused = try await BrowserSessionTests.get(fixture, "/reports/q", jar)
            #expect(refused.status == 403 && refused.error == "exchange_refused", "\(refused.raw)")
            #expect(refused.json["message"]?.stringValue?.contains("invalid_target") == true, "\(refused.raw)")
            provider.flow.withLock {
                $0.exchangeRefusal = nil
                $0.exchangeStatus = 503
            }
            let down = try await BrowserSessionTests.get(fixture, "/reports/q", jar)
            #expect(down.status == 503 && down.error == "exchange_unavailable", "\(down.raw)")
            provider.flow.withLock { $0.exchangeStatus = nil }
            let (ok, sent) = try await Self.sentUpstream(fixture, jar)
            Self.remember(fixture, provider)
            #expect(ok.status == 200 && sent?.hasPrefix("Bearer xt-user-1-") == true, "\(ok.raw)")
            #expect(provider.flow.withLock { $0.exchangeRequests } == 3, "a refusal is not kept: each request asked")
        }
    }

    @Test("a person with no sign-in through the provider (the gateway's own account) is refused 403 exchange_requires_sign_in, and the provider is not asked")
    func requiresSignIn() async throws {
        try await Self.withExchangeGateway { provider, fixture in
            try await fixture.addUser("alice")
            let login = try await fixture.login("alice")
            let answer = try await Answer.request(.GET, fixture.baseURL + "/reports/q", bearer: login.accessToken)
            #expect(answer.status == 403 && answer.error == "exchange_requires_sign_in", "\(answer.raw)")
            #expect(answer.json["message"]?.stringValue?.contains(provider.issuer) == true)
            #expect(provider.flow.withLock { $0.exchangeRequests } == 0)
        }
    }

    @Test("an exchanged token is dropped with the sign-in whose token it was exchanged from: after that session signs out, the person's next request (in their other browser) exchanges again with the live sign-in's token")
    func droppedWithItsSession() async throws {
        try await Self.withExchangeGateway { provider, fixture in
            var first = CookieJar()
            _ = try await BrowserSessionTests.signIn(fixture, provider, &first)
            provider.flow.withLock { $0.sid = "sid-2" }
            var second = CookieJar()
            _ = try await BrowserSessionTests.signIn(fixture, provider, &second)
            Self.remember(fixture, provider)
            // Both sessions are the person's; the newest sign-in's token is the subject.
            let (answer, sent) = try await Self.sentUpstream(fixture, second)
            #expect(answer.status == 200, "\(answer.raw)")
            let sessions = try await fixture.state.providerSessions(issuer: provider.issuer, providerSessionID: "sid-2", subject: nil)
            let newest = try #require(sessions.first)
            let out = try await Answer.request(
                .POST, fixture.baseURL + "/.portcullis/sign_out?rd=%2F", headers: [("Sec-Fetch-Site", "same-origin"), second.header], followRedirects: false)
            #expect(out.status == 303, "\(out.raw)")
            #expect(try await fixture.state.providerSession(sessionID: newest.sessionID) == nil)
            // The end reaches the cache through the access-change feed (within a second).
            let again = try await Answer.eventually(
                within: 3, { try await BrowserSessionTests.get(fixture, "/reports/q", first) },
                until: { _ in provider.flow.withLock { $0.exchangeRequests } == 2 })
            Self.remember(fixture, provider)
            let sentAgain = again.receivedHeaders["authorization"]?.first
            #expect(again.status == 200 && sentAgain != nil && sentAgain != sent, "a new token, exchanged from the first browser's sign-in: \(again.raw)")
        }
    }

    @Test("disabling the person ends a request under way with an exchanged token (403 access_ended, long before the upstream answers) and forgets their exchanged token: enabled and signed in again, their next request is exchanged anew")
    func disableEndsExchangedUse() async throws {
        try await Self.withExchangeGateway(provider: { $0.flow.withLock { $0.idTokenClaims = ["email": "dana@example.com", "email_verified": true] } }) {
            provider, fixture in
            var jar = CookieJar()
            _ = try await BrowserSessionTests.signIn(fixture, provider, &jar)
            #expect(try await Self.sentUpstream(fixture, jar).0.status == 200)
            let cookie = jar
            let started = ContinuousClock.now
            let slow = Task { try await BrowserSessionTests.get(fixture, "/reports/q?delay_ms=8000", cookie) }
            try await Task.sleep(for: .milliseconds(300))
            let disabled = try await runPortcullis(["users", "disable", "dana@example.com", "--database", fixture.state.path])
            #expect(disabled.status == 0, "\(disabled.output)")
            let ended = try await slow.value
            #expect(ended.status == 403 && ended.error == "access_ended", "\(ended.raw)")
            #expect(ContinuousClock.now - started < .seconds(7), "ended before the upstream's 8 s answer (the bound leaves room for a loaded machine: the CLI that disables the person is a process of its own)")
            #expect(ended.json["message"]?.stringValue?.contains("connect it again") == false, "no advice to connect a service: \(ended.raw)")

            #expect(try await runPortcullis(["users", "enable", "dana@example.com", "--database", fixture.state.path]).status == 0)
            var again = CookieJar()
            let signedIn = try await Answer.eventually(
                within: 3, {
                    var attempt = CookieJar()
                    let answer = try await BrowserSessionTests.signIn(fixture, provider, &attempt)
                    if answer.status == 302 { again = attempt }
                    return answer
                }, until: { $0.status == 302 })
            #expect(signedIn.status == 302, "\(signedIn.raw)")
            let (answer, _) = try await Self.sentUpstream(fixture, again)
            Self.remember(fixture, provider)
            #expect(answer.status == 200, "\(answer.raw)")
            #expect(provider.flow.withLock { $0.exchangeRequests } == 2, "the token exchanged before the disable was forgotten: asked again")
        }
    }

    @Test("a sign-in's access token that expires before the exchange is renewed through the session's re-check (one refresh at the provider), and the new one is the subject; within a minute of the session's last claim (here its sign-in) it is not renewed again but answered 503 exchange_unavailable, so a rotating refresh token is never presented twice")
    func staleSubjectIsRenewed() async throws {
        // The sign-in's access token lives 20 s: under the 30 s an exchange needs left (the renewed one lives 300 s).
        try await Self.withExchangeGateway(provider: { $0.flow.withLock { $0.accessTokenLifetime = 20 } }) { provider, fixture in
            var jar = CookieJar()
            _ = try await BrowserSessionTests.signIn(fixture, provider, &jar)
            let signInToken = try #require(provider.flow.withLock { Array($0.accessTokens.keys) }.first)
            let refreshes = provider.flow.withLock { state in
                state.accessTokenLifetime = 300
                return state.refreshRequests
            }
            let early = try await BrowserSessionTests.get(fixture, "/reports/q", jar)
            #expect(early.status == 503 && early.error == "exchange_unavailable", "\(early.raw)")
            #expect(provider.flow.withLock { $0.refreshRequests } == refreshes, "not within a minute of the last claim")
            // The sign-in two minutes old: its re-check may be claimed again.
            let session = try await LeaverTests.providerSession(fixture, provider)
            try await fixture.state.scheduleProviderRecheck(sessionID: session.sessionID, at: fixture.server.clock.now() + 900 - 120)
            let (answer, _) = try await Self.sentUpstream(fixture, jar)
            Self.remember(fixture, provider)
            #expect(answer.status == 200, "\(answer.raw)")
            #expect(provider.flow.withLock { $0.refreshRequests } == refreshes + 1, "the session's refresh token renewed it once")
            let subject = provider.flow.withLock { $0.lastForm["subject_token"] }
            #expect(subject != nil && subject != signInToken, "the renewed token is the subject")
        }
    }

    @Test("Entra's on-behalf-of form: the person's token as a jwt-bearer assertion with requested_token_use=on_behalf_of and the route's scopes, or the audience's /.default")
    func entraOnBehalfOf() async throws {
        try await Self.withExchangeGateway(form: .entraOnBehalfOf) { provider, fixture in
            var jar = CookieJar()
            _ = try await BrowserSessionTests.signIn(fixture, provider, &jar)
            let signInToken = try #require(provider.flow.withLock { Array($0.accessTokens.keys) }.first)
            let (answer, sent) = try await Self.sentUpstream(fixture, jar)
            Self.remember(fixture, provider)
            #expect(answer.status == 200 && sent?.hasPrefix("Bearer xt-user-1-") == true, "\(answer.raw)")
            let form = provider.flow.withLock { $0.lastForm }
            #expect(form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" && form["requested_token_use"] == "on_behalf_of")
            #expect(form["assertion"] == signInToken && form["scope"] == "reports.read" && form["audience"] == nil)
        }
    }

    @Test("the exchanged-token cache is per person and target, never across people: a token is not sent in its last 30 s, is renewed from a fifth of its life before expiry (not in the first half of its sending time), and is forgotten with the person or with the session it came from; a keep after a forget is not kept")
    func cache() {
        let cache = ExchangedTokenCache()
        let target = ExchangeTarget(issuer: "https://login.example.com", audience: Self.audience, scopes: [], form: .rfc8693)
        let alice = ExchangedTokenCache.Key(userID: "ext_alice", tenantID: "acme", target: target)
        let bob = ExchangedTokenCache.Key(userID: "ext_bob", tenantID: "acme", target: target)
        let aliceElsewhere = ExchangedTokenCache.Key(userID: "ext_alice", tenantID: "globex", target: target)
        let other = ExchangedTokenCache.Key(
            userID: "ext_alice", tenantID: "acme", target: ExchangeTarget(issuer: target.issuer, audience: "api://other", scopes: [], form: .rfc8693))
        cache.keep("t-alice", for: alice, sessionID: "ses_1", expiresAt: 1_300, now: 1_000, seen: cache.generation)
        #expect(cache.lookup(alice, now: 1_000) == .fresh("t-alice"))
        #expect(cache.lookup(bob, now: 1_000) == .missing && cache.lookup(aliceElsewhere, now: 1_000) == .missing && cache.lookup(other, now: 1_000) == .missing)
        #expect(cache.lookup(alice, now: 1_239) == .fresh("t-alice") && cache.lookup(alice, now: 1_240) == .renewing("t-alice"), "renewal due 60 s before expiry")
        #expect(cache.lookup(alice, now: 1_270) == .missing, "never sent with 30 s or less left")
        cache.keep("t-short", for: alice, sessionID: "ses_1", expiresAt: 1_060, now: 1_000, seen: cache.generation)
        #expect(cache.lookup(alice, now: 1_014) == .fresh("t-short") && cache.lookup(alice, now: 1_015) == .renewing("t-short"))
        cache.keep("t-dead", for: bob, sessionID: "ses_2", expiresAt: 1_020, now: 1_000, seen: cache.generation)
        #expect(cache.lookup(bob, now: 1_000) == .missing, "a token with under 30 s of life is not kept")

        cache.keep("t-alice", for: alice, sessionID: "ses_1", expiresAt: 2_000, now: 1_000, seen: cache.generation)
        cache.keep("t-bob", for: bob, sessionID: "ses_2", expiresAt: 2_000, now: 1_000, seen: cache.generation)
        cache.forget(sessionIDs: ["ses_1"])
        #expect(cache.lookup(alice, now: 1_000) == .missing && cache.lookup(bob, now: 1_000) == .fresh("t-bob"))
        let seen = cache.generation
        cache.forget(userID: "ext_bob", tenantID: "acme")
        #expect(cache.lookup(bob, now: 1_000) == .missing)
        cache.keep("t-bob", for: bob, sessionID: "ses_2", expiresAt: 2_000, now: 1_000, seen: seen)
        #expect(cache.lookup(bob, now: 1_000) == .missing, "an exchange that began before its person's forget keeps nothing")
        cache.keep("t-alice", for: alice, sessionID: "ses_1", expiresAt: 2_000, now: 1_000, seen: seen)
        #expect(cache.lookup(alice, now: 1_000) == .fresh("t-alice"), "another person's forget leaves an exchange under way be")
        let beforeEnd = cache.generation
        cache.forget(sessionIDs: ["ses_9"])
        cache.keep("t-elsewhere", for: aliceElsewhere, sessionID: "ses_9", expiresAt: 2_000, now: 1_000, seen: beforeEnd)
        #expect(cache.lookup(aliceElsewhere, now: 1_000) == .missing, "an exchange from a session that ended meanwhile keeps nothing")
        let longAgo = cache.generation
        for index in 0..<1_100 { cache.forget(userID: "ext_\(index)", tenantID: "acme") }
        cache.keep("t-bob", for: bob, sessionID: "ses_2", expiresAt: 2_000, now: 1_000, seen: longAgo)
        #expect(cache.lookup(bob, now: 1_000) == .missing, "past the forgets remembered, an exchange that began before them keeps nothing")
    }

    @Test("requests of one person that miss the cache together make one exchange at the provider, and all carry its token")
    func missesTogetherExchangeOnce() async throws {
        try await Self.withExchangeGateway { provider, fixture in
            var jar = CookieJar()
            _ = try await BrowserSessionTests.signIn(fixture, provider, &jar)
            let cookie = jar
            let answers = try await withThrowingTaskGroup(of: (Answer, String?).self) { group in
                for _ in 0..<8 { group.addTask { try await Self.sentUpstream(fixture, cookie) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            Self.remember(fixture, provider)
            #expect(answers.allSatisfy { $0.0.status == 200 }, "\(answers.map(\.0.status))")
            #expect(Set(answers.compactMap(\.1)).count == 1, "one token for all")
            #expect(provider.flow.withLock { $0.exchangeRequests } == 1)
        }
    }

    @Test("a route's exchange reads itself: issuer, audience, scopes and form; an unknown key or form, a missing audience, both connection and exchange, or an issuer people do not sign in through stop start naming the key")
    func configuration() async throws {
        func read(_ route: String, login: Bool = true) async throws -> GatewayConfiguration {
            let directory = NSTemporaryDirectory() + "exchange-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let secret = directory + "/client.secret"
            _ = FileManager.default.createFile(atPath: secret, contents: Data("0123456789012345678901234567890123456789".utf8), attributes: [.posixPermissions: 0o600])
            let loginBlock = login ? "\n      login: {name: corp, client_id: portcullis, client_secret_file: \(secret)}" : ""
            let yaml = """
                trust:
                  issuers:
                    - issuer: https://login.example.com/v2.0
                      audiences: [portcullis-api]
                      tenant: acme\(loginBlock)
                gateway:
                  routes:
                \(route)
                """
            let path = directory + "/portcullis.yaml"
            try yaml.write(toFile: path, atomically: true, encoding: .utf8)
            return try GatewayConfiguration(reading: try await ConfigurationValues.load(path: path, environment: false))
        }
        let good = try await read(
            "    - {prefix: /r, upstream: http://127.0.0.1:9200, upstream_credential: {exchange: {issuer: https://login.example.com/v2.0, audience: api://reports, scopes: [reports.read], form: entra_on_behalf_of}}}")
        #expect(good.routes.first?.upstreamCredential == .exchange(ExchangeTarget(issuer: "https://login.example.com/v2.0", audience: "api://reports", scopes: ["reports.read"], form: .entraOnBehalfOf)))
        let cases: [(String, Bool, String)] = [
            ("{exchange: {issuer: https://login.example.com/v2.0, audience: a, resource: x}}", true, "upstream_credential.exchange.resource"),
            ("{exchange: {issuer: https://login.example.com/v2.0, audience: a, form: saml}}", true, "upstream_credential.exchange.form"),
            ("{exchange: {issuer: https://login.example.com/v2.0}}", true, "upstream_credential.exchange.audience"),
            ("{exchange: {audience: a}}", true, "upstream_credential.exchange.issuer"),
            ("{exchange: {issuer: https://login.example.com/v2.0, audience: a}, connection: github}", true, "upstream_credential.exchange"),
            ("{exchange: {issuer: https://other.example.com, audience: a}}", true, "gateway.routes[0].upstream_credential.exchange.issuer"),
            ("{exchange: {issuer: https://login.example.com/v2.0, audience: a}}", false, "no trust.issuers entry has login"),
        ]
        for (credential, login, key) in cases {
            let route = "    - {prefix: /r, upstream: http://127.0.0.1:9200, upstream_credential: \(credential)}"
            await #expect(
                "\(credential)", performing: { _ = try await read(route, login: login) },
                throws: { ($0 as? ConfigurationError).map { "\($0.key ?? "") \($0.message)".contains(key) } == true })
        }
    }
}
