import AuthorizationServer
import Foundation
import Gateway
import JOSE
import NIOHTTP1
import PortcullisTestSupport
import Runtime
import ProviderLogin
import StateSurface
import Testing

/// When someone leaves (issue 65): an agent's use of a person's provider sign-in re-checks it at
/// the provider, and every way a provider says "no" ends the session with its agents' access,
/// through the real gateway, the project's test provider and a recording MCP upstream.
@Suite("When someone leaves: the provider is asked for agents too")
struct LeaverTests {
    /// A gateway with provider sign-in, the MCP route `/mcp/a` (scope `tools`) and the client `ops-cli`.
    static func withAgentGateway(
        provider configureProvider: (FakeProvider) -> Void = { _ in },
        configure: @escaping (inout GatewayConfiguration) -> Void = { _ in },
        _ body: (FakeProvider, GatewayFixture, CookieJar) async throws -> Void
    ) async throws {
        try await BrowserSessionTests.withBrowserGateway(
            routes: { upstream in
                let port = Int(upstream.split(separator: ":").last.map(String.init) ?? "") ?? 0
                return [try! MCPRouteTests.mcpRoute("/mcp/a", upstream: port, scopes: ["tools"]), BrowserSessionTests.browserRoute("/app", upstream)]
            },
            provider: configureProvider,
            configure: { configuration in
                var settings = AuthorizationServerSettings()
                settings.clients = [RegisteredClient(clientID: "ops-cli", name: "Ops CLI", redirectURIs: ["http://127.0.0.1/callback"], source: .configured)]
                configuration.authorizationServer = settings
                configure(&configuration)
            }
        ) { provider, fixture, _ in
            var jar = CookieJar()
            _ = try await BrowserSessionTests.signIn(fixture, provider, &jar)
            try await body(provider, fixture, jar)
        }
    }

    /// The agent's tokens after the person's consent: (access token, refresh token).
    static func agentTokens(_ fixture: GatewayFixture, _ jar: CookieJar) async throws -> (access: String, refresh: String) {
        let code = try await AuthorizationServerTests.consentedCode(fixture, jar)
        let answer = try await AuthorizationServerTests.exchange(fixture, code: code)
        #expect(answer.status == 200, "\(answer.raw)")
        let tokens = (access: try #require(answer["access_token"]), refresh: try #require(answer["refresh_token"]))
        fixture.remember(tokens.access)
        fixture.remember(tokens.refresh)
        return tokens
    }

    static func refresh(_ fixture: GatewayFixture, _ token: String) async throws -> Answer {
        try await AuthorizationServerTests.token(fixture, [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", "ops-cli")])
    }

    static func toolCall(_ fixture: GatewayFixture, _ access: String) async throws -> Answer {
        try await Answer.request(
            .POST, fixture.baseURL + "/mcp/a", bearer: access, headers: [("Accept", "application/json, text/event-stream"), ("Content-Type", "application/json")],
            body: MCPRouteTests.ping)
    }

    /// The person's provider session (the one sign-in of the test).
    static func providerSession(_ fixture: GatewayFixture, _ provider: FakeProvider) async throws -> ProviderSessionRecord {
        try #require(try await fixture.state.providerSessions(issuer: provider.issuer, providerSessionID: "sid-1", subject: nil).first)
    }

    /// The session is gone everywhere it shows: its provider record, its navigations, its agents' tokens.
    static func expectEnded(_ fixture: GatewayFixture, _ jar: CookieJar, sessionID: String, access: String, _ comment: Comment) async throws {
        #expect(try await fixture.state.providerSession(sessionID: sessionID) == nil, comment)
        #expect(try await BrowserSessionTests.get(fixture, "/app/x", jar).status == 401, comment)
        // Revoked in the store with the session; the access-change feed carries it to the data plane within a second.
        let call = try await Answer.eventually(within: 3, { try await toolCall(fixture, access) }, until: { $0.status == 401 })
        #expect(call.status == 401, "the agent's access token is revoked with the session: \(call.raw)")
    }

    @Test("an agent's refresh is use of the person's session: not due, the provider is not asked; due, it is asked before the answer, and a 400 with an empty body (a user deleted at the provider) ends the session, refuses the refresh and revokes the agent's access token")
    func agentRefreshRechecksDeletedUser() async throws {
        try await Self.withAgentGateway { provider, fixture, jar in
            let (access, refresh) = try await Self.agentTokens(fixture, jar)
            #expect(try await Self.toolCall(fixture, access).status == 200)
            let session = try await Self.providerSession(fixture, provider)
            let before = provider.flow.withLock { $0.refreshRequests }
            let first = try await Self.refresh(fixture, refresh)
            #expect(first.status == 200, "\(first.raw)")
            #expect(provider.flow.withLock { $0.refreshRequests } == before, "the re-check is not due: the provider is not asked")
            let next = try #require(first["refresh_token"])
            fixture.remember(next)

            provider.flow.withLock { $0.deletedSubjects = ["user-1"] }
            try await fixture.state.scheduleProviderRecheck(sessionID: session.sessionID, at: fixture.server.clock.now() - 1)
            let refused = try await Self.refresh(fixture, next)
            #expect(refused.status == 400 && refused.error == "invalid_grant", "\(refused.raw)")
            #expect(provider.flow.withLock { $0.refreshRequests } == before + 1, "asked once, before the answer")
            try await Self.expectEnded(fixture, jar, sessionID: session.sessionID, access: access, "a 400 without an error code is a refusal")
            let lines = await fixture.log.lines(containing: "the provider refused a refresh")
            #expect(lines.contains { $0.contains("HTTP 400 without an error code") }, "\(lines)")
        }
    }

    @Test("an authorization that reuses the person's browser session is use too: a due re-check refused at the provider sends the browser to sign in instead of a code, so revoking grants cannot be undone with one click")
    func authorizationRechecks() async throws {
        try await Self.withAgentGateway { provider, fixture, jar in
            let (access, _) = try await Self.agentTokens(fixture, jar)
            let session = try await Self.providerSession(fixture, provider)
            provider.revokeRefreshTokens(of: "user-1")
            try await fixture.state.scheduleProviderRecheck(sessionID: session.sessionID, at: fixture.server.clock.now() - 1)
            let again = try await AuthorizationServerTests.authorize(fixture, jar, AuthorizationServerTests.authorizeParameters())
            #expect(again.status == 303, "\(again.raw)")
            #expect(again.headers["Location"].first?.hasPrefix("/.portcullis/sign_in?rd=") == true, "no code: \(again.headers)")
            #expect(AuthorizationServerTests.redirectParameters(again)["code"] == nil)
            try await Self.expectEnded(fixture, jar, sessionID: session.sessionID, access: access, "invalid_grant at the provider")
        }
    }

    @Test("a refresh whose ID token names another subject is a refusal: the session ends")
    func otherSubjectIsRefusal() async throws {
        try await Self.withAgentGateway { provider, fixture, jar in
            let (access, refresh) = try await Self.agentTokens(fixture, jar)
            let session = try await Self.providerSession(fixture, provider)
            provider.flow.withLock { $0.refreshSubject = "someone-else" }
            try await fixture.state.scheduleProviderRecheck(sessionID: session.sessionID, at: fixture.server.clock.now() - 1)
            let refused = try await Self.refresh(fixture, refresh)
            #expect(refused.status == 400 && refused.error == "invalid_grant", "\(refused.raw)")
            try await Self.expectEnded(fixture, jar, sessionID: session.sessionID, access: access, "an ID token for another user")
        }
    }

    @Test("a provider that cannot answer (503, 429) does not end the session at once: the agent's refresh is answered, the re-check is asked again with backoff, counted in portcullis_provider_rechecks_total; unanswered for recheck_unavailable_limit_minutes, the session ends as if refused")
    func transientFailuresAreBounded() async throws {
        try await Self.withAgentGateway(configure: { $0.browserSessions.recheckUnavailableLimitMinutes = 30 }) { provider, fixture, jar in
            var (access, refresh) = try await Self.agentTokens(fixture, jar)
            let session = try await Self.providerSession(fixture, provider)
            let now = fixture.server.clock.now()
            for status in [503, 429] {
                provider.flow.withLock { $0.refreshStatus = status }
                try await fixture.state.scheduleProviderRecheck(sessionID: session.sessionID, at: fixture.server.clock.now() - 1)
                let before = provider.flow.withLock { $0.refreshRequests }
                // The retry is set a minute after the re-check ran, which is between these two times (a loaded run may take seconds).
                let askedFrom = fixture.server.clock.now()
                let answered = try await Self.refresh(fixture, refresh)
                let askedUntil = fixture.server.clock.now()
                #expect(answered.status == 200, "\(status): the session stands while the provider cannot answer: \(answered.raw)")
                #expect(provider.flow.withLock { $0.refreshRequests } == before + 1)
                #expect(try await fixture.state.providerRechecksDue(now: askedFrom + 59, interval: 900, limit: 10).isEmpty, "asked again after a backoff, not at once")
                #expect(try await fixture.state.providerRechecksDue(now: askedUntil + 61, interval: 900, limit: 10).count == 1)
                refresh = try #require(answered["refresh_token"])
                access = try #require(answered["access_token"])
                fixture.remember(refresh)
                fixture.remember(access)
                #expect(try await Self.toolCall(fixture, access).status == 200)
            }
            let metrics = try await Answer.request(.GET, "http://127.0.0.1:\(fixture.adminPort)/metrics")
            let counted = metrics.raw.split(separator: "\n").filter { $0.hasPrefix("portcullis_provider_rechecks_total") && $0.contains(#""unavailable""#) }
            #expect(counted.count == 1 && counted.first?.hasSuffix(" 2") == true, "\(counted)")
            #expect(await !fixture.log.lines(containing: "could not be re-checked at its provider; will retry").isEmpty)
            let ready = try await Answer.request(.GET, "http://127.0.0.1:\(fixture.adminPort)/readyz")
            #expect(ready.status == 200, "a provider's outage takes no instance out of its load balancer: \(ready.raw)")
            let shown = ready.json["checks"]?.objectValue?["provider_rechecks"]?.objectValue?["acme"]?.objectValue
            #expect(shown?["last_outcome"]?.stringValue == "unavailable" && shown?["failing_since"]?.stringValue != nil, "\(ready.raw)")

            // The provider has not answered for 31 minutes (failures noted then, 20 and 5 minutes ago): the next re-check gives up.
            _ = try await fixture.state.updateProviderSession(try #require(try await fixture.state.providerSession(sessionID: session.sessionID)))
            for minutesAgo in [31.0, 20, 5] {
                _ = try await fixture.state.noteProviderRecheckFailing(sessionID: session.sessionID, now: now - minutesAgo * 60, restartAfter: 1_800)
            }
            try await fixture.state.scheduleProviderRecheck(sessionID: session.sessionID, at: fixture.server.clock.now() - 1)
            let sweepers = try fixture.server.makeServices().compactMap { $0 as? Sweeper }
            let recheck = try #require(sweepers.first { $0.what == "browser sessions re-checked at their provider" })
            #expect(try await recheck.sweepOnce() == 1, "unanswered past the limit: the session ended")
            try await Self.expectEnded(fixture, jar, sessionID: session.sessionID, access: access, "the provider never answered within the limit")
            #expect(await !fixture.log.lines(containing: "has not confirmed it for recheck_unavailable_limit_minutes").isEmpty)
        }
    }

    @Test("users disable names a provider's user by their email and ends them at once: their browser session, their agent's access and refresh tokens, their grants, and every token their provider issues them; their next sign-in through the provider is refused with a page saying so; users enable lets them sign in again")
    func disablingAProviderUser() async throws {
        try await Self.withAgentGateway(provider: { $0.flow.withLock { $0.idTokenClaims = ["email": "dana@example.com", "email_verified": true] } }) { provider, fixture, jar in
            let (access, refresh) = try await Self.agentTokens(fixture, jar)
            let bearer = try provider.token(sub: "user-1")
            fixture.remember(bearer)
            #expect(try await fixture.send(.GET, "/app/x", bearer: bearer).status == 200, "the provider's own token passes before")
            let disabled = try await runPortcullis(["users", "disable", "Dana@Example.com", "--database", fixture.state.path])
            #expect(disabled.status == 0 && disabled.output.contains("disabled dana@example.com (ext_"), "\(disabled.output)")
            let session = try await Answer.eventually(within: TimeBounds.seconds(3), { try await BrowserSessionTests.get(fixture, "/app/x", jar) }, until: { $0.status == 401 })
            #expect(session.status == 401, "the browser session ended: \(session.raw)")
            let call = try await Answer.eventually(within: TimeBounds.seconds(3), { try await Self.toolCall(fixture, access) }, until: { $0.status == 401 })
            #expect(call.status == 401, "\(call.raw)")
            #expect(try await Self.refresh(fixture, refresh).error == "invalid_grant")
            #expect(try await fixture.state.oauthGrants(userID: nil).isEmpty, "their grants are gone")
            let applied = await fixture.log.lines(containing: "administrative action applied", "account disabled", within: 5)
            #expect(applied.count == 1 && applied.first?.contains("dana@example.com") == true && applied.first?.contains("streams_and_sockets_ended") == true, "\(applied)")
            let fresh = try provider.token(sub: "user-1")
            fixture.remember(fresh)
            #expect(try await fixture.send(.GET, "/app/x", bearer: fresh).status == 401, "a token the provider issues them after the disable is refused too")

            var again = CookieJar()
            let refused = try await BrowserSessionTests.signIn(fixture, provider, &again)
            #expect(refused.status == 403 && refused.raw.contains("disabled by its operator") && refused.raw.contains("account_disabled"), "\(refused.raw)")
            #expect(again["portcullis"] == nil, "no session cookie")

            let enabled = try await runPortcullis(["users", "enable", "dana@example.com", "--database", fixture.state.path])
            #expect(enabled.status == 0, "\(enabled.output)")
            // Applied by the gateway when its watcher reads the command's change (a separate process's).
            #expect(await fixture.log.lines(containing: "administrative action applied", "account enabled", within: 5).count == 1)
            var back = CookieJar()
            let signedIn = try await BrowserSessionTests.signIn(fixture, provider, &back)
            #expect(signedIn.status == 302, "\(signedIn.raw)")
            let newer = try provider.token(sub: "user-1", claims: ["iat": .number(Date().timeIntervalSince1970.rounded(.down) + 2)])
            fixture.remember(newer)
            #expect(try await Answer.eventually(within: 3, { try await fixture.send(.GET, "/app/x", bearer: newer) }, until: { $0.status == 200 }).status == 200)
            #expect(try await fixture.send(.GET, "/app/x", bearer: bearer).status == 401, "tokens from before the disable stay refused")
        }
    }

    @Test("oauth revoke run beside the gateway leaves a structured line in its log: the action, the client, the person by id and name, and the streams it ended; the agent's token is refused")
    func revokingAGrantIsLogged() async throws {
        try await Self.withAgentGateway(provider: { $0.flow.withLock { $0.idTokenClaims = ["email": "erin@example.com", "email_verified": true] } }) { _, fixture, jar in
            let (access, _) = try await Self.agentTokens(fixture, jar)
            let grant = try #require(try await fixture.state.oauthGrants(userID: nil).first)
            let revoked = try await runPortcullis(
                ["oauth", "revoke", "--user", "erin@example.com", "--client", grant.clientID, "--resource", grant.resource, "--database", fixture.state.path])
            #expect(revoked.status == 0, "\(revoked.output)")
            let call = try await Answer.eventually(within: 3, { try await Self.toolCall(fixture, access) }, until: { $0.status == 401 })
            #expect(call.status == 401, "\(call.raw)")
            let applied = await fixture.log.lines(containing: "administrative action applied", "grant revoked", within: 5)
            #expect(applied.count == 1, "\(applied)")
            let line = applied.first ?? ""
            #expect(line.contains(grant.clientID) && line.contains(grant.resource) && line.contains("erin@example.com") && line.contains(grant.userID), "\(line)")
            #expect(line.contains("streams_and_sockets_ended"), "\(line)")
        }
    }
}
