import Foundation
import Gateway
import JOSE
import NIOHTTP1
import Testing
import TrafficCop

@Suite("The edge's error model, routes and limits")
struct EdgeErrorTests {
    /// Every path the API table documents, with its method. A routing slip such
    /// as `/api/sessions` for `/api/session` makes one of these 404.
    static let documentedRoutes: [(HTTPMethod, String)] = [
        (.POST, "/api/session/create-anonymous"),
        (.POST, "/api/auth/login"),
        (.POST, "/api/auth/refresh"),
        (.POST, "/api/auth/logout"),
        (.POST, "/api/session/create"),
        (.PATCH, "/api/session/ses_AAAAAAAAAAAAAAAAAAAAAA/upgrade"),
        (.GET, "/api/session/ses_AAAAAAAAAAAAAAAAAAAAAA"),
        (.GET, "/.well-known/jwks.json"),
        (.GET, "/.well-known/oauth-authorization-server"),
        (.GET, "/healthz"),
        (.GET, "/readyz"),
        (.GET, "/api/runtime/agent"),
        (.POST, "/api/intent"),
        (.GET, "/api/runtime/executions/exe_x"),
    ]

    @Test("route table: every documented path answers something other than 404 for its method; a near miss is a JSON 404")
    func routeTable() async throws {
        let fixture = try await GatewayFixture()
        for (method, path) in Self.documentedRoutes {
            let answer = try await fixture.send(method, path, body: "{}")
            #expect(answer.status != 404 || answer.error == "session_not_found", "\(method) \(path) answered \(answer.status) \(answer.raw)")
            #expect(answer.error != "not_found", "\(method) \(path) is not routed")
        }
        for path in ["/api/sessions", "/api/sessions/create-anonymous", "/api/auth/signin", "/api/session"] {
            let answer = try await fixture.send(.POST, path, body: "{}")
            #expect(answer.status == 404)
            #expect(answer.error == "not_found")
            #expect(answer.headers.first(name: "Content-Type") == "application/json")
        }
        try await fixture.stop()
    }

    @Test("a session_id sent as a token and a JWT sent as a session id each get a message naming the mix-up")
    func confusionErrors() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")

        let sessionAsToken = try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.sessionID)
        #expect(sessionAsToken.status == 401)
        #expect(sessionAsToken.error == "token_invalid")
        #expect(sessionAsToken["message"]?.contains("a session_id was sent where an access token is expected") == true)

        let tokenAsSession = try await fixture.send(.GET, "/api/session/\(login.accessToken)", bearer: login.accessToken)
        #expect(tokenAsSession.status == 400)
        #expect(tokenAsSession.error == "session_malformed")
        #expect(tokenAsSession["message"]?.contains("an access token was sent where a session_id is expected") == true)
        #expect(!tokenAsSession.raw.contains(login.accessToken))

        let tokenAsLoginSession = try await fixture.loginAnswer("alice", password: "correct horse battery", sessionID: login.accessToken)
        #expect(tokenAsLoginSession.status == 400)
        #expect(tokenAsLoginSession.error == "session_malformed")

        let refreshAsToken = try await fixture.post("/api/session/create", bearer: login.refreshToken)
        #expect(refreshAsToken.status == 401)
        #expect(refreshAsToken.json["reason"] == "refresh_token_given")
        try await fixture.stop()
    }

    @Test("the server creates sessions: a client-chosen session_id is refused")
    func clientChosenSessionRefused() async throws {
        let fixture = try await GatewayFixture()
        let answer = try await fixture.post("/api/session/create-anonymous", ["session_id": "ses_AAAAAAAAAAAAAAAAAAAAAA"])
        #expect(answer.status == 400)
        #expect(answer.error == "invalid_request")
        let unknown = try await fixture.send(.GET, "/api/session/ses_AAAAAAAAAAAAAAAAAAAAAA")
        #expect(unknown.status == 404)
        #expect(unknown.error == "session_not_found")
        try await fixture.stop()
    }

    @Test("every 401 carries WWW-Authenticate: Bearer, with error=invalid_token exactly when a token was presented")
    func wwwAuthenticate() async throws {
        let fixture = try await GatewayFixture()
        let missing = try await fixture.post("/api/session/create")
        #expect(missing.status == 401)
        #expect(missing.headers.first(name: "WWW-Authenticate") == "Bearer realm=\"portcullis\"")
        let bad = try await fixture.post("/api/session/create", bearer: "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
        #expect(bad.status == 401)
        #expect(bad.error == "token_invalid")
        #expect(bad.json["reason"] != nil)
        let header = try #require(bad.headers.first(name: "WWW-Authenticate"))
        #expect(header.hasPrefix("Bearer realm=\"portcullis\", error=\"invalid_token\", error_description=\""))
        let scheme = try await fixture.send(.POST, "/api/session/create", headers: [("Authorization", "Basic YWxpY2U6cHc=")], body: "{}")
        #expect(scheme.status == 401)
        #expect(scheme.error == "token_invalid")
        try await fixture.stop()
    }

    @Test("bodies: strict JSON (duplicate members refused), 413 beyond the limit")
    func bodies() async throws {
        let fixture = try await GatewayFixture { $0.maximumBodyBytes = 2048 }
        let duplicate = try await fixture.send(.POST, "/api/auth/login", body: #"{"username":"a","username":"b","password":"x"}"#)
        #expect(duplicate.status == 400)
        #expect(duplicate.error == "invalid_request")
        let notJSON = try await fixture.send(.POST, "/api/auth/login", body: "username=alice")
        #expect(notJSON.status == 400)
        let large = try await fixture.send(.POST, "/api/auth/login", body: "{\"username\":\"" + String(repeating: "a", count: 4096) + "\"}")
        #expect(large.status == 413)
        #expect(large.error == "payload_too_large")
        try await fixture.stop()
    }

    @Test("rate limits answer 429 rate_limited with Retry-After, per client and per username")
    func rateLimits() async throws {
        let fixture = try await GatewayFixture {
            $0.rateLimits.anonymousSessionPerClient = .init(perMinute: 1, burst: 2)
            $0.rateLimits.loginPerUsername = .init(perMinute: 1, burst: 2)
        }
        #expect(try await fixture.post("/api/session/create-anonymous").status == 201)
        #expect(try await fixture.post("/api/session/create-anonymous").status == 201)
        let limited = try await fixture.post("/api/session/create-anonymous")
        #expect(limited.status == 429)
        #expect(limited.error == "rate_limited")
        let retryAfter = try #require(limited.headers.first(name: "Retry-After").flatMap(Int.init))
        #expect(retryAfter >= 1 && retryAfter <= 60)

        for _ in 0..<2 { #expect(try await fixture.loginAnswer("mallory", password: "guess guess").status == 401) }
        let limitedLogin = try await fixture.loginAnswer("mallory", password: "guess guess")
        #expect(limitedLogin.status == 429)
        #expect(limitedLogin.headers.first(name: "Retry-After") != nil)
        try await fixture.stop()
    }

    @Test("X-Forwarded-For is ignored from an untrusted peer and believed from a trusted proxy")
    func forwardedFor() async throws {
        let untrusted = try await GatewayFixture { $0.rateLimits.anonymousSessionPerClient = .init(perMinute: 1, burst: 1) }
        #expect(try await untrusted.send(.POST, "/api/session/create-anonymous", headers: [("X-Forwarded-For", "203.0.113.1")]).status == 201)
        // A spoofed header does not buy a fresh bucket.
        #expect(try await untrusted.send(.POST, "/api/session/create-anonymous", headers: [("X-Forwarded-For", "203.0.113.2")]).status == 429)
        try await untrusted.stop()

        let trusted = try await GatewayFixture {
            $0.rateLimits.anonymousSessionPerClient = .init(perMinute: 1, burst: 1)
            $0.trustedProxies = [IPNetwork("127.0.0.0/8")!]
        }
        #expect(try await trusted.send(.POST, "/api/session/create-anonymous", headers: [("X-Forwarded-For", "203.0.113.1")]).status == 201)
        #expect(try await trusted.send(.POST, "/api/session/create-anonymous", headers: [("X-Forwarded-For", "203.0.113.2")]).status == 201)
        #expect(try await trusted.send(.POST, "/api/session/create-anonymous", headers: [("X-Forwarded-For", "203.0.113.1")]).status == 429)
        try await trusted.stop()
    }

    @Test("cross-origin: only allowed origins get Access-Control-Allow-Origin")
    func origins() async throws {
        let fixture = try await GatewayFixture { $0.allowedOrigins = ["https://app.example.com"] }
        let allowed = try await fixture.send(.GET, "/healthz", headers: [("Origin", "https://app.example.com")])
        #expect(allowed.headers.first(name: "Access-Control-Allow-Origin") == "https://app.example.com")
        let preflight = try await fixture.send(
            .OPTIONS, "/api/auth/login", headers: [("Origin", "https://app.example.com"), ("Access-Control-Request-Method", "POST")])
        #expect(preflight.status == 204)
        let other = try await fixture.send(.GET, "/healthz", headers: [("Origin", "https://evil.example")])
        #expect(other.headers.first(name: "Access-Control-Allow-Origin") == nil)
        try await fixture.stop()
    }
}
