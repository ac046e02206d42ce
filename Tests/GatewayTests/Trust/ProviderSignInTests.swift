import Foundation
import JOSE
import PortcullisTestSupport
import ProviderLogin
import SecurityGuard
import TrustedIssuers
import StateSurface
import Synchronization
import Testing
import TrafficCop

/// Signing in through a provider after the start (issue 37): the callback, the completion,
/// refresh through the provider, logout's end-session URL and back-channel logout, through
/// the real gateway and the fake provider's code flow.
@Suite("Provider sign-in: callback, completion, refresh, logout")
struct ProviderSignInTests {
    static let verifier = "the-browser-keeps-this-verifier"

    /// A started sign-in: the session and the provider's authorization URL.
    struct Started {
        let session: String
        let authorizationURL: String
    }

    static func start(_ fixture: GatewayFixture, session given: String? = nil, returnTo: String = "https://app.example.com/after") async throws -> Started {
        var session = given ?? ""
        if given == nil { session = try await fixture.createAnonymousSession() }
        let answer = try await fixture.post(
            "/api/auth/oidc/acme/start",
            ["session_id": .string(session), "return_to": .string(returnTo), "login_challenge": .string(try ProviderLoginTests.challenge(verifier))])
        guard answer.status == 200, let url = answer["authorization_url"] else { throw FixtureError("start answered \(answer.status): \(answer.raw)") }
        return Started(session: session, authorizationURL: url)
    }

    /// The provider's login page approved: the gateway's callback URL the browser is sent to.
    static func approve(_ provider: FakeProvider, _ started: Started) async throws -> String {
        let approval = try await Answer.request(.GET, provider.approvalURL(for: started.authorizationURL), followRedirects: false)
        guard approval.status == 302, let location = approval.headers["Location"].first else {
            throw FixtureError("the provider's approval answered \(approval.status)")
        }
        return location
    }

    /// Sends the browser to the gateway's callback: the answer (303 expected).
    static func callback(_ fixture: GatewayFixture, _ location: String) async throws -> Answer {
        // The redirect URI is on gateway.public_url; the fixture's gateway listens on loopback.
        guard let at = location.range(of: "/api/auth/oidc/callback") else { throw FixtureError("not a callback: \(location)") }
        let path = String(location[at.lowerBound...])
        return try await Answer.request(.GET, fixture.baseURL + path, followRedirects: false)
    }

    /// The fragment value `name` of a 303's Location.
    static func fragment(_ answer: Answer, _ name: String) -> String? {
        guard let location = answer.headers["Location"].first, let hash = location.firstIndex(of: "#") else { return nil }
        return FormEncoding.fields(location[location.index(after: hash)...])?[name]
    }

    static func complete(_ fixture: GatewayFixture, code: String, session: String, verifier: String = verifier) async throws -> Answer {
        let answer = try await fixture.post(
            "/api/auth/oidc/complete", ["login_code": .string(code), "session_id": .string(session), "login_verifier": .string(verifier)])
        answer["access_token"].map(fixture.remember)
        answer["refresh_token"].map(fixture.remember)
        return answer
    }

    /// A whole sign-in: start, approve, callback, complete.
    static func signIn(_ fixture: GatewayFixture, _ provider: FakeProvider) async throws -> GatewayFixture.Login {
        let started = try await start(fixture)
        let back = try await callback(fixture, try await approve(provider, started))
        guard let code = fragment(back, "portcullis_login") else { throw FixtureError("the callback answered \(back.status) \(back.headers["Location"])") }
        fixture.remember(code)
        let done = try await complete(fixture, code: code, session: started.session)
        guard done.status == 200, let access = done["access_token"], let refresh = done["refresh_token"] else {
            throw FixtureError("complete answered \(done.status): \(done.raw)")
        }
        return GatewayFixture.Login(accessToken: access, refreshToken: refresh, sessionID: started.session)
    }

    static func claims(_ token: String) throws -> JSONObject {
        try StrictJSONReader().parseObject(try JWSCompact.parse(token).payload)
    }

    @Test("the code flow end to end: the callback exchanges the code with the PKCE verifier and client secret and 303s to return_to with a login code in the fragment; complete upgrades the same session and answers the gateway's tokens, whose sub is the provider user's ext_ id with idp_iss and idp_sub")
    func codeFlowSignsIn() async throws {
        try await ProviderLoginTests.withLoginGateway { provider, fixture in
            let started = try await Self.start(fixture)
            let back = try await Self.callback(fixture, try await Self.approve(provider, started))
            #expect(back.status == 303)
            #expect(back.headers["Cache-Control"].first == "no-store" && back.headers["Referrer-Policy"].first == "no-referrer")
            let location = try #require(back.headers["Location"].first)
            #expect(location.hasPrefix("https://app.example.com/after#portcullis_login="), "\(location)")
            let sent = provider.flow.withLock { ($0.lastForm, $0.lastAuthorization) }
            #expect(sent.0["grant_type"] == "authorization_code" && sent.0["redirect_uri"] == fixture.server.gateway.loginRedirectURI)
            #expect(sent.0["code_verifier"]?.utf8.count == 43 && sent.1?.hasPrefix("Basic ") == true, "PKCE verifier and client_secret_basic")
            let code = try #require(Self.fragment(back, "portcullis_login"))
            let done = try await Self.complete(fixture, code: code, session: started.session)
            #expect(done.status == 200, "\(done.raw)")
            #expect(done["session_id"] == started.session && done["token_type"] == "Bearer" && done.headers["Cache-Control"].first == "no-store")
            let claims = try Self.claims(try #require(done["access_token"]))
            let expected = try AuthenticatedCaller.externalUserID(issuer: provider.issuer, subject: "user-1")
            #expect(claims["sub"]?.stringValue == expected && expected.hasPrefix("ext_"))
            #expect(claims["idp_iss"]?.stringValue == provider.issuer && claims["idp_sub"] == "user-1" && claims["tenant_id"] == "acme")
            #expect(claims["session_id"] == nil, "the session id stays out of the token")
            // The session is now the provider user's: it reads with the token.
            let session = try await fixture.send(.GET, "/api/session/\(started.session)", bearer: done["access_token"])
            #expect(session.status == 200 && session["state"] == "authenticated", "\(session.raw)")
            // The same code again, and the callback again, change nothing.
            #expect(try await Self.complete(fixture, code: code, session: started.session).error == "login_code_invalid")
            let replay = try await Self.callback(fixture, try await Self.approve(provider, started))
            #expect(replay.status == 400 && replay.error == "state_invalid")
            // Stopping the fixture checks that none of these reached the log.
            fixture.remember(code)
            fixture.remember(started.authorizationURL)
        }
    }

    @Test("a login code completes only once, only with its own session and only with the verifier whose challenge started the flow; a wrong attempt spends it")
    func loginCodeIsBound() async throws {
        try await ProviderLoginTests.withLoginGateway { provider, fixture in
            for wrong in ["session", "verifier", "format"] {
                let started = try await Self.start(fixture)
                let back = try await Self.callback(fixture, try await Self.approve(provider, started))
                let code = try #require(Self.fragment(back, "portcullis_login"))
                let other = try await fixture.createAnonymousSession()
                let answer: Answer
                switch wrong {
                case "session": answer = try await Self.complete(fixture, code: code, session: other)
                case "verifier": answer = try await Self.complete(fixture, code: code, session: started.session, verifier: "another-verifier")
                default: answer = try await Self.complete(fixture, code: code + "x", session: started.session)
                }
                #expect(answer.status == 400 && answer.error == "login_code_invalid", "\(wrong): \(answer.raw)")
                if wrong != "format" {
                    let after = try await Self.complete(fixture, code: code, session: started.session)
                    #expect(after.status == 400, "\(wrong): a code tried wrongly is spent")
                }
                let session = try await fixture.send(.GET, "/api/session/\(started.session)")
                #expect(session["state"] == "anonymous", "\(wrong): the session was not upgraded")
            }
        }
    }

    @Test("a session upgraded meanwhile (a password login between the callback and the completion) is not upgraded again: complete is 409 session_conflict and the session keeps its owner")
    func upgradedMeanwhileConflicts() async throws {
        try await ProviderLoginTests.withLoginGateway { provider, fixture in
            try await fixture.addUser("alice", tenant: "acme")
            let started = try await Self.start(fixture)
            let back = try await Self.callback(fixture, try await Self.approve(provider, started))
            let code = try #require(Self.fragment(back, "portcullis_login"))
            fixture.remember(code)
            let password = try await fixture.login("alice", tenant: "acme", sessionID: started.session)
            let late = try await Self.complete(fixture, code: code, session: started.session)
            #expect(late.status == 409 && late.error == "session_conflict", "\(late.raw)")
            let session = try await fixture.send(.GET, "/api/session/\(started.session)", bearer: password.accessToken)
            #expect(session.status == 200 && session["user_id"]?.hasPrefix("usr_") == true, "the password login's owner stays")
            #expect(try await fixture.state.providerSession(sessionID: started.session) == nil, "no provider record for a session the provider did not sign in")
        }
    }

    @Test("the callback sends the browser back with #portcullis_error for a denied sign-in, an ID token with a wrong nonce, audience or signature or expired, a missing or foreign iss where the provider advertises it; none signs in, and the flow is spent")
    func callbackRefusals() async throws {
        try await ProviderLoginTests.withLoginGateway { provider, fixture in
            let cases: [(String, (inout FakeProvider.CodeFlow) -> Void, String)] = [
                ("denied", { $0.deniesAccess = true }, "access_denied"),
                ("nonce", { $0.fault = .wrongNonce }, "id_token_invalid"),
                ("audience", { $0.fault = .wrongAudience }, "id_token_invalid"),
                ("signature", { $0.fault = .badSignature }, "id_token_invalid"),
                ("expired", { $0.fault = .expired }, "id_token_invalid"),
                ("no iss", { $0.sendsIssuer = false }, "issuer_mismatch"),
            ]
            for (name, setUp, expected) in cases {
                provider.flow.withLock { state in
                    state = FakeProvider.CodeFlow()
                    setUp(&state)
                }
                let started = try await Self.start(fixture)
                let location = try await Self.approve(provider, started)
                let back = try await Self.callback(fixture, location)
                #expect(back.status == 303, "\(name)")
                #expect(Self.fragment(back, "portcullis_error") == expected && Self.fragment(back, "portcullis_login") == nil, "\(name): \(back.headers["Location"])")
                #expect(try await Self.callback(fixture, location).error == "state_invalid", "\(name): the flow is spent")
                #expect(try await fixture.send(.GET, "/api/session/\(started.session)")["state"] == "anonymous", "\(name)")
            }
            provider.flow.withLock { $0 = FakeProvider.CodeFlow() }
            // A foreign iss: the same answer with iss replaced.
            let started = try await Self.start(fixture)
            let location = try await Self.approve(provider, started)
            let foreign = location.replacingOccurrences(of: "iss=" + provider.issuer, with: "iss=" + FormEncoding.encode("https://evil.example.com"))
            #expect(foreign != location)
            #expect(Self.fragment(try await Self.callback(fixture, foreign), "portcullis_error") == "issuer_mismatch")
            // No state, a forged state, a state named twice: 400, nowhere to send the browser.
            for query in ["code=x", "code=x&state=forged", "code=x&state=a&state=b", "state=%zz"] {
                let answer = try await Answer.request(.GET, fixture.baseURL + "/api/auth/oidc/callback?" + query, followRedirects: false)
                #expect(answer.status == 400 && answer.headers["Location"].isEmpty, "\(query): \(answer.raw)")
            }
        }
    }

    @Test("with private_key_file the gateway authenticates at the token endpoint with private_key_jwt (RFC 7523: iss = sub = client_id, aud = the token endpoint) and no Authorization header")
    func privateKeyJWT() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let clientKey = try JWSKey.generate(algorithm: .es256, kid: "client-1")
        provider.flow.withLock { $0.clientKey = clientKey }
        let keyFile = try TrustedIssuerSecretTests.secretFile(Array(try clientKey.privatePEM().utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        var entry = provider.trust()
        entry.login = ProviderLoginSettings(name: "acme", clientID: "portcullis", authentication: .privateKeyJWT(file: keyFile))
        let fixture = try await TrustedIssuerTests.gateway([provider], configure: { $0.loginReturnOrigins = ["https://app.example.com"] }, entries: [entry])
        let login = try await Self.signIn(fixture, provider)
        #expect(login.sessionID.hasPrefix("ses_"))
        let sent = provider.flow.withLock { ($0.lastForm, $0.lastAuthorization) }
        #expect(sent.1 == nil && sent.0["client_assertion"] != nil)
        provider.flow.withLock { $0.clientKey = try? JWSKey.generate(algorithm: .es256, kid: "client-1") }
        let started = try await Self.start(fixture)
        let refused = try await Self.callback(fixture, try await Self.approve(provider, started))
        #expect(Self.fragment(refused, "portcullis_error") == "code_refused", "a key the provider does not know: invalid_client")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("a refresh of a provider session uses the provider's refresh token; when the provider refuses it (invalid_grant) the refresh is 401, the session ends and its access token is revoked")
    func refreshGoesThroughProvider() async throws {
        try await ProviderLoginTests.withLoginGateway { provider, fixture in
            let login = try await Self.signIn(fixture, provider)
            let sealed = try #require(try await fixture.state.providerSession(sessionID: login.sessionID)?.identity.sealedRefreshToken)
            #expect(!sealed.hasPrefix("rt-") && !sealed.contains("rt-"), "the provider's refresh token is kept sealed")
            let before = provider.flow.withLock { $0.refreshRequests }
            let refreshed = try await fixture.refresh(login.refreshToken)
            #expect(refreshed.status == 200, "\(refreshed.raw)")
            #expect(provider.flow.withLock { $0.refreshRequests } == before + 1)
            // The provider session's record moves with the refresh token just issued (it slides with each rotation).
            let kept = try #require(try await fixture.state.providerSession(sessionID: login.sessionID))
            #expect(kept.expiresAt >= Date().timeIntervalSince1970 + fixture.server.gateway.refreshTokenLifetime - 60)
            #expect(kept.identity.sealedRefreshToken != sealed, "the rotated provider refresh token is kept, sealed anew")
            let access = try #require(refreshed["access_token"])
            #expect(try Self.claims(access)["idp_sub"] == "user-1")
            provider.revokeRefreshTokens(of: "user-1")
            let refused = try await fixture.refresh(try #require(refreshed["refresh_token"]))
            #expect(refused.status == 401 && refused.json["reason"] == "refresh_provider_refused", "\(refused.raw)")
            #expect(try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: access).status == 401, "its access token is revoked")
            #expect(try await fixture.state.providerSession(sessionID: login.sessionID) == nil)
        }
    }

    @Test("a refresh racing a logout (the provider answers after the logout ended the session) is 401 session_ended: the provider session is not brought back, and no access token comes out of it")
    func refreshRacingLogout() async throws {
        try await ProviderLoginTests.withLoginGateway { provider, fixture in
            let login = try await Self.signIn(fixture, provider)
            provider.flow.withLock { $0.holdsRefreshes = true }
            let refreshing = Task { try await fixture.refresh(login.refreshToken) }
            // The refresh waits at the provider; the logout ends the session meanwhile.
            for _ in 0..<250 where provider.flow.withLock({ $0.heldRefreshes }) == 0 { try await Task.sleep(for: .milliseconds(20)) }
            #expect(provider.flow.withLock { $0.heldRefreshes } == 1, "the refresh reached the provider")
            let logout = try await fixture.post("/api/auth/logout", bearer: login.accessToken, ["session_id": .string(login.sessionID)])
            #expect(logout.status == 200, "\(logout.raw)")
            #expect(try await fixture.state.providerSession(sessionID: login.sessionID) == nil)
            provider.flow.withLock { $0.holdsRefreshes = false }
            let refreshed = try await refreshing.value
            #expect(refreshed.status == 401 && refreshed.json["reason"] == "refresh_session_ended", "\(refreshed.raw)")
            #expect(refreshed["access_token"] == nil)
            #expect(try await fixture.state.providerSession(sessionID: login.sessionID) == nil, "the provider session (and its sealed tokens) stays gone")
        }
    }

    @Test("ending a provider session takes the access-token ids recorded for it in the same step, so a logout revokes one a racing refresh recorded meanwhile; a refresh after it is refused")
    func endingTakesRecordedTokens() async throws {
        try await ProviderLoginTests.withLoginGateway { provider, fixture in
            let login = try await Self.signIn(fixture, provider)
            // The logout's step as it lands between a refresh's save and its record: the record goes with the ids it holds.
            try await fixture.state.recordSessionAccessToken(sessionID: login.sessionID, tokenID: "jti-before", expiresAt: Date().timeIntervalSince1970 + 600)
            let taken = try await fixture.state.deleteProviderSession(sessionID: login.sessionID)
            #expect(taken.map(\.tokenID).contains("jti-before"), "a token recorded before the delete is among those it returns (to revoke)")
            let refreshed = try await fixture.refresh(login.refreshToken)
            #expect(refreshed.status == 401 && refreshed["access_token"] == nil, "\(refreshed.raw)")
        }
    }

    @Test("logout of a provider session answers 200 with the provider's end-session URL (id_token_hint, client_id, post_logout_redirect_uri) and revokes the session's access tokens")
    func logoutNamesEndSession() async throws {
        try await ProviderLoginTests.withLoginGateway { provider, fixture in
            let login = try await Self.signIn(fixture, provider)
            let refreshed = try await fixture.refresh(login.refreshToken)
            let second = try #require(refreshed["access_token"])
            let answer = try await fixture.post("/api/auth/logout", bearer: second, ["session_id": .string(login.sessionID)])
            #expect(answer.status == 200, "\(answer.raw)")
            let url = try #require(answer["end_session_url"])
            #expect(url.hasPrefix(provider.issuer + "/protocol/openid-connect/logout?"))
            let query = ProviderLoginTests.query(url)
            #expect(query["client_id"] == "portcullis" && query["post_logout_redirect_uri"] == "https://app.example.com/")
            #expect(try Self.claims(try #require(query["id_token_hint"]))["sub"] == "user-1")
            #expect(try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken).status == 401, "the first access token too")
        }
    }

    @Test("back-channel logout: a valid logout token ends the provider session's gateway session, closes its socket with 1008 within a second and revokes its tokens; the same token again is 400")
    func backChannelLogoutEndsSessions() async throws {
        try await ProviderLoginTests.withLoginGateway { provider, fixture in
            let login = try await Self.signIn(fixture, provider)
            let token = try provider.logoutToken(sid: "sid-1", sub: nil)
            let transcript = try await AgentRelayTests.session(AgentRelayTests.url(fixture, login)) { outbound, iterator, transcript in
                try await outbound.write(.text(#"{"type":"intent","request_id":"r1","intent_type":"echo","payload":{}}"#))
                transcript.messages.append(try await AgentRelayTests.nextJSON(&iterator))
                let answer = try await Self.backChannel(fixture, token)
                #expect(answer.status == 200, "\(answer.raw)")
            }
            #expect(transcript.messages.first?["type"] == "result")
            #expect(transcript.close?.closeCode == .policyViolation)
            #expect(transcript.secondsToClose < TimeBounds.seconds(1))
            #expect(try await fixture.refresh(login.refreshToken).status == 401)
            #expect(try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken).status == 401)
            let again = try await Self.backChannel(fixture, token)
            #expect(again.status == 400 && again.error == "invalid_request" && again.raw.contains("used already"))
        }
    }

    @Test("back-channel logout is rate limited per client address (rate_limits.backchannel_logout_per_client) before the token is read: 429 with Retry-After past the burst")
    func backChannelLogoutRateLimited() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let secret = try ProviderLoginTests.clientSecret()
        defer { try? FileManager.default.removeItem(atPath: secret) }
        var entry = provider.trust()
        entry.login = ProviderLoginTests.login("acme", secretFile: secret, displayName: "Acme SSO")
        let fixture = try await TrustedIssuerTests.gateway(
            [provider], configure: { $0.rateLimits[.backChannelLogoutPerClient] = RateLimit(perMinute: 1, burst: 2) }, entries: [entry])
        let token = try provider.logoutToken(more: ["nonce": "n"])
        var statuses: [Int] = []
        for _ in 0..<4 { statuses.append(try await Self.backChannel(fixture, token).status) }
        #expect(statuses == [400, 400, 429, 429], "\(statuses)")
        let limited = try await Self.backChannel(fixture, token)
        #expect(limited.error == "rate_limited" && limited.headers["Retry-After"].first.flatMap(Int.init) ?? 0 > 0, "\(limited.raw)")
        try await fixture.stop()
        try await provider.stop()
    }

    static func backChannel(_ fixture: GatewayFixture, _ token: String, contentType: String = "application/x-www-form-urlencoded") async throws -> Answer {
        try await Answer.request(
            .POST, fixture.baseURL + "/api/auth/oidc/backchannel-logout", headers: [("Content-Type", contentType)],
            body: "logout_token=" + FormEncoding.encode(token))
    }

    @Test("back-channel logout refuses (400 invalid_request, nothing ends) a token with a nonce, another audience, no events, neither sid nor sub, an old iat, a foreign signature, an ID token, a JSON body; typ logout+jwt, JWT or none passes; sub alone ends every session of the user")
    func backChannelLogoutRules() async throws {
        try await ProviderLoginTests.withLoginGateway { provider, fixture in
            let login = try await Self.signIn(fixture, provider)
            let bad: [(String, String)] = [
                ("nonce", try provider.logoutToken(more: ["nonce": "n"])),
                ("audience", try provider.logoutToken(aud: "someone-else")),
                ("events", try provider.logoutToken(events: ["http://example.com/other": [:]])),
                ("sid and sub", try provider.logoutToken(sid: nil, sub: nil)),
                ("old", try provider.logoutToken(issuedAgo: 3_600)),
                ("signature", try provider.logoutToken(key: try JWSKey.generate(algorithm: .es256, kid: "ec-1"))),
                ("typ", try provider.logoutToken(typ: "at+jwt")),
                ("id token", try provider.token(aud: "portcullis", claims: ["nonce": "n", "sid": "sid-1"])),
            ]
            for (name, token) in bad {
                let answer = try await Self.backChannel(fixture, token)
                #expect(answer.status == 400 && answer.error == "invalid_request", "\(name): \(answer.raw)")
            }
            let json = try await Self.backChannel(fixture, try provider.logoutToken(), contentType: "application/json")
            #expect(json.status == 400)
            #expect(try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken).status == 200, "nothing ended")
            // typ JWT, and none: pass (and end nothing for an unknown sid).
            #expect(try await Self.backChannel(fixture, try provider.logoutToken(sid: "sid-other", sub: nil, typ: "JWT")).status == 200)
            #expect(try await Self.backChannel(fixture, try provider.logoutToken(sid: "sid-other", sub: nil, typ: nil)).status == 200)
            #expect(try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken).status == 200)
            // An older provider's token without exp passes on its iat, and is remembered: sent again, it is refused.
            let withoutExp = try provider.logoutToken(sid: "sid-other", sub: nil, more: ["exp": .null])
            let passed = try await Self.backChannel(fixture, withoutExp)
            #expect(passed.status == 200, "\(passed.raw)")
            #expect(try await Self.backChannel(fixture, withoutExp).status == 400, "its jti is remembered for iat + 5 minutes")
            // A body over 16 KiB is refused before it is read.
            let huge = try await Self.backChannel(fixture, String(repeating: "a", count: 20_000))
            #expect(huge.status == 413 || huge.status == 400, "\(huge.status)")
            // A second sign-in of the same user; `sub` alone ends both.
            let other = try await Self.signIn(fixture, provider)
            #expect(try await Self.backChannel(fixture, try provider.logoutToken(sid: nil, sub: "user-1")).status == 200)
            for session in [login, other] {
                #expect(try await fixture.refresh(session.refreshToken).status == 401)
            }
        }
    }
}

@Suite("Provider sign-in across instances on PostgreSQL", .serialized, .enabled(if: TestPostgres.enabled, "PostgreSQL is not installed (apt-get install postgresql)"))
struct ProviderSignInScaleOutTests {
    /// Two gateways on one PostgreSQL whose provider `acme` is `provider`.
    static func cluster(_ provider: FakeProvider, secret: String) async throws -> ScaleOut {
        try await ScaleOut(
            configuration: """
                gateway:
                  login_return_origins: [https://app.example.com]
                trust:
                  issuers:
                    - issuer: \(provider.issuer)
                      audiences: [portcullis-api]
                      tenant: acme
                      login:
                        name: acme
                        client_id: portcullis
                        client_secret_file: \(secret)

                """)
    }

    /// A sign-in started on A and completed through B's callback: (session, access token, refresh token, login code).
    static func signIn(_ cluster: ScaleOut, _ provider: FakeProvider) async throws -> (session: String, access: String, refresh: String, code: String) {
        let created = try await cluster.send(.POST, cluster.a + "/api/session/create-anonymous")
        let session = try #require(created["session_id"])
        let started = try await cluster.send(
            .POST, cluster.a + "/api/auth/oidc/acme/start",
            ["session_id": .string(session), "return_to": "https://app.example.com/", "login_challenge": .string(try ProviderLoginTests.challenge(ProviderSignInTests.verifier))])
        #expect(started.status == 200, "\(started.raw)")
        let url = try #require(started["authorization_url"])
        let location = try await ProviderSignInTests.approve(provider, ProviderSignInTests.Started(session: session, authorizationURL: url))
        let path = String(location[try #require(location.range(of: "/api/auth/oidc/callback")).lowerBound...])
        let back = try await Answer.request(.GET, cluster.b + path, followRedirects: false)
        #expect(back.status == 303, "\(back.raw)")
        let code = try #require(ProviderSignInTests.fragment(back, "portcullis_login"))
        let done = try await cluster.send(
            .POST, cluster.b + "/api/auth/oidc/complete",
            ["login_code": .string(code), "session_id": .string(session), "login_verifier": .string(ProviderSignInTests.verifier)])
        #expect(done.status == 200, "\(done.raw)")
        return (session, try #require(done["access_token"]), try #require(done["refresh_token"]), code)
    }

    @Test("two gateways on one PostgreSQL: a provider that answers a deleted user's refresh on A with 400 and an empty body ends the session everywhere: the socket held on B closes with 1008 within a second, and B refuses the access token")
    func providerRefusalAcrossInstances() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let secret = try ProviderLoginTests.clientSecret()
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let cluster = try await Self.cluster(provider, secret: secret)
        var secrets: [String] = []
        do {
            let (session, access, refresh, code) = try await Self.signIn(cluster, provider)
            secrets = [code, access, refresh]
            provider.flow.withLock { $0.deletedSubjects = ["user-1"] }
            let asked = Mutex(Duration.zero)
            let transcript = try await cluster.socketOnB(token: access, session: session) {
                let start = ContinuousClock.now
                let answer = try await cluster.send(.POST, cluster.a + "/api/auth/refresh", ["refresh_token": .string(refresh)])
                asked.withLock { $0 = ContinuousClock.now - start }
                #expect(answer.status == 401 && answer.raw.contains("no longer accepts this sign-in"), "\(answer.raw)")
            }
            #expect(transcript.close?.closeCode == .policyViolation)
            // Measured (issue 65): the refresh on A (the provider asked, its 400 read, the session ended
            // everywhere), then from A's answer to the socket's close on B.
            print("refresh refused on A in \(asked.withLock { $0 }); the socket on B closed \(transcript.secondsToClose) s after A's answer")
            #expect(transcript.secondsToClose < TimeBounds.seconds(1), "closed \(transcript.secondsToClose) s after the provider's refusal")
            #expect(try await cluster.readOnBUntilRefused(session: session, token: access).status == 401, "B refuses the access token")
        } catch {
            cluster.stop(secrets: secrets)
            try await provider.stop()
            throw error
        }
        cluster.stop(secrets: secrets)
        try await provider.stop()
    }

    @Test("two gateways on one PostgreSQL: a sign-in started on A completes through B's callback; a back-channel logout sent to A closes the socket held by B with 1008 within a second")
    func acrossInstances() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let secret = try ProviderLoginTests.clientSecret()
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let cluster = try await Self.cluster(provider, secret: secret)
        var secrets: [String] = []
        do {
            let (session, access, refresh, code) = try await Self.signIn(cluster, provider)
            secrets = [code, access, refresh]
            let logoutToken = try provider.logoutToken(sid: "sid-1", sub: nil)
            let transcript = try await cluster.socketOnB(token: access, session: session) {
                let answer = try await Answer.request(
                    .POST, cluster.a + "/api/auth/oidc/backchannel-logout", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                    body: "logout_token=" + logoutToken)
                #expect(answer.status == 200, "\(answer.raw)")
            }
            #expect(transcript.close?.closeCode == .policyViolation)
            #expect(transcript.secondsToClose < TimeBounds.seconds(1), "closed \(transcript.secondsToClose) s after the logout")
            #expect(try await cluster.readOnBUntilRefused(session: session, token: access).status == 401, "B refuses the revoked access token")
            // The same logout token at B: already used (remembered in the shared store).
            let replay = try await Answer.request(
                .POST, cluster.b + "/api/auth/oidc/backchannel-logout", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: "logout_token=" + logoutToken)
            #expect(replay.status == 400, "\(replay.raw)")
        } catch {
            cluster.stop(secrets: secrets)
            try await provider.stop()
            throw error
        }
        cluster.stop(secrets: secrets)
        try await provider.stop()
    }
}
