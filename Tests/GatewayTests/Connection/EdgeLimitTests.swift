import Foundation
import Gateway
import Glibc
import HummingbirdWSClient
import JOSE
import PortcullisTestSupport
import Testing

extension Array where Element == UInt8 {
    var text: String { String(decoding: self, as: UTF8.self) }
}


@Suite("Limits at the edge: each exceeded limit gets its answer while other clients carry on")
struct EdgeLimitTests {
    @Test("a request head over limits.max_header_bytes gets 431 headers_too_large and the connection closes")
    func headerSize() async throws {
        let fixture = try await GatewayFixture { $0.limits.maximumHeaderBytes = 4096 }
        let port = fixture.gatewayPort
        let answer = try await onOwnThread {
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 8192))\r\n\r\n")
            return connection.readAll().text
        }
        #expect(answer.hasPrefix("HTTP/1.1 431"), "\(answer.prefix(200))")
        #expect(answer.contains(#""error":"headers_too_large""#))
        #expect(try await fixture.send(.GET, "/healthz").status == 200)
        try await fixture.stop()
    }

    @Test("more header fields than limits.max_header_count, or a header name or value over limits.max_header_field_bytes, gets 431 headers_too_large; at the limits the request is served", arguments: [
        ("count", true), ("count", false), ("field", true), ("field", false),
    ])
    func headerCountAndField(kind: String, over: Bool) async throws {
        let fixture = try await GatewayFixture {
            $0.limits.maximumHeaderCount = 20
            $0.limits.maximumHeaderFieldBytes = 1024
        }
        let port = fixture.gatewayPort
        // `Host` and `Connection` are two fields; with the extra ones, 20 in all at the limit, 21 over it.
        // The limit bounds a field's name and its value each: a value of 1,024 bytes at the limit, 1,025 over it.
        let extra: String =
            kind == "count"
            ? (0..<(over ? 19 : 18)).map { "X-F\($0): v\r\n" }.joined()
            : "X-Long: \(String(repeating: "a", count: over ? 1025 : 1024))\r\n"
        let answer = try await onOwnThread {
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\(extra)\r\n")
            return connection.readAll().text
        }
        if over {
            #expect(answer.hasPrefix("HTTP/1.1 431"), "\(answer.prefix(200))")
            #expect(answer.contains(#""error":"headers_too_large""#))
        } else {
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
        }
        try await fixture.stop()
    }

    @Test("an admitted WebSocket upgrade that announces a body it never sends is refused 400 at once, never left waiting for the body", arguments: ["Content-Length: 10", "Transfer-Encoding: chunked"])
    func upgradeWithBodyNeverWaits(framing: String) async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let port = fixture.gatewayPort
        let (answer, seconds) = try await onOwnThread { () -> (String, Double) in
            let started = Date()
            let answer = try RawUpgrade.send(
                port: port, target: "/api/runtime/agent", headers: [("Authorization", "Bearer \(login.accessToken)"), ("X-Session-Id", login.sessionID), (String(framing.split(separator: ":")[0]), String(framing.split(separator: " ")[1]))])
            return ("\(answer.status) \(answer.error ?? "-")", Date().timeIntervalSince(started))
        }
        #expect(answer == "400 invalid_request", "\(answer)")
        #expect(seconds < TimeBounds.seconds(5), "answered after \(seconds) s")
        try await fixture.stop()
    }

    @Test("a client trickling its request head (slowloris) gets 408 request_timeout after limits.request_head_timeout_seconds; others are served meanwhile")
    func slowHead() async throws {
        let fixture = try await GatewayFixture { $0.limits.requestHeadTimeout = 1 }
        let port = fixture.gatewayPort
        async let slow: (String, Double) = onOwnThread {
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            let started = Date()
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n")
            Thread.sleep(forTimeInterval: 0.3)
            connection.send("X-Slow: 1\r\n")
            let answer = connection.readAll().text
            return (answer, Date().timeIntervalSince(started))
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await fixture.send(.GET, "/healthz").status == 200)
        let (answer, seconds) = try await slow
        #expect(answer.hasPrefix("HTTP/1.1 408"), "\(answer)")
        #expect(answer.contains(#""error":"request_timeout""#))
        // The deadline is 1 s from the first byte; the bound leaves room for a loaded sanitized run
        // and still fails a deadline that is reset by each trickled line or never fires.
        #expect(seconds >= 0.9 && seconds < 10, "answered \(seconds) s after the first byte")
        try await fixture.stop()
    }

    @Test("an idle keep-alive connection is closed after limits.idle_timeout_seconds")
    func idleKeepAlive() async throws {
        let fixture = try await GatewayFixture { $0.limits.idleTimeout = 1 }
        let port = fixture.gatewayPort
        let (first, closedAfter) = try await onOwnThread { () -> (String, Double) in
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let first = connection.readSome().text
            let waited = Date()
            let rest = connection.readAll()  // returns when the server closes
            return (first + rest.text, Date().timeIntervalSince(waited))
        }
        #expect(first.hasPrefix("HTTP/1.1 200"))
        #expect(closedAfter >= 0.8 && closedAfter < 5, "closed after \(closedAfter) s")
        try await fixture.stop()
    }

    @Test("beyond limits.max_connections a new connection gets 503 and is closed; once one closes, clients are served again")
    func connectionLimit() async throws {
        let fixture = try await GatewayFixture { $0.limits.maximumConnections = 3 }
        let port = fixture.gatewayPort
        let held = try await onOwnThread { try (0..<3).map { _ in try RawConnection(port: port) } }
        try await Task.sleep(for: .milliseconds(200))
        let refused = try await onOwnThread { () -> String in
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            return connection.readAll().text
        }
        #expect(refused.hasPrefix("HTTP/1.1 503"), "\(refused)")
        #expect(refused.contains(#""error":"unavailable""#))
        held.forEach { $0.close() }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await fixture.send(.GET, "/healthz").status == 200)
        try await fixture.stop()
    }

    @Test("a socket sending faster than limits.ws_messages_per_second is closed with 1008")
    func messageRate() async throws {
        let fixture = try await GatewayFixture { $0.limits.webSocketMessagesPerSecond = 5 }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let transcript = try await AgentRelayTests.session(AgentRelayTests.url(fixture, login)) { outbound, _, _ in
            for _ in 0..<40 { try? await outbound.write(.text(#"{"type":"ping"}"#)) }
        }
        #expect(transcript.close?.closeCode == .policyViolation)
        #expect(transcript.close?.reason?.hasPrefix("message rate exceeded") == true)
        try await fixture.stop()
    }

    @Test("a socket that does not answer pings is closed with 1001 after two intervals of silence")
    func pingTimeout() async throws {
        let fixture = try await GatewayFixture { $0.limits.webSocketPingInterval = 1 }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let port = fixture.gatewayPort
        let frames = try await onOwnThread { () -> [UInt8] in
            // A raw client: it upgrades, then never answers anything.
            let descriptor = try RawUpgrade.connectAndRequest(
                port: port, target: "/api/runtime/agent?access_token=\(login.accessToken)&session_id=\(login.sessionID)", headers: [])
            let connection = RawConnection(descriptor: descriptor)
            defer { connection.close() }
            return connection.readAll()
        }
        let text = frames.text
        #expect(text.hasPrefix("HTTP/1.1 101"))
        let afterHead = Array(frames[(frames.firstIndex(of: 0x89) ?? frames.count)...])
        #expect(afterHead.first == 0x89, "a ping frame arrived")
        let closeIndex = try #require(frames.lastIndex(of: 0x88))
        let code = Int(frames[closeIndex + 2]) << 8 | Int(frames[closeIndex + 3])
        #expect(code == 1001)
        try await fixture.stop()
    }
}

