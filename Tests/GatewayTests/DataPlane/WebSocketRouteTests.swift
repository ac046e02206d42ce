import Foundation
import HummingbirdWebSocket
import DataPlane
import Gateway
import HummingbirdWSClient
import JOSE
import Logging
import NIOCore
import PortcullisTestSupport
import Synchronization
import Testing

/// WebSockets to a route: the opening handshake goes through the route's decisions like any
/// request, then the upstream's 101 turns both connections into a tunnel (real WebSocket client,
/// real WebSocket upstream).
@Suite("WebSockets to routes: the handshake decided like a request, then a tunnel")
struct WebSocketRouteTests {
    static let logger = Logger(label: "test.ws-route-client")

    /// Connects, sends each of `messages`, collects as many answers, then closes (or waits for the server's close with `waitForClose`).
    static func exchange(
        _ url: String, headers: [(String, String)], messages: [WebSocketMessage], waitForClose: (@Sendable () async throws -> Void)? = nil
    ) async throws -> (answers: [WebSocketMessage], close: WebSocketCloseFrame?) {
        let answers = Mutex<[WebSocketMessage]>([])
        var configuration = WebSocketClientConfiguration()
        configuration.maxFrameSize = 1 << 20
        for (name, value) in headers { configuration.additionalHeaders[.init(name)!] = value }
        let close = try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
            var iterator = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
            for message in messages {
                switch message {
                case .text(let text): try await outbound.write(.text(text))
                case .binary(let bytes): try await outbound.write(.binary(bytes))
                }
                if let answer = try await iterator.next() { answers.withLock { $0.append(answer) } }
            }
            if let waitForClose {
                try await waitForClose()
                while try await iterator.next() != nil {}
            }
        }
        return (answers.withLock { $0 }, close)
    }

    @Test("with a Bearer token a WebSocket is tunnelled to the route's upstream: text and binary messages both ways, as they were sent; the upstream's handshake had the assertion, the path below the prefix and never the token")
    func bearerTunnel() async throws {
        let handshakes = WebSocketEchoUpstream.Handshakes()
        let upstream = try await WebSocketEchoUpstream.start(recording: handshakes)
        let fixture = try await GatewayFixture { $0.routes = [ProxyRoute(prefix: "/app", upstream: "http://127.0.0.1:\(upstream.port)")] }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let big = String(repeating: "x", count: 200_000)
        let (answers, close) = try await Self.exchange(
            "ws://127.0.0.1:\(fixture.gatewayPort)/app/socket?room=1", headers: [("Authorization", "Bearer \(login.accessToken)")],
            messages: [.text("hello"), .binary(ByteBuffer(bytes: [0, 1, 2, 255])), .text(big)])
        #expect(answers.count == 3)
        if answers.count == 3 {
            #expect(answers[0] == .text("hello"))
            #expect(answers[1] == .binary(ByteBuffer(bytes: [0, 1, 2, 255])))
            #expect(answers[2] == .text(big), "a message of 200 kB crosses whole")
        }
        #expect(close?.closeCode == .normalClosure)
        let handshake = try #require(handshakes.all.first)
        #expect(handshake[":path"] == "/socket?room=1")
        #expect(handshake["x-portcullis-assertion"]?.isEmpty == false)
        #expect(handshake["authorization"] == nil, "the token stays at the gateway")
        #expect(handshake["sec-websocket-key"] != nil && handshake["upgrade"]?.lowercased() == "websocket")
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("the handshake is refused like a request: without a token 401, with a bad one 401, on a method the route does not take 405; nothing reaches the upstream and no 101 is sent")
    func handshakeRefused() async throws {
        let handshakes = WebSocketEchoUpstream.Handshakes()
        let upstream = try await WebSocketEchoUpstream.start(recording: handshakes)
        let fixture = try await GatewayFixture { $0.routes = [ProxyRoute(prefix: "/app", upstream: "http://127.0.0.1:\(upstream.port)")] }
        let port = fixture.gatewayPort
        let missing = try await onOwnThread { try RawUpgrade.send(port: port, target: "/app/socket") }
        #expect(missing.status == 401 && missing.error == "token_missing", "\(missing.head)")
        let bad = try await onOwnThread { try RawUpgrade.send(port: port, target: "/app/socket", headers: [("Authorization", "Bearer not.a.token")]) }
        #expect(bad.status == 401, "\(bad.head)")
        #expect(handshakes.all.isEmpty, "nothing reached the upstream")
        try await fixture.stop()
        try await upstream.stop()
    }
}
