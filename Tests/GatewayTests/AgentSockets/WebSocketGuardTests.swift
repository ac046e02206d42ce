import Foundation
import Gateway
import Glibc
import JOSE
import SecurityGuard
import Testing

@Suite("The WebSocket guard on /api/runtime/agent: every check before the 101")
struct WebSocketGuardTests {
    static let path = "/api/runtime/agent"

    /// Alice logged in with a session; Bob and Alice-in-another-tenant logged in too.
    struct World {
        let fixture: GatewayFixture
        let alice: GatewayFixture.Login
        let bob: GatewayFixture.Login
        let aliceOther: GatewayFixture.Login

        static func make(_ configure: @escaping (inout GatewayConfiguration) -> Void = { _ in }) async throws -> World {
            let fixture = try await GatewayFixture(configure: configure)
            try await fixture.addUser("alice")
            try await fixture.addUser("bob")
            try await fixture.addUser("alice", tenant: "other")
            let anonymous = try await fixture.createAnonymousSession()
            return World(
                fixture: fixture, alice: try await fixture.login("alice", sessionID: anonymous), bob: try await fixture.login("bob"),
                aliceOther: try await fixture.login("alice", tenant: "other"))
        }

        /// A raw upgrade, on a thread of its own: a blocking read on the cooperative pool would starve
        /// the gateway under test (two such tests in parallel take both threads of a 2-core machine).
        func upgrade(_ query: String, headers: [(String, String)] = []) async throws -> RawUpgrade.Answer {
            let port = fixture.gatewayPort
            return try await onOwnThread { try RawUpgrade.send(port: port, target: WebSocketGuardTests.path + query, headers: headers) }
        }
    }

    @Test("a valid token and an owned session get a 101, by query parameters or by headers")
    func admitted() async throws {
        let world = try await World.make()
        let byQuery = try await world.upgrade("?access_token=\(world.alice.accessToken)&session_id=\(world.alice.sessionID)")
        #expect(byQuery.status == 101, "\(byQuery.head) \(byQuery.body)")
        let byHeaders = try await world.upgrade("", headers: [("Authorization", "Bearer \(world.alice.accessToken)"), ("X-Session-Id", world.alice.sessionID)])
        #expect(byHeaders.status == 101)
        try await world.fixture.stop()
    }

    @Test("gateway.query_credentials false: access_token in the socket URL is a 400 token_in_url, even beside a good header; the subprotocol and headers still work")
    func queryCredentialsRefused() async throws {
        let world = try await World.make { $0.acceptsQueryCredentials = false }
        let alice = world.alice
        let refused: [(String, [(String, String)])] = [
            ("?access_token=\(alice.accessToken)&session_id=\(alice.sessionID)", []),
            ("?access_token=\(alice.accessToken)", [("X-Session-Id", alice.sessionID)]),
            ("?access_token=&session_id=\(alice.sessionID)", [("Authorization", "Bearer \(alice.accessToken)")]),
            ("?x=1&access%5Ftoken=\(alice.accessToken)&session_id=\(alice.sessionID)", []),
        ]
        for (query, headers) in refused {
            let answer = try await world.upgrade(query, headers: headers)
            #expect(answer.status == 400 && answer.error == "token_in_url", "\(answer.status) \(answer.error ?? "-")")
            #expect(answer.body.contains("gateway.query_credentials"))
            #expect(!answer.body.contains(alice.accessToken) && !answer.head.contains(alice.accessToken))
        }
        let plain = try await world.fixture.send(.GET, Self.path + "?access_token=\(alice.accessToken)&session_id=\(alice.sessionID)")
        #expect(plain.status == 400 && plain.error == "token_in_url", "a plain GET (would it be admitted?) gets the same answer")
        let byHeaders = try await world.upgrade("", headers: [("Authorization", "Bearer \(alice.accessToken)"), ("X-Session-Id", alice.sessionID)])
        #expect(byHeaders.status == 101)
        let bearer = "base64url.bearer." + Base64URL.encode(Array(alice.accessToken.utf8))
        let bySubprotocol = try await world.upgrade(
            "?session_id=\(alice.sessionID)", headers: [("Sec-WebSocket-Protocol", "portcullis.agent.v1, \(bearer)")])
        #expect(bySubprotocol.status == 101, "session_id in the URL is not a secret and stays accepted")
        #expect(!world.fixture.log.text.contains(alice.accessToken))
        try await world.fixture.stop()
    }

    @Test("credentials in Sec-WebSocket-Protocol: the 101 selects portcullis.agent.v1 and echoes no credential; a bad one is refused like a bad header")
    func subprotocolCredentials() async throws {
        let world = try await World.make()
        let alice = world.alice
        let bearer = "base64url.bearer." + Base64URL.encode(Array(alice.accessToken.utf8))
        let session = "portcullis.session." + alice.sessionID
        let admitted = try await world.upgrade("", headers: [("Sec-WebSocket-Protocol", "portcullis.agent.v1, \(bearer), \(session)")])
        #expect(admitted.status == 101, "\(admitted.head)")
        let selected = admitted.head.split(separator: "\r\n").filter { $0.lowercased().hasPrefix("sec-websocket-protocol:") }
        #expect(selected.map { $0.dropFirst("sec-websocket-protocol:".count).trimmingCharacters(in: .whitespaces) } == ["portcullis.agent.v1"])
        #expect(!admitted.head.contains(alice.accessToken) && !admitted.head.contains(Base64URL.encode(Array(alice.accessToken.utf8))))
        #expect(!admitted.head.contains(alice.sessionID), "the session id is not echoed either")
        // The same credentials in two headers, as some clients send them.
        let split = try await world.upgrade("", headers: [("Sec-WebSocket-Protocol", "portcullis.agent.v1"), ("Sec-WebSocket-Protocol", "\(bearer), \(session)")])
        #expect(split.status == 101, "\(split.head)")

        let forged = "base64url.bearer." + Base64URL.encode(Array((alice.accessToken.dropLast(4) + "AAAA").utf8))
        let refusals: [([(String, String)], Int, String)] = [
            ([("Sec-WebSocket-Protocol", "portcullis.agent.v1, \(forged), \(session)")], 401, "token_invalid"),
            ([("Sec-WebSocket-Protocol", "portcullis.agent.v1, base64url.bearer.%%%, \(session)")], 401, "token_invalid"),
            ([("Sec-WebSocket-Protocol", "portcullis.agent.v1, \(session)")], 401, "token_missing"),
            ([("Sec-WebSocket-Protocol", "portcullis.agent.v1, \(bearer)")], 400, "session_missing"),
            ([("Sec-WebSocket-Protocol", "\(bearer), \(session)")], 400, "invalid_request"),
            ([("Sec-WebSocket-Protocol", "portcullis.agent.v1, \(bearer), portcullis.session.\(world.bob.sessionID)")], 403, "session_forbidden"),
        ]
        for (headers, status, code) in refusals {
            let answer = try await world.upgrade("", headers: headers)
            #expect(answer.status == status && answer.error == code, "\(code): \(answer.status) \(answer.error ?? "-")")
            #expect(!answer.body.contains(alice.accessToken) && !answer.head.contains(alice.accessToken))
        }
        let text = world.fixture.log.text
        #expect(!text.contains(Base64URL.encode(Array(alice.accessToken.utf8))), "the encoded token never reaches the log")
        try await world.fixture.stop()
    }

    @Test("every refusal is an HTTP response with its status and JSON error, never a 101")
    func refusals() async throws {
        let world = try await World.make { $0.allowedOrigins = ["https://app.example.com"]; $0.contract.maximumSocketsPerSession = 1 }
        let fixture = world.fixture
        let alice = world.alice
        let expired = try AccessTokenIssuer(
            keys: fixture.keys, issuer: "http://127.0.0.1:8080", audience: "portcullis", lifetime: 60,
            clock: FixedClock(SystemClock().now() - 3_600)
        ).issue(subject: "usr_x", tenantID: "default", clientID: "test").token
        let revokedLogin = try await fixture.login("alice")
        #expect(try await fixture.post("/api/auth/logout", bearer: revokedLogin.accessToken, ["session_id": .string(revokedLogin.sessionID)]).status == 204)
        let anonymous = try await fixture.createAnonymousSession()
        let ended = try await fixture.login("alice")
        #expect(try await fixture.post("/api/auth/logout", bearer: ended.accessToken, ["session_id": .string(ended.sessionID)]).status == 204)

        let cases: [(String, [(String, String)], Int, String)] = [
            ("?session_id=\(alice.sessionID)", [], 401, "token_missing"),
            ("?access_token=not.a.jwt&session_id=\(alice.sessionID)", [], 401, "token_invalid"),
            ("?access_token=\(expired)&session_id=\(alice.sessionID)", [], 401, "token_invalid"),
            ("?access_token=\(revokedLogin.accessToken)&session_id=\(alice.sessionID)", [], 401, "token_revoked"),
            ("?access_token=\(alice.sessionID)&session_id=\(alice.sessionID)", [], 401, "token_invalid"),
            ("?access_token=\(alice.accessToken)", [], 400, "session_missing"),
            ("?access_token=\(alice.accessToken)&session_id=ses_short", [], 400, "session_malformed"),
            ("?access_token=\(alice.accessToken)&session_id=\(alice.accessToken)", [], 400, "session_malformed"),
            ("?access_token=\(alice.accessToken)&session_id=ses_AAAAAAAAAAAAAAAAAAAAAA", [], 404, "session_not_found"),
            ("?access_token=\(world.bob.accessToken)&session_id=\(ended.sessionID)", [], 404, "session_not_found"),
            ("?access_token=\(alice.accessToken)&session_id=\(anonymous)", [], 403, "session_anonymous"),
            ("?access_token=\(world.bob.accessToken)&session_id=\(alice.sessionID)", [], 403, "session_forbidden"),
            ("?access_token=\(world.aliceOther.accessToken)&session_id=\(alice.sessionID)", [], 403, "session_forbidden"),
            ("?access_token=\(alice.accessToken)&session_id=\(alice.sessionID)", [("Origin", "https://evil.example")], 403, "origin_forbidden"),
        ]
        for (query, headers, status, code) in cases {
            let answer = try await world.upgrade(query, headers: headers)
            #expect(answer.status == status, "\(code): \(answer.head)")
            #expect(answer.error == code, "\(code): \(answer.body)")
            #expect(answer.head.lowercased().contains("content-type: application/json"))
            if status == 401 { #expect(answer.head.contains("WWW-Authenticate: Bearer")) }
            #expect(!answer.body.contains(alice.accessToken), "a refusal never echoes the token")
        }
        // The named mix-ups.
        let sessionAsToken = try await world.upgrade("?access_token=\(alice.sessionID)&session_id=\(alice.sessionID)")
        #expect(sessionAsToken.json["message"]?.stringValue?.contains("a session_id was sent where an access token is expected") == true)
        let tokenAsSession = try await world.upgrade("?access_token=\(alice.accessToken)&session_id=\(alice.accessToken)")
        #expect(tokenAsSession.json["message"]?.stringValue?.contains("an access token was sent where a session_id is expected") == true)

        // The allowed origin passes; then the session is at its one-socket limit: 429.
        // Off the cooperative pool: its blocking read for the 101 would starve the gateway under test.
        let port = fixture.gatewayPort
        let query = "?access_token=\(alice.accessToken)&session_id=\(alice.sessionID)"
        let first = try await onOwnThread { try WebSocketProbe.open(port: port, query: query, headers: [("Origin", "https://app.example.com")]) }
        // Wait until the relay has registered the socket (a count, not a fixed time).
        for _ in 0..<200 where fixture.server.services.sockets.count(sessionID: alice.sessionID) < 1 { try await Task.sleep(for: .milliseconds(25)) }
        let second = try await world.upgrade("?access_token=\(alice.accessToken)&session_id=\(alice.sessionID)", headers: [("Origin", "https://app.example.com")])
        #expect(second.status == 429)
        #expect(second.error == "rate_limited")
        let metrics = try await fixture.send(.GET, "/metrics", port: fixture.adminPort).raw
        #expect(metrics.contains(#"portcullis_ws_upgrades_refused_total{reason="token_missing"} 1"#))
        #expect(metrics.contains(#"portcullis_ws_upgrades_refused_total{reason="session_forbidden"} 2"#))
        #expect(metrics.contains("portcullis_ws_open_sockets 1"))
        first.close()
        try await fixture.stop()
    }

    @Test("a plain GET on the socket path gets the guard's refusal, or 426 when only the upgrade is missing")
    func plainHTTP() async throws {
        let world = try await World.make()
        let missing = try await world.fixture.send(.GET, Self.path)
        #expect(missing.status == 401)
        #expect(missing.error == "token_missing")
        let ok = try await world.fixture.send(.GET, Self.path + "?session_id=\(world.alice.sessionID)", bearer: world.alice.accessToken)
        #expect(ok.status == 426)
        #expect(ok.error == "upgrade_required")
        try await world.fixture.stop()
    }
}

/// Holds an upgraded socket open (the raw 101) until `close()`.
struct WebSocketProbe {
    let descriptor: Int32

    static func open(port: Int, query: String, headers: [(String, String)]) throws -> WebSocketProbe {
        let descriptor = try RawUpgrade.connectAndRequest(port: port, target: "/api/runtime/agent" + query, headers: headers)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(descriptor, &buffer, buffer.count)
        let head = String(decoding: buffer[0..<max(0, count)], as: UTF8.self)
        guard head.hasPrefix("HTTP/1.1 101") else {
            _ = Glibc.close(descriptor)
            throw FixtureError("expected a 101, got \(head)")
        }
        return WebSocketProbe(descriptor: descriptor)
    }

    func close() { _ = Glibc.close(descriptor) }
}
