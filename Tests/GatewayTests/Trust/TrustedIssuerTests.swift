import ConfigurationReading
import DataPlane
import EdgeHTTP
import Foundation
import Gateway
import JOSE
import PortcullisTestSupport
import Testing
@testable import TrustedIssuers

/// Trusted issuers (issue 21): a provider's access token is a credential like the
/// gateway's own, checked with that provider's keys only, fetched off the hot path.
@Suite("Trusted issuers: tokens from an identity provider, verified from its JWKS")
struct TrustedIssuerTests {
    static func gateway(
        _ providers: [FakeProvider], configure: (inout GatewayConfiguration) -> Void = { _ in }, entries: [TrustedIssuer]? = nil,
        clock: any TokenClock = SystemClock()
    ) async throws -> GatewayFixture {
        let fixture = try await GatewayFixture(trustClock: clock) { configuration in
            configuration.trust = TrustConfiguration(issuers: entries ?? providers.map { $0.trust() })
            configure(&configuration)
        }
        try await Self.waitForKeys(fixture)
        return fixture
    }

    /// Until every issuer's keys were fetched once (start does not wait for them).
    static func waitForKeys(_ fixture: GatewayFixture) async throws {
        let trusted = try #require(fixture.server.services.trustedIssuers)
        for _ in 0..<200 where !trusted.statuses.allSatisfy({ $0.usable }) {
            try await Task.sleep(for: .milliseconds(25))
        }
        let errors = trusted.statuses.map { $0.lastError ?? "-" }
        let usable = trusted.statuses.allSatisfy { $0.usable }
        #expect(usable, "\(errors)")
    }

    @Test("a provider's token upgrades an anonymous session, reads it, runs an intent and reaches a route, with idp_iss and idp_sub in the assertion")
    func tokenWorksEverywhere() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .rs256, kid: "rsa-1")])
        let upstream = try await RecordingUpstream.start()
        let fixture = try await Self.gateway([provider]) { $0.routes = [ProxyRoute(prefix: "/api/v1", upstream: "http://127.0.0.1:\(upstream.port)")] }
        let token = try provider.token(sub: "alice@idp")
        fixture.remember(token)
        let session = try await fixture.createAnonymousSession()
        let upgraded = try await fixture.send(.PATCH, "/api/session/\(session)/upgrade", bearer: token, body: "{}")
        #expect(upgraded.status == 200, "\(upgraded.raw)")
        let read = try await fixture.send(.GET, "/api/session/\(session)", bearer: token)
        #expect(read.status == 200 && read["state"] == "authenticated" && read["tenant_id"] == "acme", "\(read.raw)")
        #expect(read["user_id"]?.hasPrefix("ext_") == true)
        let intent = try await fixture.send(.POST, "/api/intent", bearer: token, body: #"{"session_id":"\#(session)","intent_type":"echo","payload":{"n":1}}"#)
        #expect(intent.status == 200, "\(intent.raw)")
        let proxied = try await fixture.send(.GET, "/api/v1/x", bearer: token, headers: [("X-Session-Id", session)])
        #expect(proxied.status == 200, "\(proxied.raw)")
        let assertion = try #require(proxied.receivedHeaders["x-portcullis-assertion"]?.first)
        let claims = try StrictJSONReader().parseObject(try #require(Base64URL.decode(String(assertion.split(separator: ".")[1]))))
        #expect(claims["idp_iss"] == .string(provider.issuer))
        #expect(claims["idp_sub"] == .string("alice@idp"))
        #expect(claims["session_id"] == .string(session))
        #expect(claims["sub"]?.stringValue == read["user_id"])
        try await fixture.stop()
        try await upstream.stop()
        try await provider.stop()
    }

    @Test("the same sub from another issuer, or a local account's id, is another user: 403 on the first one's session")
    func subjectCollision() async throws {
        let first = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        let second = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "b")])
        var other = second.trust()
        other.tenant = .fixed("acme")  // the same tenant too
        let fixture = try await Self.gateway([first, second], entries: [first.trust(), other])
        let session = try await fixture.createAnonymousSession()
        #expect(try await fixture.send(.PATCH, "/api/session/\(session)/upgrade", bearer: try first.token(sub: "shared"), body: "{}").status == 200)
        let fromSecond = try await fixture.send(.GET, "/api/session/\(session)", bearer: try second.token(sub: "shared"))
        #expect(fromSecond.status == 403, "\(fromSecond.raw)")
        // A local account whose id is the provider's subject string is someone else as well.
        try await fixture.addUser("shared", tenant: "acme")
        let local = try await fixture.login("shared", tenant: "acme")
        #expect(try await fixture.send(.GET, "/api/session/\(session)", bearer: local.accessToken).status == 403)
        try await fixture.stop()
        try await first.stop()
        try await second.stop()
    }

    @Test("a token's iss picks its issuer's keys only: another issuer's key, the gateway's key, and a provider claiming the gateway's iss are all refused")
    func keysNeverCross() async throws {
        let first = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        let second = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "b")])
        let fixture = try await Self.gateway([first, second])
        let session = try await fixture.createAnonymousSession()
        // Issuer A's claims signed by issuer B's key.
        let crossed = try first.token(key: second.keys[0])
        // The unknown kid makes A's keys be fetched again; on a loaded machine that fetch can outlast the
        // 3 s an unknown kid waits (503 issuer_unavailable, never a pass), so a 503 is asked again.
        var refusal = try await fixture.send(.GET, "/api/session/\(session)", bearer: crossed)
        for _ in 0..<5 where refusal.status == 503 && refusal.error == "issuer_unavailable" {
            try await Task.sleep(for: .seconds(1))
            refusal = try await fixture.send(.GET, "/api/session/\(session)", bearer: crossed)
        }
        #expect(refusal.status == 401 && refusal.json["reason"] == "unknown_key", "\(refusal.raw)")
        // A's claims signed by B's key under A's kid: the signature fails against A's key.
        let underKid = try first.token(key: second.keys[0], header: ["kid": "a"])
        #expect(try await fixture.send(.GET, "/api/session/\(session)", bearer: underKid).json["reason"] == "bad_signature")
        // The gateway's own key signing a token that names a provider as issuer: the provider's keys decide.
        let gatewayKey = try fixture.keys.currentSigningKey()
        let forged = try first.token(key: gatewayKey)
        #expect(try await fixture.send(.GET, "/api/session/\(session)", bearer: forged).status == 401)
        // A provider's key signing a token with the gateway's iss: the gateway's keys decide.
        let impostor = try first.token(issuer: "http://127.0.0.1:8080", claims: ["tenant_id": "acme", "client_id": "x", "nbf": .number(Date().timeIntervalSince1970 - 5)])
        #expect(try await fixture.send(.GET, "/api/session/\(session)", bearer: impostor).status == 401)
        try await fixture.stop()
        try await first.stop()
        try await second.stop()
    }

    @Test("alg confusion: HS256 signed with the provider's RSA public key as the secret is refused")
    func algorithmConfusion() async throws {
        let rsa = try JWSKey.generate(algorithm: .rs256, kid: "rsa-1")
        let provider = try await FakeProvider.start(keys: [rsa])
        let fixture = try await Self.gateway([provider])
        let publicPEM = try rsa.publicPEM()
        let confused = try JWSKey(hmacSecret: Array(publicPEM.utf8), algorithm: .hs256, kid: "rsa-1")
        let token = try provider.token(key: confused)
        let answer = try await fixture.send(.GET, "/api/session/\(try await fixture.createAnonymousSession())", bearer: token)
        #expect(answer.status == 401 && answer.json["reason"] == "algorithm_mismatch", "\(answer.raw)")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("jku and x5u in a token are never fetched, and the token is refused")
    func jkuNeverFetched() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        let lure = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "evil")])
        let fixture = try await Self.gateway([provider])
        for member in ["jku", "x5u"] {
            let token = try provider.token(key: lure.keys[0], header: [member: .string(lure.jwksURL), "kid": "evil"])
            let answer = try await fixture.send(.GET, "/api/session/\(try await fixture.createAnonymousSession())", bearer: token)
            #expect(answer.status == 401 && answer.json["reason"] == "forbidden_header", "\(member): \(answer.raw)")
        }
        #expect(lure.jwksRequests == 0 && lure.discoveryRequests == 0)
        try await fixture.stop()
        try await provider.stop()
        try await lure.stop()
    }

    @Test("a key rotated in at the provider works on first use, with one fetch")
    func rotation() async throws {
        let old = try JWSKey.generate(algorithm: .es256, kid: "old")
        let provider = try await FakeProvider.start(keys: [old])
        let fixture = try await Self.gateway([provider])
        let session = try await fixture.createAnonymousSession()
        #expect(provider.jwksRequests == 1, "one fetch at start")
        let new = try JWSKey.generate(algorithm: .es256, kid: "new")
        provider.publish([old, new])
        let rotated = try await fixture.send(.PATCH, "/api/session/\(session)/upgrade", bearer: try provider.token(key: new), body: "{}")
        #expect(rotated.status == 200, "\(rotated.raw)")
        #expect(provider.jwksRequests == 2, "the new kid cost one fetch")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("a flood of requests with unknown kids is 401 throughout and costs at most 2 fetches in all (start, and one shared miss)")
    func kidFlood() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "known")])
        let fixture = try await Self.gateway([provider])
        let session = try await fixture.createAnonymousSession()
        let stranger = try JWSKey.generate(algorithm: .es256, kid: "x")
        // 1,000 when measured (PORTCULLIS_FLOOD=1000); 300 in the suite, which runs beside AddressSanitizer in CI.
        let count = ProcessInfo.processInfo.environment["PORTCULLIS_FLOOD"].flatMap(Int.init) ?? 300
        let tokens = try (0..<count).map { index in try provider.token(key: stranger, header: ["kid": .string("unknown-\(index)")]) }
        let port = fixture.gatewayPort
        var statuses: [Int: Int] = [:]
        for batch in stride(from: 0, to: tokens.count, by: 50) {
            let answers = try await withThrowingTaskGroup(of: Int.self) { group in
                for token in tokens[batch..<min(batch + 50, tokens.count)] {
                    group.addTask { try await Answer.request(.GET, "http://127.0.0.1:\(port)/api/session/\(session)", bearer: token).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            for status in answers { statuses[status, default: 0] += 1 }
        }
        #expect(statuses == [401: count], "\(statuses)")
        #expect(provider.jwksRequests <= 2, "\(provider.jwksRequests) JWKS fetches in all for \(count) unknown kids")
        // The known key still works through the flood's cooldown.
        #expect(try await fixture.send(.GET, "/api/session/\(session)", bearer: try provider.token()).status == 200)
        if ProcessInfo.processInfo.environment["PORTCULLIS_REPORT"] != nil { print("kid flood: \(provider.jwksRequests) JWKS fetches in all, \(statuses)") }
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("while the provider is down its known keys keep working; past max_stale_seconds its tokens are 503 issuer_unavailable, not 401")
    func providerDown() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        // The issuers' clock is the test's: staleness comes by advancing it, not by waiting.
        let clock = ShiftedClock()
        let fixture = try await Self.gateway([provider], entries: [provider.trust(staleness: 600)], clock: clock)
        let session = try await fixture.createAnonymousSession()
        provider.set(.down)
        clock.advance(by: 300)
        let known = try await fixture.send(.GET, "/api/session/\(session)", bearer: try provider.token(lifetime: 3_600))
        #expect(known.status == 200, "\(known.raw)")
        clock.advance(by: 400)
        let stale = try await fixture.send(.GET, "/api/session/\(session)", bearer: try provider.token(lifetime: 3_600))
        #expect(stale.status == 503 && stale["error"] == "issuer_unavailable", "\(stale.raw)")
        #expect(stale.headers.first(name: "Retry-After") != nil)
        // Back: the background refresh (due again at once on this clock) restores it.
        provider.set(.normal)
        var status = 503
        for _ in 0..<200 where status != 200 {
            try await Task.sleep(for: .milliseconds(100))
            clock.advance(by: 60)
            status = try await fixture.send(.GET, "/api/session/\(session)", bearer: try provider.token(lifetime: 3_600)).status
        }
        #expect(status == 200)
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("an oversized, a malformed and a slow JWKS are refused with the reason, and the last good keys stay", arguments: [FakeProvider.Mode.oversized, .malformed, .slow])
    func badJWKS(mode: FakeProvider.Mode) async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        let fixture = try await Self.gateway([provider], entries: [provider.trust(cooldown: 1)])
        let trusted = try #require(fixture.server.services.trustedIssuers)
        provider.set(mode)
        // An unknown kid asks for a fetch; it fails, and a token with the known key still works.
        let unknown = try provider.token(header: ["kid": "rotated"])
        let refused = try await fixture.send(.GET, "/api/session/\(try await fixture.createAnonymousSession())", bearer: unknown)
        // A slow JWKS holds the request for the few seconds of the unknown-kid wait, then 503: the provider's fault.
        #expect(refused.status == (mode == .slow ? 503 : 401), "\(refused.raw)")
        for _ in 0..<300 where trusted.statuses.first?.lastError == nil { try await Task.sleep(for: .milliseconds(50)) }
        let error = try #require(trusted.statuses.first?.lastError)
        switch mode {
        case .oversized: #expect(error.contains("more than 1 MiB"), "\(error)")
        case .malformed: #expect(error.contains("not strict JSON"), "\(error)")
        default: #expect(error.contains("did not answer within"), "\(error)")
        }
        #expect(try await fixture.send(.GET, "/api/session/\(try await fixture.createAnonymousSession())", bearer: try provider.token()).status == 200)
        try await fixture.stop()
        try await provider.stop()
    }
}

@Suite("Trusted issuers: what a provider's outage and its tokens cannot do")
struct TrustedIssuerHardeningTests {
    @Test("a Cache-Control max-age is delta-seconds (digits only): nan, inf, a sign, a fraction or an exponent is the default hour; 20 digits is the 24-hour ceiling")
    func maximumAgeIsDeltaSeconds() {
        let cases: [(String?, Double)] = [
            ("max-age=600", 600), ("public, MAX-AGE=7200", 7_200), ("max-age=1", 300), (nil, 3_600), ("no-store", 3_600),
            ("max-age=nan", 3_600), ("max-age=NaN", 3_600), ("max-age=inf", 3_600), ("max-age=infinity", 3_600), ("max-age=-600", 3_600),
            ("max-age=+600", 3_600), ("max-age=600.5", 3_600), ("max-age=6e2", 3_600), ("max-age=0x258", 3_600), ("max-age=", 3_600),
            ("max-age=\"600\"", 3_600), ("max-age=99999999999999999999", 86_400),
        ]
        for (header, seconds) in cases {
            let age = KeyFetcher.maximumAge(header)
            #expect(age == seconds, "\(header ?? "none"): \(age)")
        }
    }

    @Test("the 503 issuer_unavailable names the issuer only: the provider's URL and fetch error stay in the log and the admin listener's readiness")
    func unavailableBodyHasNoDetail() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        provider.set(.down)
        let fixture = try await GatewayFixture { $0.trust = TrustConfiguration(issuers: [provider.trust()]) }
        let trusted = try #require(fixture.server.services.trustedIssuers)
        for _ in 0..<200 where trusted.statuses.first?.lastError == nil { try await Task.sleep(for: .milliseconds(25)) }
        // An unsigned token (any signature) naming the issuer is enough to ask.
        let forged = try provider.token(key: try JWSKey.generate(algorithm: .es256, kid: "a"))
        let answer = try await fixture.send(.GET, "/api/session/ses_AAAAAAAAAAAAAAAAAAAAAA", bearer: forged)
        #expect(answer.status == 503 && answer.error == "issuer_unavailable", "\(answer.raw)")
        #expect(answer.raw.contains(provider.issuer))
        for detail in ["/certs", "openid-configuration", "answered 503", "cannot be reached"] {
            #expect(!answer.raw.contains(detail), "\(detail) in \(answer.raw)")
        }
        #expect(trusted.statuses.first?.lastError?.contains("answered 503") == true)
        let readiness = try await Answer.request(.GET, "http://127.0.0.1:\(fixture.adminPort)/readyz")
        #expect(readiness.raw.contains("answered 503"), "\(readiness.raw)")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("tokens with an unknown kid wait a few seconds at most for the provider's keys (discovery and JWKS together): a JWKS that hangs is 503 issuer_unavailable after them, not a request held for the fetch's own timeouts, and the slow fetch is logged once, not once per request")
    func unknownKeyWaitIsBounded() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        let fixture = try await TrustedIssuerTests.gateway([provider])
        let session = try await fixture.createAnonymousSession()
        provider.set(.slow)  // the JWKS answers after 15 s
        let token = try provider.token(key: try JWSKey.generate(algorithm: .es256, kid: "new"))
        let port = fixture.gatewayPort
        let started = ContinuousClock.now
        // Five at once: all wait for the one fetch the first starts.
        let answers = try await withThrowingTaskGroup(of: (Answer, Duration).self) { group in
            for _ in 0..<5 {
                group.addTask {
                    let answer = try await Answer.request(.GET, "http://127.0.0.1:\(port)/api/session/\(session)", bearer: token)
                    return (answer, ContinuousClock.now - started)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for (answer, waited) in answers {
            #expect(answer.status == 503 && answer.error == "issuer_unavailable", "\(answer.raw)")
            #expect(waited >= .seconds(2.5) && waited < .seconds(TimeBounds.seconds(6)), "answered after \(waited)")
        }
        // Give any further line its chance to be written before counting.
        try await Task.sleep(for: .milliseconds(200))
        #expect(await fixture.log.lines(containing: "not fetched in time").count == 1)
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("an issuer's tenant_claim may name only the tenants listed beside it: another tenant (one another issuer maps to) is 403 tenant_forbidden; a listed one works")
    func tenantClaimIsTiedToItsIssuer() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        var entry = provider.trust()
        entry.tenant = .claim("org", tenants: ["globex"])
        let fixture = try await TrustedIssuerTests.gateway([provider], entries: [entry])
        let session = try await fixture.createAnonymousSession()
        let foreign = try await fixture.send(.GET, "/api/session/\(session)", bearer: try provider.token(claims: ["org": "acme"]))
        #expect(foreign.status == 403 && foreign.error == "tenant_forbidden", "\(foreign.raw)")
        let own = try await fixture.send(.PATCH, "/api/session/\(session)/upgrade", bearer: try provider.token(claims: ["org": "globex"]), body: "{}")
        #expect(own.status == 200, "\(own.raw)")
        #expect(own["tenant_id"] == "globex")
        try await fixture.stop()
        try await provider.stop()
    }
}

@Suite("Trusted issuers: shared secrets, logout, readiness")
struct TrustedIssuerSecretTests {
    static func secretFile(_ bytes: [UInt8], mode: Int) throws -> String {
        let path = NSTemporaryDirectory() + "portcullis-secret-" + UUID().uuidString
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes), attributes: [.posixPermissions: mode]) else {
            throw FixtureError("cannot write \(path)")
        }
        return path
    }

    static let supabase = "https://project.supabase.co/auth/v1"

    @Test("a legacy project secret verifies HS256 tokens without kid, with the provider's own session_id claim ignored")
    func sharedSecret() async throws {
        let secret = Array("super-secret-jwt-token-with-at-least-32-characters-long".utf8)
        let path = try Self.secretFile(secret, mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let entry = TrustedIssuer(issuer: Self.supabase, keySource: .secret(file: path), audiences: ["authenticated"], algorithms: [.hs256], tenant: .fixed("main"))
        let fixture = try await GatewayFixture { $0.trust = TrustConfiguration(issuers: [entry]) }
        let key = try JWSKey(hmacSecret: secret, algorithm: .hs256, kid: "unused")
        let now = Date().timeIntervalSince1970.rounded(.down)
        let claims: JSONObject = [
            "iss": .string(Self.supabase), "sub": "8f7e6d5c", "aud": "authenticated", "exp": .number(now + 3_600), "iat": .number(now),
            "role": "authenticated", "session_id": "their-own-session",
        ]
        let token = try JWSCompact.sign(header: ["alg": "HS256", "typ": "JWT"], payload: JSONWriter.bytes(.object(claims)), key: key)
        fixture.remember(token)
        let session = try await fixture.createAnonymousSession()
        let upgraded = try await fixture.send(.PATCH, "/api/session/\(session)/upgrade", bearer: token, body: "{}")
        #expect(upgraded.status == 200 && upgraded["tenant_id"] == "main", "\(upgraded.raw)")
        // Another secret, or the right secret under another algorithm, is refused.
        let wrong = try JWSCompact.sign(
            header: ["alg": "HS256", "typ": "JWT"], payload: JSONWriter.bytes(.object(claims)),
            key: try JWSKey(hmacSecret: Array(repeating: 7, count: 32), algorithm: .hs256, kid: "x"))
        #expect(try await fixture.send(.GET, "/api/session/\(session)", bearer: wrong).json["reason"] == "bad_signature")
        let otherAlgorithm = try JWSCompact.sign(
            header: ["alg": "HS384", "typ": "JWT"], payload: JSONWriter.bytes(.object(claims)), key: try JWSKey(hmacSecret: secret, algorithm: .hs384, kid: "x"))
        #expect(try await fixture.send(.GET, "/api/session/\(session)", bearer: otherAlgorithm).json["reason"] == "algorithm_mismatch")
        try await fixture.stop()
    }

    @Test("a secret file others can read, or a text one ending in a newline, stops start naming the key; random bytes ending in 0x0A load")
    func unsafeSecretFiles() throws {
        for (bytes, mode, expected) in [(Array(repeating: UInt8(65), count: 40), 0o644, "others can read"), (Array(repeating: UInt8(65), count: 40) + [10], 0o600, "newline"), ([65, 66], 0o600, "at least 32 bytes")] {
            let path = try Self.secretFile(bytes, mode: mode)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let entry = TrustedIssuer(issuer: Self.supabase, keySource: .secret(file: path), audiences: ["authenticated"], algorithms: [.hs256], tenant: .fixed("main"))
            #expect {
                _ = try TrustedIssuers(configuration: TrustConfiguration(issuers: [entry]), leeway: 30, logger: .init(label: "test"))
            } throws: { error in
                let message = (error as? ConfigurationError)?.message ?? ""
                return message.contains("trust.issuers[0].secret_file") && message.contains(expected)
            }
        }
        // Bytes that are not text (openssl rand 32) and end in 0x0A by chance are a secret as they stand.
        let random = try Self.secretFile([0xFF] + (1..<32).map { UInt8(($0 * 37 + 11) % 256) } + [10], mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: random) }
        let entry = TrustedIssuer(issuer: Self.supabase, keySource: .secret(file: random), audiences: ["authenticated"], algorithms: [.hs256], tenant: .fixed("main"))
        _ = try TrustedIssuers(configuration: TrustConfiguration(issuers: [entry]), leeway: 30, logger: .init(label: "test"))
    }

    @Test("logout with a provider's token ends the session, closes nothing it should not, and refuses that token afterwards")
    func logoutRevokesExternalToken() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        let fixture = try await TrustedIssuerTests.gateway([provider])
        let token = try provider.token(sub: "bob")
        let other = try provider.token(sub: "bob")
        let session = try await fixture.createAnonymousSession()
        #expect(try await fixture.send(.PATCH, "/api/session/\(session)/upgrade", bearer: token, body: "{}").status == 200)
        #expect(try await fixture.post("/api/auth/logout", bearer: token, ["session_id": .string(session)]).status == 204)
        let after = try await fixture.send(.GET, "/api/session/\(try await fixture.createAnonymousSession())", bearer: token)
        #expect(after.status == 401 && after["error"] == "token_revoked", "\(after.raw)")
        // Another token of the same user is not revoked by it (a provider's tokens end at the provider).
        #expect(try await fixture.send(.GET, "/api/session/\(try await fixture.createAnonymousSession())", bearer: other).status == 200)
        // A token without jti is revoked by its digest.
        let bare = try provider.token(sub: "bob", withoutJTI: true)
        let second = try await fixture.createAnonymousSession()
        #expect(try await fixture.send(.PATCH, "/api/session/\(second)/upgrade", bearer: bare, body: "{}").status == 200)
        #expect(try await fixture.post("/api/auth/logout", bearer: bare, ["session_id": .string(second)]).status == 204)
        #expect(try await fixture.send(.GET, "/api/session/\(try await fixture.createAnonymousSession())", bearer: bare)["error"] == "token_revoked")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("readiness names each trusted issuer; a provider that is down leaves the gateway ready for everyone else")
    func readiness() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        provider.set(.down)
        let fixture = try await GatewayFixture { $0.trust = TrustConfiguration(issuers: [provider.trust()]) }
        // The store's and the Runtime's first checks run in the background: wait for them, not for a guess at their time.
        let ready = try await Answer.eventually(within: TimeBounds.seconds(10)) { try await fixture.send(.GET, "/readyz") } until: { $0.status == 200 }
        #expect(ready.status == 200, "\(ready.raw)")
        #expect(ready.json["checks"]?.objectValue?["issuers"]?.objectValue?[provider.issuer] == "unavailable", "\(ready.raw)")
        let token = try provider.token()
        let refused = try await fixture.send(.GET, "/api/session/\(try await fixture.createAnonymousSession())", bearer: token)
        #expect(refused.status == 503 && refused["error"] == "issuer_unavailable", "\(refused.raw)")
        provider.set(.normal)
        try await TrustedIssuerTests.waitForKeys(fixture)
        let again = try await fixture.send(.GET, "/readyz")
        #expect(again.json["checks"]?.objectValue?["issuers"]?.objectValue?[provider.issuer] == "ok")
        try await fixture.stop()
        try await provider.stop()
    }
}

@Suite("portcullis token verify --jwks-url / --discovery and portcullis trust check, against a provider on loopback")
struct TrustCommandTests {
    @Test("token verify checks a provider's token from its JWKS URL or by discovery, with the usual exit codes")
    func tokenVerify() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .rs256, kid: "rsa-1")])
        let token = try provider.token(sub: "carol")
        let byURL = try await runPortcullis(["token", "verify", "--jwks-url", provider.jwksURL, "--issuer", provider.issuer, "--audience", "portcullis-api", token])
        #expect(byURL.status == 0 && byURL.output.contains("valid: sub carol, key rsa-1 (RS256)"), "\(byURL.output)")
        let byDiscovery = try await runPortcullis(["token", "verify", "--discovery", provider.issuer, "--audience", "portcullis-api", "--json", token])
        #expect(byDiscovery.status == 0 && byDiscovery.output.contains(#""valid":true"#), "\(byDiscovery.output)")
        let wrongAudience = try await runPortcullis(["token", "verify", "--discovery", provider.issuer, "--audience", "billing", token])
        #expect(wrongAudience.status == 1 && wrongAudience.output.contains("rejected: wrong_audience"), "\(wrongAudience.output)")
        let wrongIssuer = try await runPortcullis(["token", "verify", "--jwks-url", provider.jwksURL, "--issuer", "https://other.example.com", token])
        #expect(wrongIssuer.status == 1 && wrongIssuer.output.contains("wrong_issuer"), "\(wrongIssuer.output)")
        let plainHTTP = try await runPortcullis(["token", "verify", "--jwks-url", "http://idp.example.com/keys", token])
        #expect(plainHTTP.status == 2 && plainHTTP.output.contains("not an https URL"), "\(plainHTTP.output)")
        try await provider.stop()
        let unreachable = try await runPortcullis(["token", "verify", "--jwks-url", provider.jwksURL, "--issuer", provider.issuer, token])
        #expect(unreachable.status == 2 && unreachable.output.contains("cannot fetch the keys"), "\(unreachable.output)")
        #expect(!unreachable.output.contains(token) && !byURL.output.contains(token), "the token is never printed")
    }

    @Test("trust check prints each issuer's keys and exits 1 when one's keys cannot be fetched")
    func trustCheck() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let directory = NSTemporaryDirectory() + "portcullis-trustcheck-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let yaml = "trust:\n  issuers:\n    - issuer: \(provider.issuer)\n      audiences: [portcullis-api]\n      tenant: acme\n"
        try yaml.write(toFile: directory + "/trust.yaml", atomically: true, encoding: .utf8)
        let up = try await runPortcullis(["trust", "check", "--config", "trust.yaml"], directory: directory)
        #expect(up.status == 0 && up.output.contains("ec-1 ES256") && up.output.contains("error: none"), "\(up.output)")
        provider.set(.down)
        let down = try await runPortcullis(["trust", "check", "--config", "trust.yaml", "--json"], directory: directory)
        #expect(down.status == 1 && down.output.contains(#""usable":false"#) && down.output.contains("answered 503"), "\(down.output)")
        try await provider.stop()
    }
}

@Suite("Trusted issuers over HTTPS")
struct TrustedIssuerTLSTests {
    @Test("a provider's JWKS over HTTPS is trusted with its CA in ca_file, and refused (the keys unavailable) without it")
    func httpsWithCAFile() async throws {
        let certificates = NSTemporaryDirectory() + "portcullis-idp-tls-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: certificates) }
        let files = try await onOwnThread { try TLSTests.makeCertificate(in: certificates) }
        // The provider: another Portcullis, on HTTPS with a certificate the system does not trust.
        let provider = try await GatewayFixture {
            $0.tls = files
            $0.issuer = "https://idp.test"
        }
        let token = try AccessTokenIssuer(keys: provider.keys, issuer: "https://idp.test", audience: "portcullis-api", lifetime: 300)
            .issue(subject: "dave", tenantID: "ignored", clientID: "spa").token
        var entry = TrustedIssuer(
            issuer: "https://idp.test", keySource: .jwks(url: "https://127.0.0.1:\(provider.gatewayPort)/.well-known/jwks.json"),
            audiences: ["portcullis-api"], tenant: .fixed("acme"))
        entry.caFile = files.certificatePath
        let trusting = try await TrustedIssuerTests.gateway([], entries: [entry])
        let answer = try await trusting.send(.GET, "/api/session/\(try await trusting.createAnonymousSession())", bearer: token)
        #expect(answer.status == 200, "\(answer.raw)")
        try await trusting.stop()

        entry.caFile = nil
        let untrusting = try await GatewayFixture { $0.trust = TrustConfiguration(issuers: [entry]) }
        let trusted = try #require(untrusting.server.services.trustedIssuers)
        for _ in 0..<100 where trusted.statuses.first?.lastError == nil { try await Task.sleep(for: .milliseconds(50)) }
        let error = trusted.statuses.first?.lastError ?? ""
        #expect(error.contains("TLS") || error.contains("certificate") || error.contains("cannot be reached"), "\(error)")
        let refused = try await untrusting.send(.GET, "/api/session/\(try await untrusting.createAnonymousSession())", bearer: token)
        #expect(refused.status == 503 && refused["error"] == "issuer_unavailable", "\(refused.raw)")
        try await untrusting.stop()
        try await provider.stop()
    }
}
