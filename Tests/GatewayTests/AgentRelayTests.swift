import Foundation
import Gateway
import HummingbirdWSClient
import JOSE
import Logging
import SecurityGuard
import Synchronization
import Testing

/// What a test's WebSocket client saw.
struct SocketTranscript: Sendable {
    var messages: [JSONObject] = []
    var close: WebSocketCloseFrame?
    var secondsToClose: Double = 0
}

@Suite("The agent relay: a real WebSocket client through the gateway to the Runtime")
struct AgentRelayTests {
    static let logger = Logger(label: "test.ws-client")

    static func url(_ fixture: GatewayFixture, _ login: GatewayFixture.Login, token: String? = nil) -> String {
        "ws://127.0.0.1:\(fixture.gatewayPort)/api/runtime/agent?access_token=\(token ?? login.accessToken)&session_id=\(login.sessionID)"
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Connects, runs `script` (send, read, act), then reads until the server closes.
    static func session(
        _ url: String, headers: [(String, String)] = [],
        script: @escaping @Sendable (WebSocketOutboundWriter, inout WebSocketInboundMessageStream.AsyncIterator, inout SocketTranscript) async throws -> Void
    ) async throws -> SocketTranscript {
        let box = TranscriptBox()
        var configuration = WebSocketClientConfiguration()
        for (name, value) in headers { configuration.additionalHeaders[.init(name)!] = value }
        let close = try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
            var transcript = SocketTranscript()
            var iterator = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
            try await script(outbound, &iterator, &transcript)
            let waiting = ContinuousClock.now
            while let message = try await iterator.next() {
                if case .text(let text) = message, let object = try? StrictJSONReader().parseObject(Array(text.utf8)) { transcript.messages.append(object) }
            }
            transcript.secondsToClose = seconds(since: waiting)
            box.set(transcript)
        }
        var transcript = box.get()
        transcript.close = close
        return transcript
    }

    static func nextJSON(_ iterator: inout WebSocketInboundMessageStream.AsyncIterator) async throws -> JSONObject {
        guard case .text(let text)? = try await iterator.next() else { throw FixtureError("expected a text message") }
        return try StrictJSONReader().parseObject(Array(text.utf8))
    }

    @Test("the seed scenario: anonymous session -> login -> socket -> intent round trip -> logout closes the socket with 1008 within a second")
    func seedScenario() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let anonymous = try await fixture.createAnonymousSession()
        let login = try await fixture.login("alice", sessionID: anonymous)
        #expect(login.sessionID == anonymous)
        let transcript = try await Self.session(Self.url(fixture, login)) { outbound, iterator, transcript in
            try await outbound.write(.text(#"{"type":"intent","request_id":"r1","intent_type":"echo","payload":{"hello":"runtime"}}"#))
            let reply = try await Self.nextJSON(&iterator)
            transcript.messages.append(reply)
            let logout = try await fixture.post("/api/auth/logout", bearer: login.accessToken, ["session_id": .string(login.sessionID)])
            #expect(logout.status == 204)
        }
        let reply = try #require(transcript.messages.first)
        #expect(reply["type"] == "result")
        #expect(reply["request_id"] == "r1")
        #expect(reply["status"] == "completed")
        #expect(reply["result"] == ["hello": "runtime"])
        #expect(transcript.close?.closeCode == .policyViolation)
        #expect(transcript.secondsToClose < 1.0, "closed \(transcript.secondsToClose) s after logout")
        try await fixture.stop()
    }

    @Test("headers work as well as query parameters, and a session revoked elsewhere closes the socket within a second")
    func revokedElsewhere() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let url = "ws://127.0.0.1:\(fixture.gatewayPort)/api/runtime/agent"
        let transcript = try await Self.session(url, headers: [("Authorization", "Bearer \(login.accessToken)"), ("X-Session-Id", login.sessionID)]) { outbound, iterator, _ in
            try await outbound.write(.text(#"{"type":"ping"}"#))
            #expect(try await Self.nextJSON(&iterator)["type"] == "pong")
            // Not through this gateway's logout: straight in the store, as another gateway or the Runtime would.
            _ = try await fixture.state.revokeSession(id: login.sessionID, now: SystemClock().now())
        }
        #expect(transcript.close?.closeCode == .policyViolation)
        // The watcher polls once a second; the bound leaves room for a slow sanitized run.
        #expect(transcript.secondsToClose < 3, "closed \(transcript.secondsToClose) s after the revocation")
        try await fixture.stop()
    }

    @Test("token expiry closes a live socket with 1008 \"token expired\"; a renew frame keeps it open; another user's token closes it")
    func continuousAuthorization() async throws {
        let fixture = try await GatewayFixture { $0.accessTokenLifetime = 4 }  // short, with room for a slow sanitized set-up
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        let login = try await fixture.login("alice")

        let expired = try await Self.session(Self.url(fixture, login)) { _, _, _ in }
        #expect(expired.close?.closeCode == .policyViolation)
        #expect(expired.close?.reason == "token expired")

        let second = try await fixture.login("alice", sessionID: login.sessionID)
        let issuer = AccessTokenIssuer(keys: fixture.keys, issuer: "http://127.0.0.1:8080", audience: "portcullis", lifetime: 600)
        let claims = try AccessTokenVerifier(keys: fixture.keys, policy: .gateway(issuer: "http://127.0.0.1:8080", audience: "portcullis")).verify(second.accessToken)
        let longer = try issuer.issue(subject: claims.subject, tenantID: "default", clientID: "test").token
        fixture.remember(longer)
        let renewed = try await Self.session(Self.url(fixture, second)) { outbound, iterator, transcript in
            try await outbound.write(.text(#"{"type":"auth.renew","access_token":"\#(longer)"}"#))
            let ack = try await Self.nextJSON(&iterator)
            #expect(ack["type"] == "auth.renewed")
            try await Task.sleep(for: .seconds(5))  // past the first token's expiry
            try await outbound.write(.text(#"{"type":"ping"}"#))
            transcript.messages.append(try await Self.nextJSON(&iterator))
            try await outbound.close(.normalClosure, reason: "done")
        }
        #expect(renewed.messages.first?["type"] == "pong", "still open after the first token expired")
        #expect(renewed.close?.closeCode == .normalClosure)

        let third = try await fixture.login("alice", sessionID: login.sessionID)
        let bob = try await fixture.login("bob")
        let hijack = try await Self.session(Self.url(fixture, third)) { outbound, _, _ in
            try await outbound.write(.text(#"{"type":"auth.renew","access_token":"\#(bob.accessToken)"}"#))
        }
        #expect(hijack.close?.closeCode == .policyViolation)
        #expect(hijack.close?.reason == "the renewal token belongs to another user")
        try await fixture.stop()
    }

    @Test("a message over the limit closes the socket with 1009")
    func messageTooLarge() async throws {
        let fixture = try await GatewayFixture { $0.maximumMessageBytes = 4096 }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let transcript = try await Self.session(Self.url(fixture, login)) { outbound, _, _ in
            try await outbound.write(.text(String(repeating: "x", count: 10_000)))
        }
        #expect(transcript.close?.closeCode == .messageTooLarge)
        try await fixture.stop()
    }

    @Test("the Runtime stopped mid-stream: the socket gets 1011 with a reason; a new socket works when it returns")
    func runtimeGoesAway() async throws {
        let directory = NSTemporaryDirectory() + "portcullis-relay-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        _ = try KeyDirectory(path: directory + "/keys").generate(algorithm: .es256)
        let first = try await StandaloneRuntime.start(directory: directory)
        let port = first.port
        let fixture = try await GatewayFixture(directory: directory, runtimeURL: "http://127.0.0.1:\(port)")
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let transcript = try await Self.session(Self.url(fixture, login)) { outbound, iterator, _ in
            try await outbound.write(.text(#"{"type":"ping"}"#))
            #expect(try await Self.nextJSON(&iterator)["type"] == "pong")
            // Stop the Runtime while this client is waiting for the server to close.
            Task {
                try await Task.sleep(for: .milliseconds(100))
                try await first.stop()
            }
        }
        #expect(transcript.close?.closeCode == .unexpectedServerError, "\(String(describing: transcript.close))")
        #expect(transcript.close?.reason?.isEmpty == false)

        let runtime = try await StandaloneRuntime.start(directory: directory, port: port)
        let again = try await Self.session(Self.url(fixture, login)) { outbound, iterator, transcript in
            try await outbound.write(.text(#"{"type":"ping"}"#))
            transcript.messages.append(try await Self.nextJSON(&iterator))
            try await outbound.close(.normalClosure, reason: nil)
        }
        #expect(again.messages.first?["type"] == "pong")
        try await fixture.stop(keepFiles: true)
        try await runtime.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

final class TranscriptBox: Sendable {
    private let value = Mutex(SocketTranscript())
    func set(_ transcript: SocketTranscript) { value.withLock { $0 = transcript } }
    func get() -> SocketTranscript { value.withLock { $0 } }
}
