import DataPlane
import Foundation
import Gateway
import JOSE
import Testing
import TrafficCop
import TrustedIssuers

/// A provider issues several kinds of token; only its access tokens are a credential at the gateway.
@Suite("Trusted issuers: a provider's ID or logout token is never an access token")
struct TokenKindTests {
    /// Runs `body` against a gateway trusting `provider` (its entry changed by `adjust`) with the route
    /// `/api/v1` to a recording upstream and 127.0.0.1 a trusted proxy; then stops all three.
    static func withRoutedGateway(
        adjust: (inout TrustedIssuer) -> Void = { _ in }, _ body: (FakeProvider, GatewayFixture) async throws -> Void
    ) async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let upstream = try await RecordingUpstream.start()
        var entry = provider.trust()
        adjust(&entry)
        let fixture = try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            configuration.routes = [ProxyRoute(prefix: "/api/v1", upstream: "http://127.0.0.1:\(upstream.port)")]
            configuration.trustedProxies = [IPNetwork("127.0.0.1")].compactMap { $0 }
        }, entries: [entry])
        try await body(provider, fixture)
        try await fixture.stop()
        try await upstream.stop()
        try await provider.stop()
    }

    @Test("a provider's token carrying nonce, at_hash or c_hash (an ID token) or events (a logout token) is 401 invalid_claim on a route and at forward-auth, even with an accepted aud")
    func otherTokensRefused() async throws {
        try await Self.withRoutedGateway { provider, fixture in
            let access = try provider.token()
            #expect(try await fixture.send(.GET, "/api/v1/x", bearer: access).status == 200, "an access token passes")
            let others: [(String, JSONObject)] = [
                ("nonce", ["nonce": "n-1"]), ("at_hash", ["at_hash": "x"]), ("c_hash", ["c_hash": "y"]),
                ("events", ["events": .object(["http://schemas.openid.net/event/backchannel-logout": .object([:])])]),
            ]
            for (claim, claims) in others {
                let token = try provider.token(claims: claims)
                fixture.remember(token)
                let routed = try await fixture.send(.GET, "/api/v1/x", bearer: token)
                #expect(routed.status == 401 && routed.error == "token_invalid" && routed["reason"] == "invalid_claim", "\(claim) on a route: \(routed.raw)")
                #expect(routed["message"]?.contains(claim) == true, "the message names the mix-up: \(routed.raw)")
                let decided = try await fixture.send(.GET, "/api/auth/verify", bearer: token, headers: [("X-Original-URI", "/api/v1/x")])
                #expect(decided.status == 401 && decided.headers["X-Portcullis-Assertion"].isEmpty, "\(claim) at forward-auth: \(decided.raw)")
            }
        }
    }

    @Test("with access_tokens_carry_nonce (Keycloak 24 and earlier) a token with nonce passes; at_hash, c_hash and events are refused still")
    func nonceAllowedWhereAccessTokensCarryIt() async throws {
        try await Self.withRoutedGateway(adjust: { $0.accessTokensCarryNonce = true }) { provider, fixture in
            #expect(try await fixture.send(.GET, "/api/v1/x", bearer: try provider.token(claims: ["nonce": "n-1"])).status == 200)
            for claims: JSONObject in [["at_hash": "x"], ["c_hash": "y"], ["events": .object([:])]] {
                let answer = try await fixture.send(.GET, "/api/v1/x", bearer: try provider.token(claims: claims))
                #expect(answer.status == 401 && answer["reason"] == "invalid_claim", "\(claims): \(answer.raw)")
            }
        }
    }

    @Test("with access_token_type: at+jwt only a token whose typ is at+jwt passes; JWT, none or anything else is 401 wrong_type")
    func typedAccessTokens() async throws {
        try await Self.withRoutedGateway(adjust: { $0.requiresAccessTokenType = true }) { provider, fixture in
            for typ: JSONValue in ["at+jwt", "application/at+jwt", "AT+JWT"] {
                let typed = try provider.token(header: ["typ": typ])
                #expect(try await fixture.send(.GET, "/api/v1/x", bearer: typed).status == 200, "typ \(typ)")
            }
            for typ: JSONValue in ["JWT", "application/at+jwt+x", "id+jwt"] {
                let token = try provider.token(header: ["typ": typ])
                let answer = try await fixture.send(.GET, "/api/v1/x", bearer: token)
                #expect(answer.status == 401 && answer["reason"] == "wrong_type", "typ \(typ): \(answer.raw)")
            }
            // No typ at all.
            let key = try #require(provider.keys.first)
            let now = Date().timeIntervalSince1970.rounded(.down)
            let claims: JSONObject = ["iss": .string(provider.issuer), "sub": "u", "aud": "portcullis-api", "iat": .number(now), "exp": .number(now + 60), "jti": "j"]
            let untyped = try JWSCompact.sign(header: ["alg": "ES256", "kid": "ec-1"], payload: JSONWriter.bytes(.object(claims)), key: key)
            let answer = try await fixture.send(.GET, "/api/v1/x", bearer: untyped)
            #expect(answer.status == 401 && answer["reason"] == "wrong_type", "no typ: \(answer.raw)")
        }
    }
}
