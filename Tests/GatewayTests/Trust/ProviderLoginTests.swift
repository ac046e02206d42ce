import ConfigurationReading
import Foundation
import Gateway
import JOSE
import PortcullisTestSupport
import RuntimeAPI
import StateSurface
import TrafficCop
import ProviderLogin
import Testing
import TrustedIssuers

/// Signing in through a trusted provider (issue 37): what is built so far is the
/// configuration, the provider list, the client credentials read at start and
/// `trust check`'s report of what to register at the provider.
@Suite("Provider login: the providers users sign in through")
struct ProviderLoginTests {
    static func clientSecret(_ text: String = "s3cret-of-the-client", mode: Int = 0o600) throws -> String {
        try TrustedIssuerSecretTests.secretFile(Array(text.utf8), mode: mode)
    }

    static func login(_ name: String, secretFile: String, displayName: String? = nil) -> ProviderLoginSettings {
        ProviderLoginSettings(name: name, displayName: displayName, clientID: "portcullis", authentication: .secretBasic(file: secretFile))
    }

    @Test("GET /api/auth/providers lists every provider users sign in through, in configuration order, and no issuer without login; HEAD answers as GET, POST is 405")
    func providersAreListed() async throws {
        let acme = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let secret = try Self.clientSecret()
        defer { try? FileManager.default.removeItem(atPath: secret) }
        var withLogin = acme.trust()
        withLogin.login = Self.login("acme", secretFile: secret, displayName: "Acme SSO")
        let tokensOnly = TrustedIssuer(issuer: "https://tokens-only.example.com", keySource: .discovery, audiences: ["a"], tenant: .fixed("t"))
        let fixture = try await GatewayFixture { configuration in
            configuration.trust = TrustConfiguration(issuers: [tokensOnly, withLogin])
        }
        let listed = try await fixture.send(.GET, "/api/auth/providers")
        #expect(listed.status == 200)
        #expect(listed.json["providers"] == [["name": "acme", "display_name": "Acme SSO", "issuer": .string(acme.issuer)]])
        #expect(!listed.raw.contains("s3cret") && !listed.raw.contains(secret), "no credential and no file name reaches the client")
        let head = try await fixture.send(.HEAD, "/api/auth/providers")
        #expect(head.status == 200 && head.raw.isEmpty)
        let post = try await fixture.send(.POST, "/api/auth/providers", body: "{}")
        #expect(post.status == 405 && post.headers["Allow"].first?.contains("GET") == true)
        try await fixture.stop()
        try await acme.stop()

        let none = try await GatewayFixture()
        #expect(try await none.send(.GET, "/api/auth/providers").json["providers"] == .array([]), "without login providers the list is empty, not 404")
        try await none.stop()
    }

    @Test("a client secret file others can read, an empty one, one holding only a newline, or a private key file without a key stops start naming the key")
    func credentialFilesAreChecked() throws {
        let cases: [(bytes: String, mode: Int, privateKey: Bool, expected: String)] = [
            ("secret", 0o644, false, "others can read"),
            ("", 0o600, false, "empty"),
            ("\n", 0o600, false, "only a newline"),
            ("not a key", 0o600, true, "no PEM private key"),
        ]
        for item in cases {
            let path = try TrustedIssuerSecretTests.secretFile(Array(item.bytes.utf8), mode: item.mode)
            defer { try? FileManager.default.removeItem(atPath: path) }
            var entry = TrustedIssuer(issuer: "https://idp.example.com", keySource: .discovery, audiences: ["a"], tenant: .fixed("t"))
            entry.login = ProviderLoginSettings(
                name: "idp", clientID: "c", authentication: item.privateKey ? .privateKeyJWT(file: path) : .secretBasic(file: path))
            let key = "trust.issuers[1].login." + (item.privateKey ? "private_key_file" : "client_secret_file")
            let other = TrustedIssuer(issuer: "https://other.example.com", keySource: .discovery, audiences: ["a"], tenant: .fixed("t"))
            #expect {
                _ = try ProviderDirectory(trust: TrustConfiguration(issuers: [other, entry]))
            } throws: { error in
                let message = (error as? ConfigurationError)?.message ?? ""
                return message.contains(key) && message.contains(item.expected) && !message.contains("secret\n")
            }
        }
    }

    @Test("a client secret's trailing newline is not part of it; a PEM private key signs (private_key_jwt)")
    func credentialsAreRead() throws {
        let secret = try Self.clientSecret("abc\n")
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let keyPath = try TrustedIssuerSecretTests.secretFile(Array(try JWSKey.generate(algorithm: .es256).privatePEM().utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: keyPath) }
        var first = TrustedIssuer(issuer: "https://one.example.com", keySource: .discovery, audiences: ["a"], tenant: .fixed("t"))
        first.login = Self.login("one", secretFile: secret)
        var second = TrustedIssuer(issuer: "https://two.example.com", keySource: .discovery, audiences: ["a"], tenant: .fixed("t"))
        second.login = ProviderLoginSettings(name: "two", clientID: "c", authentication: .privateKeyJWT(file: keyPath))
        let directory = try ProviderDirectory(trust: TrustConfiguration(issuers: [first, second]))
        guard case .secret(let bytes)? = directory.provider(named: "one")?.credential else {
            Issue.record("the client secret was not read")
            return
        }
        #expect(bytes == Array("abc".utf8))
        guard case .privateKey(let key)? = directory.provider(named: "two")?.credential else {
            Issue.record("the private key was not read")
            return
        }
        #expect(key.algorithm == .es256 && key.canSign)
        #expect(directory.provider(named: "three") == nil && directory.providers.map(\.name) == ["one", "two"])
    }

    @Test("trust check prints the redirect URI and back-channel logout URI to register and the discovered endpoints; a discovery without a token endpoint exits 1 naming it")
    func trustCheckReportsLogin() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let directory = NSTemporaryDirectory() + "portcullis-logincheck-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        guard FileManager.default.createFile(atPath: directory + "/acme.secret", contents: Data("s3cret".utf8), attributes: [.posixPermissions: 0o600]) else {
            throw FixtureError("cannot write the secret")
        }
        let yaml = """
            gateway:
              public_url: https://auth.example.com/
            trust:
              issuers:
                - issuer: \(provider.issuer)
                  audiences: [portcullis-api]
                  tenant: acme
                  login:
                    name: acme
                    display_name: Acme SSO
                    client_id: portcullis
                    client_secret_file: acme.secret

            """
        try yaml.write(toFile: directory + "/login.yaml", atomically: true, encoding: .utf8)
        let up = try await runPortcullis(["trust", "check", "--config", "login.yaml"], directory: directory)
        #expect(up.status == 0, "\(up.output)")
        #expect(up.output.contains("redirect URI to register: https://auth.example.com/api/auth/oidc/callback"), "\(up.output)")
        #expect(up.output.contains("back-channel logout URI to register: https://auth.example.com/api/auth/oidc/backchannel-logout"))
        #expect(up.output.contains("token endpoint: \(provider.issuer)/protocol/openid-connect/token"))
        #expect(up.output.contains("back-channel logout: supported"))
        #expect(!up.output.contains("s3cret"), "the client secret is never printed")
        provider.publishesCodeFlow = false
        let broken = try await runPortcullis(["trust", "check", "--config", "login.yaml", "--json"], directory: directory)
        #expect(broken.status == 1, "\(broken.output)")
        #expect(broken.output.contains("names no https authorization_endpoint") && broken.output.contains(#""redirect_uri":"https://auth.example.com/api/auth/oidc/callback""#), "\(broken.output)")
        try await provider.stop()
    }

    @Test("gateway.public_url is the base of both URIs (gateway.issuer when unset), and a login returns to the public URL's own origin unless login_return_origins lists others")
    func publicURLAndReturnOrigins() {
        var configuration = GatewayConfiguration()
        configuration.issuer = "http://127.0.0.1:8080/"
        #expect(configuration.loginRedirectURI == "http://127.0.0.1:8080/api/auth/oidc/callback")
        #expect(configuration.effectiveLoginReturnOrigins == ["http://127.0.0.1:8080"])
        configuration.publicURL = "https://Auth.Example.com/edge"
        #expect(configuration.backChannelLogoutURI == "https://Auth.Example.com/edge/api/auth/oidc/backchannel-logout")
        #expect(configuration.effectiveLoginReturnOrigins == ["https://auth.example.com"], "an origin is scheme, host and port, lower-cased")
        configuration.publicURL = "http://auth.example.com:80/"
        #expect(configuration.effectiveLoginReturnOrigins == ["http://auth.example.com"], "the scheme's own port is left out, as a browser writes an origin")
        configuration.loginReturnOrigins = ["https://app.example.com"]
        #expect(configuration.effectiveLoginReturnOrigins == ["https://app.example.com"])
    }

    /// A gateway whose trusted provider `acme` users sign in through, returning to https://app.example.com.
    static func loginGateway(_ provider: FakeProvider, secretFile: String) async throws -> GatewayFixture {
        var entry = provider.trust()
        entry.login = Self.login("acme", secretFile: secretFile, displayName: "Acme SSO")
        return try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            configuration.loginReturnOrigins = ["https://app.example.com"]
            // A start shares the password login's per-client bucket; these tests send many from one address.
            configuration.rateLimits[.loginPerClient] = RateLimit(perMinute: 6_000, burst: 200)
        }, entries: [entry])
    }

    /// Runs `body` against a gateway whose provider `acme` users sign in through (`loginGateway`), then stops both.
    static func withLoginGateway(publishingCodeFlow: Bool = true, _ body: (FakeProvider, GatewayFixture) async throws -> Void) async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        provider.publishesCodeFlow = publishingCodeFlow
        let secret = try Self.clientSecret()
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let fixture = try await Self.loginGateway(provider, secretFile: secret)
        try await body(provider, fixture)
        try await fixture.stop()
        try await provider.stop()
    }

    /// A browser's login challenge: the base64url SHA-256 of a verifier it keeps.
    static func challenge(_ verifier: String = "the-browser-keeps-this-verifier") throws -> String {
        Base64URL.encode(try Digest.sha256(Array(verifier.utf8)))
    }

    /// The query of `url` as pairs, percent-decoded.
    static func query(_ url: String) -> [String: String] {
        guard let components = URLComponents(string: url) else { return [:] }
        return Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
    }

    @Test("start answers the provider's authorization URL with response_type=code, client_id, redirect_uri, scope, state, nonce and an S256 PKCE challenge; the session id never enters it; the flow is kept by its state's hash, once")
    func startBuildsTheAuthorizationURL() async throws {
        try await Self.withLoginGateway { provider, fixture in
            let session = try await fixture.createAnonymousSession()
            let answer = try await fixture.post(
                "/api/auth/oidc/acme/start",
                ["session_id": .string(session), "return_to": "https://app.example.com/after?x=1", "login_challenge": .string(try Self.challenge())])
            #expect(answer.status == 200, "\(answer.raw)")
            #expect(answer.headers["Cache-Control"].first == "no-store")
            let url = try #require(answer["authorization_url"])
            #expect(url.hasPrefix(provider.issuer + "/protocol/openid-connect/auth?"))
            #expect(!url.contains(session), "the session id never goes into a URL")
            let query = Self.query(url)
            #expect(query["response_type"] == "code" && query["client_id"] == "portcullis" && query["code_challenge_method"] == "S256")
            #expect(query["redirect_uri"] == fixture.server.gateway.loginRedirectURI)
            #expect(query["scope"] == "openid profile email")
            let state = try #require(query["state"]), nonce = try #require(query["nonce"]), codeChallenge = try #require(query["code_challenge"])
            #expect(state.utf8.count == 43 && nonce.utf8.count == 43 && state != nonce, "256 random bits each")
            let flow = try #require(try await fixture.state.takeLoginFlow(stateHash: LoginStart.hash(state), now: Date().timeIntervalSince1970))
            #expect(flow.sessionID == session && flow.nonce == nonce && flow.provider == "acme" && flow.returnTo == "https://app.example.com/after?x=1")
            #expect(codeChallenge == Base64URL.encode(try Digest.sha256(Array(flow.codeVerifier.utf8))), "the challenge is S256 of the kept verifier")
            #expect(flow.expiresAt - flow.createdAt == 600)
            #expect(try await fixture.state.takeLoginFlow(stateHash: LoginStart.hash(state), now: Date().timeIntervalSince1970) == nil, "taken once")
            // A second start for the same session is a second flow with its own state.
            let again = try await fixture.post(
                "/api/auth/oidc/acme/start",
                ["session_id": .string(session), "return_to": "https://app.example.com/", "login_challenge": .string(try Self.challenge())])
            #expect(Self.query(again["authorization_url"] ?? "")["state"] != state)
            fixture.remember(flow.codeVerifier)
            fixture.remember(nonce)
        }
    }

    @Test("start refuses, and keeps nothing for: an unknown provider (404), a return_to off the allowed origins in any spelling (400), a malformed login_challenge or session id (400), an unknown session (404), a signed-in session (409)")
    func startRefusals() async throws {
        try await Self.withLoginGateway { provider, fixture in
            let session = try await fixture.createAnonymousSession()
            let challenge = try Self.challenge()
            func start(_ name: String = "acme", session: String? = nil, returnTo: String = "https://app.example.com/", loginChallenge: String? = nil) async throws -> Answer {
                var body: JSONObject = ["return_to": .string(returnTo), "login_challenge": .string(loginChallenge ?? challenge)]
                if let session { body["session_id"] = .string(session) }
                return try await fixture.post("/api/auth/oidc/\(name)/start", .object(body))
            }
            let unknown = try await start("globex", session: session)
            #expect(unknown.status == 404 && unknown.error == "provider_not_found")
            for returnTo in [
                "https://evil.example.com/", "//app.example.com/x", "/relative", "https://app.example.com@evil.example.com/", "https://app.example.com.evil.example.com/",
                "http://app.example.com/", "https://app.example.com:444/", "javascript:alert(1)", "https://app.example.com\\@evil.example.com/",
                "https://app.example.com/\u{0}x",
            ] {
                let answer = try await start(session: session, returnTo: returnTo)
                #expect(answer.status == 400 && answer.error == "invalid_request" && answer.raw.contains("return_to"), "\(returnTo): \(answer.raw)")
            }
            #expect(try await start(session: session, returnTo: "HTTPS://APP.EXAMPLE.COM/Back").status == 200, "an origin compares without case")
        #expect(try await start(session: session, returnTo: "https://app.example.com:443/Back").status == 200, "the scheme's own port is the same origin")
            for bad in ["", "short", String(repeating: "A", count: 44), String(repeating: "A", count: 42) + "B", "abc+/=" + String(repeating: "A", count: 37)] {
                let answer = try await start(session: session, loginChallenge: bad)
                #expect(answer.status == 400 && answer.raw.contains("login_challenge"), "\(bad): \(answer.raw)")
            }
            #expect(try await start().error == "session_missing")
            #expect(try await start(session: "not-a-session").error == "session_malformed")
            #expect(try await start(session: try SessionID.generate()).status == 404)
            try await fixture.addUser("alice")
            let owned = try await fixture.login("alice", sessionID: try await fixture.createAnonymousSession())
            let signedIn = try await start(session: owned.sessionID)
            #expect(signedIn.status == 409 && signedIn.error == "session_conflict")
            let count = try await fixture.state.deleteExpiredLoginFlows(before: Date().timeIntervalSince1970 + 3600)
            #expect(count == 2, "only the two accepted starts kept a flow")
        }
    }

    @Test("while the provider's discovery names no sign-in endpoints, start is 503 issuer_unavailable with Retry-After, and the provider is still listed")
    func startWithoutEndpoints() async throws {
        try await Self.withLoginGateway(publishingCodeFlow: false) { _, fixture in
            let session = try await fixture.createAnonymousSession()
            let answer = try await fixture.post(
                "/api/auth/oidc/acme/start", ["session_id": .string(session), "return_to": "https://app.example.com/", "login_challenge": .string(try Self.challenge())])
            #expect(answer.status == 503 && answer.error == "issuer_unavailable" && answer.headers["Retry-After"].first == "5", "\(answer.raw)")
            #expect(try await fixture.send(.GET, "/api/auth/providers").raw.contains("acme"))
        }
    }

    @Test("a discovered token endpoint (where the client credential goes) on another origin than the issuer's is refused, naming login.token_endpoint_origin; with that origin set it is used")
    func tokenEndpointOnTheIssuersOrigin() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let port = try #require(URL(string: provider.issuer)?.port)
        provider.tokenEndpointElsewhere = "http://localhost:\(port)/realms/acme/protocol/openid-connect/token"
        var entry = provider.trust()
        entry.login = Self.login("acme", secretFile: "/nonexistent")
        let refused = try TrustedIssuers(configuration: TrustConfiguration(issuers: [entry]), leeway: 30, logger: .init(label: "test"))
        await refused.refreshAll()
        guard case .failure(let error)? = refused.statuses.first?.endpoints else {
            Issue.record("a token endpoint on another origin was accepted")
            return
        }
        #expect(error.message.contains("token_endpoint_origin") && error.message.contains("http://localhost:\(port)"), "\(error.message)")
        entry.login?.tokenEndpointOrigin = "http://localhost:\(port)"
        let allowed = try TrustedIssuers(configuration: TrustConfiguration(issuers: [entry]), leeway: 30, logger: .init(label: "test"))
        await allowed.refreshAll()
        guard case .success(let endpoints)? = allowed.statuses.first?.endpoints else {
            Issue.record("the configured origin was refused: \(String(describing: allowed.statuses.first?.endpoints))")
            return
        }
        #expect(endpoints.token == provider.tokenEndpointElsewhere)
        try await provider.stop()
    }
}

@Suite("Provider login: the ID token, checked as OpenID Connect Core 3.1.3.7 says")
struct IDTokenVerificationTests {
    @Test("an ID token passes only with this gateway's client_id as aud (azp when several), this sign-in's nonce, the issuer's key, iat and an unexpired exp; an access token (typ at+jwt) never passes")
    func idTokenRules() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let trusted = try TrustedIssuers(configuration: TrustConfiguration(issuers: [provider.trust()]), leeway: 30, logger: .init(label: "test"))
        await trusted.refreshAll()
        let stranger = try JWSKey.generate(algorithm: .es256, kid: "ec-1")
        func check(_ token: String) async -> IDTokenVerification {
            await trusted.verifyIDToken(token, issuer: provider.issuer, clientID: "portcullis", nonce: "n-1")
        }
        func reason(_ outcome: IDTokenVerification) -> String? {
            if case .refused(let error) = outcome { return error.reason.rawValue }
            return nil
        }
        let good = try provider.token(sub: "u-7", aud: "portcullis", claims: ["nonce": "n-1", "sid": "ps-1"])
        guard case .verified(let verified) = await check(good) else {
            Issue.record("a good ID token was refused: \(await check(good))")
            return
        }
        #expect(verified.identity == ExternalIdentity(issuer: provider.issuer, subject: "u-7", tenantID: "acme") && verified.providerSessionID == "ps-1")
        #expect(reason(await check(try provider.token(aud: "portcullis", claims: ["nonce": "n-2"]))) == "invalid_claim", "another sign-in's nonce")
        #expect(reason(await check(try provider.token(aud: "portcullis"))) == "missing_claim", "no nonce")
        #expect(reason(await check(try provider.token(aud: "portcullis-api", claims: ["nonce": "n-1"]))) == "wrong_audience", "the access tokens' audience is not the client")
        #expect(reason(await check(try provider.token(aud: ["portcullis", "other"], claims: ["nonce": "n-1"]))) == "missing_claim", "several audiences, no azp")
        #expect(reason(await check(try provider.token(aud: ["portcullis", "other"], claims: ["nonce": "n-1", "azp": "other"]))) == "invalid_claim")
        if case .verified = await check(try provider.token(aud: ["portcullis", "other"], claims: ["nonce": "n-1", "azp": "portcullis"])) {} else {
            Issue.record("several audiences with azp = the client are fine")
        }
        #expect(reason(await check(try provider.token(aud: "portcullis", lifetime: -120, claims: ["nonce": "n-1"]))) == "expired")
        #expect(reason(await check(try provider.token(aud: "portcullis", key: stranger, claims: ["nonce": "n-1"]))) == "bad_signature")
        #expect(reason(await check(try provider.token(aud: "portcullis", header: ["typ": "at+jwt"], claims: ["nonce": "n-1"]))) == "wrong_type")
        #expect(reason(await check(try provider.token(aud: "portcullis", issuer: "https://other.example.com", claims: ["nonce": "n-1"]))) == "wrong_issuer")
        #expect(reason(await check("not.a.token")) != nil)
        try await provider.stop()
    }
}
