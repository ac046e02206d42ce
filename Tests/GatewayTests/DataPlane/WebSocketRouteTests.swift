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

    /// A gateway with a route `/app` to a WebSocket echo upstream (and `more` routes), and alice
    /// signed in: `body` gets the fixture, her `Authorization` field and the upstream's handshakes.
    static func withEchoRoute(
        more: [ProxyRoute] = [], configure: @escaping (inout GatewayConfiguration) -> Void = { _ in },
        _ body: (GatewayFixture, (String, String), WebSocketEchoUpstream.Handshakes) async throws -> Void
    ) async throws {
        let handshakes = WebSocketEchoUpstream.Handshakes()
        let upstream = try await WebSocketEchoUpstream.start(recording: handshakes)
        let fixture = try await GatewayFixture {
            $0.routes = [ProxyRoute(prefix: "/app", upstream: "http://127.0.0.1:\(upstream.port)")] + more
            configure(&$0)
        }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        try await body(fixture, ("Authorization", "Bearer \(login.accessToken)"), handshakes)
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("with a Bearer token a WebSocket is tunnelled to the route's upstream: text and binary messages both ways, as they were sent; the upstream's handshake had the assertion, the path below the prefix and never the token")
    func bearerTunnel() async throws {
        try await Self.withEchoRoute { fixture, bearer, handshakes in
            let big = String(repeating: "x", count: 200_000)
            let (answers, close) = try await Self.exchange(
                "ws://127.0.0.1:\(fixture.gatewayPort)/app/socket?room=1", headers: [bearer],
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
        }
    }

    @Test("the handshake is refused like a request: without a token 401, with a bad one 401, on a method the route does not take 405; nothing reaches the upstream and no 101 is sent")
    func handshakeRefused() async throws {
        try await Self.withEchoRoute { fixture, _, handshakes in
            let port = fixture.gatewayPort
            let missing = try await onOwnThread { try RawUpgrade.send(port: port, target: "/app/socket") }
            #expect(missing.status == 401 && missing.error == "token_missing", "\(missing.head)")
            let bad = try await onOwnThread { try RawUpgrade.send(port: port, target: "/app/socket", headers: [("Authorization", "Bearer not.a.token")]) }
            #expect(bad.status == 401, "\(bad.head)")
            #expect(handshakes.all.isEmpty, "nothing reached the upstream")
        }
    }

    @Test("a frame the client sends right behind its handshake, before the 101, reaches the upstream after it, in order; a POST or a handshake with a body is no WebSocket: served as the plain request it is, and closed after")
    func earlyBytesAndNonHandshakes() async throws {
        try await Self.withEchoRoute { fixture, bearer, handshakes in
            let port = fixture.gatewayPort
            let early = try await onOwnThread { () throws -> [String] in
                let socket = try RawWebSocket(port: port, target: "/app/socket", headers: [bearer], early: "first")
                guard socket.status == 101 else { return ["status \(socket.status)"] }
                try socket.sendText("second")
                return try [socket.readFrame(), socket.readFrame()].compactMap { $0.map { String(decoding: $0.payload, as: UTF8.self) } }
            }
            #expect(early == ["first", "second"])
            let posted = try await onOwnThread { () throws -> String in
                let connection = try RawConnection(port: port)
                connection.send("POST /app/socket HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: \(bearer.1)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nContent-Length: 2\r\n\r\nhi")
                defer { connection.close() }
                return String(decoding: connection.readAll(), as: UTF8.self)
            }
            #expect(!posted.hasPrefix("HTTP/1.1 101"), "\(posted)")
            #expect(posted.lowercased().contains("connection: close"), "\(posted)")
            #expect(handshakes.all.count == 1, "only the GET became a WebSocket")
        }
    }

    @Test("an upstream that answers the handshake without 101 (a plain HTTP server) is relayed as it answered, and the connection closed: no tunnel")
    func upstreamDeclines() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await GatewayFixture { $0.routes = [ProxyRoute(prefix: "/app", upstream: "http://127.0.0.1:\(upstream.port)")] }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let (port, token) = (fixture.gatewayPort, login.accessToken)
        let answer = try await onOwnThread { try RawUpgrade.send(port: port, target: "/app/socket", headers: [("Authorization", "Bearer \(token)")]) }
        #expect(answer.status == 200 && answer.head.lowercased().contains("connection: close"), "\(answer.head)")
        #expect(answer.json["path"] == "/socket")
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("only a whole handshake becomes a tunnel, and only to a WebSocket: without Sec-WebSocket-Version 13 it is the plain GET it also is; an upstream's 101 to another protocol (or without Sec-WebSocket-Accept) is 502, never a raw pipe")
    func onlyWebSocketsAreTunnelled() async throws {
        let scripted = try ScriptedUpstream(answers: ["/h2c": .init("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n")])
        defer { scripted.stop() }
        try await Self.withEchoRoute(more: [ProxyRoute(prefix: "/other", upstream: "http://127.0.0.1:\(scripted.port)")]) { fixture, bearer, handshakes in
            let port = fixture.gatewayPort
            let partial = try await onOwnThread { () throws -> String in
                let connection = try RawConnection(port: port)
                defer { connection.close() }
                connection.send("GET /app/socket HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: \(bearer.1)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
                return String(decoding: connection.readAll(), as: UTF8.self)
            }
            #expect(partial.hasPrefix("HTTP/1.1 200") && partial.hasSuffix("plain"), "\(partial)")
            #expect(handshakes.all.isEmpty, "no WebSocket was asked of the upstream")
            let other = try await onOwnThread { try RawUpgrade.send(port: port, target: "/other/h2c", headers: [bearer]) }
            #expect(other.status == 502 && other.error == "upstream_unavailable", "\(other.head)")
        }
    }

    @Test("a tunnel closes with 1008 \"token expired\" when the token it was opened with expires")
    func tunnelEndsWithItsToken() async throws {
        try await Self.withEchoRoute(configure: { $0.accessTokenLifetime = 3 }) { fixture, _, _ in
            let port = fixture.gatewayPort
            // A loaded machine may take the token's three seconds before the handshake: then it is
            // refused (401), and the test signs in again, up to three times.
            var outcome: (status: Int, close: [UInt8]?) = (0, nil)
            for _ in 0..<3 {
                let token = try await fixture.login("alice").accessToken
                outcome = try await onOwnThread { () throws -> (status: Int, close: [UInt8]?) in
                    let socket = try RawWebSocket(port: port, target: "/app/socket", headers: [("Authorization", "Bearer \(token)")])
                    guard socket.status == 101 else { return (socket.status, nil) }
                    // The next frame is the gateway's close, once the token's seconds are up.
                    guard let frame = try socket.readFrame(), frame.opcode == 0x8 else { return (101, nil) }
                    return (101, frame.payload)
                }
                if outcome.status == 101 { break }
                #expect(outcome.status == 401, "a refused handshake is the expired token's 401")
            }
            let payload = try #require(outcome.close, "a close frame came (handshake status \(outcome.status))")
            #expect(payload.count >= 2 && Int(payload[0]) << 8 | Int(payload[1]) == 1008)
            #expect(String(decoding: payload.dropFirst(2), as: UTF8.self) == "token expired")
        }
    }
}
