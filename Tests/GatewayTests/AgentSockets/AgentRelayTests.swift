import Foundation
import Gateway
import Glibc
import HummingbirdWSClient
import JOSE
import Logging
import NIOCore
import PortcullisTestSupport
import SecurityGuard
import Synchronization
import Testing

/// A count shared by a test's concurrent clients.
final class SharedCount: Sendable {
    let value = Mutex(0)
}

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

    /// `session`, tried again while the upgrade is refused: links to the Runtime are one per event
    /// loop, each opened on first use, so beside a loaded suite the loop a connection lands on may
    /// still be opening its link (503) though another loop's is open.
    static func sessionOnceAdmitted(
        _ url: String, within bound: Double = TimeBounds.seconds(15),
        script: @escaping @Sendable (WebSocketOutboundWriter, inout WebSocketInboundMessageStream.AsyncIterator, inout SocketTranscript) async throws -> Void
    ) async throws -> SocketTranscript {
        let started = ContinuousClock.now
        while true {
            do {
                return try await session(url, script: script)
            } catch let error as WebSocketClientError where error == .webSocketUpgradeFailed && ContinuousClock.now - started < .seconds(bound) {
                try await Task.sleep(for: .milliseconds(200))
            }
        }
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
        #expect(transcript.secondsToClose < TimeBounds.seconds(1), "closed \(transcript.secondsToClose) s after logout")
        try await fixture.stop()
    }

    @Test("an upgrade is admitted and relays its answers whether its head fits a connection's first read (1 KiB) or takes several", arguments: [0, 900, 3_000, 6_000])
    func longUpgradeHeads(padding: Int) async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice", sessionID: try await fixture.createAnonymousSession())
        let transcript = try await Self.session(Self.url(fixture, login), headers: [("X-Padding", String(repeating: "p", count: padding))]) {
            outbound, iterator, transcript in
            try await outbound.write(.text(#"{"type":"intent","request_id":"r1","intent_type":"echo","payload":{"long":"head"}}"#))
            transcript.messages.append(try await Self.nextJSON(&iterator))
            try await outbound.close(.normalClosure, reason: nil)
        }
        let reply = try #require(transcript.messages.first)
        #expect(reply["request_id"] == "r1")
        #expect(reply["result"] == ["long": "head"])
        try await fixture.stop()
    }

    @Test("a message sent in the same write as the upgrade request is relayed; a frame outside RFC 6455 (unmasked) is answered with close 1002 and the connection closes once that is written, not after the close grace")
    func framesBehindTheUpgradeAndProtocolErrors() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice", sessionID: try await fixture.createAnonymousSession())
        let target = "/api/runtime/agent?access_token=\(login.accessToken)&session_id=\(login.sessionID)"
        let port = fixture.gatewayPort
        let (status, reply, close, seconds) = try await onOwnThread { () -> (Int, String, (opcode: UInt8, payload: [UInt8])?, Double) in
            let socket = try RawWebSocket(
                port: port, target: target, headers: [], early: #"{"type":"intent","request_id":"r1","intent_type":"echo","payload":{"early":true}}"#)
            guard socket.status == 101 else { return (socket.status, "", nil, 0) }
            let reply = try socket.readFrame().map { String(decoding: $0.payload, as: UTF8.self) } ?? ""
            let started = Date()
            // Unmasked, with well-formed frames behind it in the same write: none of them is read.
            let masked: [UInt8] = [0x81, 0x83, 0, 0, 0, 0] + Array("abc".utf8)
            socket.sendRaw([0x81, 0x03] + Array("abc".utf8) + Array(repeating: masked, count: 20).joined())
            let close = try socket.readFrame()
            while try socket.readFrame() != nil {}
            return (101, reply, close, Date().timeIntervalSince(started))
        }
        #expect(status == 101)
        #expect(reply.contains(#""request_id":"r1""#) && reply.contains(#""early":true"#), "\(reply)")
        #expect(close?.opcode == 0x8 && close.map { Array($0.payload.prefix(2)) } == [0x03, 0xEA], "\(String(describing: close))")
        // Closed once the close frame is written: well within the 2 s close grace.
        #expect(seconds < TimeBounds.seconds(1.5), "closed after \(seconds) s")
        try await fixture.stop()
    }

    /// Established TCP connections to `port` on 127.0.0.1 whose local end is the client (from /proc/net/tcp).
    static func establishedConnections(toPort port: Int) throws -> Int {
        // Read to the end: /proc files report no size, and a single read stops at a page.
        guard let file = FileHandle(forReadingAtPath: "/proc/net/tcp") else { throw FixtureError("cannot read /proc/net/tcp") }
        defer { try? file.close() }
        let table = String(decoding: file.readDataToEndOfFile(), as: UTF8.self)
        let hex = String(port, radix: 16, uppercase: true)
        let remote = "0100007F:" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        return table.split(separator: "\n").dropFirst().filter { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            return fields.count > 3 && fields[2] == remote && fields[3] == "01"
        }.count
    }

    @Test("agent sockets share the gateway's links to the Runtime: 24 open sockets, at most one link per event loop; each socket gets its own answers")
    func socketsShareLinks() async throws {
        let fixture = try await GatewayFixture { $0.contract.maximumSocketsPerSession = 24 }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let runtimePort = try #require(fixture.runtimePort)
        let url = "ws://127.0.0.1:\(fixture.gatewayPort)/api/runtime/agent"
        let links = SharedCount()
        // One socket first: the session is then in the gateway's view, and the 24 need no HTTP call to the Runtime.
        let warmUp = try await Self.session(url, headers: [("Authorization", "Bearer \(login.accessToken)"), ("X-Session-Id", login.sessionID)]) { outbound, _, _ in
            try await outbound.close(.normalClosure, reason: nil)
        }
        #expect(warmUp.close?.closeCode == .normalClosure)
        try await withThrowingTaskGroup(of: SocketTranscript.self) { group in
            let opened = SharedCount()
            for (index, session) in [login].enumerated() {
                for socket in 0..<24 {
                    let id = "s\(index)-\(socket)"
                    let headers = [("Authorization", "Bearer \(session.accessToken)"), ("X-Session-Id", session.sessionID)]
                    group.addTask {
                        try await Self.session(url, headers: headers) { outbound, iterator, transcript in
                            opened.value.withLock { $0 += 1 }
                            // Everyone is open before anyone asks: the links are counted with all 24 up.
                            for _ in 0..<400 where opened.value.withLock({ $0 }) < 24 { try await Task.sleep(for: .milliseconds(10)) }
                            try await outbound.write(.text(#"{"type":"intent","request_id":"\#(id)","intent_type":"echo","payload":{"socket":"\#(id)"}}"#))
                            transcript.messages.append(try await Self.nextJSON(&iterator))
                            if id == "s0-0" { links.value.withLock { $0 = (try? Self.establishedConnections(toPort: runtimePort)) ?? -1 } }
                            try await Task.sleep(for: .milliseconds(200))
                            try await outbound.close(.normalClosure, reason: nil)
                        }
                    }
                }
            }
            var answered = 0
            for try await transcript in group {
                let reply = try #require(transcript.messages.first)
                let id = try #require(reply["request_id"]?.stringValue)
                #expect(reply["result"] == ["socket": .string(id)], "socket \(id) got another socket's answer")
                #expect(transcript.close?.closeCode == .normalClosure && transcript.secondsToClose < 3, "socket \(id): \(String(describing: transcript.close)) after \(transcript.secondsToClose) s")
                answered += 1
            }
            #expect(answered == 24)
        }
        let count = links.value.withLock { $0 }
        // The established connections to the Runtime are the links plus however many the HTTP client pooled for the
        // guard's session reads (under a sanitized parallel suite, more than 10), so they only show a link exists;
        // the log line below counts the links themselves: one per event loop at most, not one per socket.
        #expect(count >= 1, "no connection to the Runtime while 24 sockets were open")
        #expect(fixture.log.text.components(separatedBy: "agent link: opening").count - 1 <= System.coreCount, "one link per event loop at most")
        let stopping = ContinuousClock.now
        try await fixture.stop()
        let stopSeconds = Self.seconds(since: stopping)
        // A pooled connection once held the Runtime's shutdown for 60 s; 20 s leaves room for a sanitized run.
        if stopSeconds > 20 {
            for line in fixture.log.text.split(separator: "\n").suffix(30) { print("LOG", line.prefix(300)) }
        }
        #expect(stopSeconds < 20)
    }

    @Test("a message that only mentions auth.renew is relayed to the Runtime as it is, not taken for a renewal")
    func renewMarkerInPayload() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let transcript = try await Self.session(Self.url(fixture, login)) { outbound, iterator, transcript in
            try await outbound.write(.text(#"{"type":"intent","request_id":"m","intent_type":"echo","payload":{"note":"auth.renew","type":"auth.renew"}}"#))
            transcript.messages.append(try await Self.nextJSON(&iterator))
            try await outbound.close(.normalClosure, reason: nil)
        }
        let reply = try #require(transcript.messages.first)
        #expect(reply["type"] == "result")
        #expect(reply["result"] == ["note": "auth.renew", "type": "auth.renew"])
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
        // The watcher polls once a second; the bound leaves room for a slow sanitized run, and for a
        // parallel suite on two shared cores (3.16 s was seen in CI once).
        #expect(transcript.secondsToClose < TimeBounds.seconds(5), "closed \(transcript.secondsToClose) s after the revocation")
        try await fixture.stop()
    }

    @Test("token expiry closes a live socket with 1008 \"token expired\"; a renew frame keeps it open; another user's token closes it")
    func continuousAuthorization() async throws {
        // Logins get the fixture's usual lifetime; each half that needs a token to expire issues its
        // own, timed from its own exp, so a slow (sanitized) set-up cannot expire a token early.
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        let login = try await fixture.login("alice")
        let verifier = AccessTokenVerifier(keys: fixture.keys, policy: .gateway(issuer: "http://127.0.0.1:8080", audience: "portcullis"))
        let subject = try verifier.verify(login.accessToken).subject
        let issue = { (lifetime: Double) throws -> IssuedAccessToken in
            let issued = try AccessTokenIssuer(keys: fixture.keys, issuer: "http://127.0.0.1:8080", audience: "portcullis", lifetime: lifetime)
                .issue(subject: subject, tenantID: "default", clientID: "test")
            fixture.remember(issued.token)
            return issued
        }

        let expiring = try issue(6)
        let expired = try await Self.session(Self.url(fixture, login, token: expiring.token)) { _, _, _ in }
        #expect(expired.close?.closeCode == .policyViolation)
        #expect(expired.close?.reason == "token expired")

        let second = try await fixture.login("alice", sessionID: login.sessionID)
        let issued = try issue(10)
        let first = issued.token
        let longer = try issue(600).token
        let renewed = try await Self.session(Self.url(fixture, second, token: first)) { outbound, iterator, transcript in
            try await outbound.write(.text(#"{"type":"auth.renew","access_token":"\#(longer)"}"#))
            let ack = try await Self.nextJSON(&iterator)
            #expect(ack["type"] == "auth.renewed")
            // Past the first token's expiry (whole seconds) by a margin the expiry watcher needs.
            let remaining = issued.expiresAt - Date().timeIntervalSince1970
            try await Task.sleep(for: .seconds(max(0, remaining) + 2))
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

    @Test("a client that sends intents and never reads their answers: it is not read while its connection is unwritable, and closed (1008) once it has stayed so for limits.ws_send_timeout_seconds")
    func clientThatDoesNotRead() async throws {
        let fixture = try await GatewayFixture {
            $0.limits.webSocketSendTimeout = 1
            $0.limits.webSocketMessagesPerSecond = 100
        }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let port = fixture.gatewayPort
        let payload = String(repeating: "p", count: 60_000)
        let intent = Array(#"{"type":"intent","request_id":"r","intent_type":"echo","payload":{"data":"\#(payload)"}}"#.utf8)
        let (closedAfter, sent) = try await onOwnThread { () -> (Double?, Int) in
            let connection = try RawConnection(port: port, receiveBufferBytes: 16 * 1024)
            defer { connection.close() }
            // A send that blocks (the gateway stopped reading) gives up after a second instead of hanging the test.
            var sendTimeout = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(connection.descriptor, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, socklen_t(MemoryLayout<timeval>.size))
            connection.send(
                "GET /api/runtime/agent HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                    + "Authorization: Bearer \(login.accessToken)\r\nX-Session-Id: \(login.sessionID)\r\n\r\n")
            guard String(decoding: connection.readUntil("\r\n\r\n"), as: UTF8.self).hasPrefix("HTTP/1.1 101") else { return (nil, 0) }
            let started = Date()
            var sent = 0
            // 15 intents a second of 60 KB each, never reading an answer: the answers fill the connection
            // (about 4 MB of socket buffers) in seconds, while a Runtime stalled beside the whole suite
            // would need 17 s of stall to hold 256 of them waiting and close the stream itself (at 45 a
            // second, 6 s did, in a full local run). How soon depends on how fast the Runtime echoes: up to 30 s.
            while Date().timeIntervalSince(started) < TimeBounds.seconds(30) {
                if connection.isClosedByPeer { return (Date().timeIntervalSince(started), sent) }
                _ = connection.send(bytes: RawConnection.maskedFrame(opcode: 0x1, intent))
                sent += 1
                Thread.sleep(forTimeInterval: 1.0 / 15)
            }
            return (nil, sent)
        }
        let closed = try #require(closedAfter, "the gateway never closed a socket whose client does not read (\(sent) intents sent)")
        #expect(closed > 1, "not before the send timeout: closed \(closed) s after the client stopped reading")
        let unread = await fixture.log.lines(containing: "does not read what it is sent")
        let closes = unread.isEmpty ? await fixture.log.lines(containing: "agent socket closed") : []
        // Another close (the Runtime's "too many messages waiting" when something starves its
        // concurrency pool, say) is named by its logged reason.
        #expect(!unread.isEmpty, "closed for another reason: \(closes)")
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

    @Test("the Runtime stopped mid-stream: the socket gets 1011 with a reason, a new upgrade is refused with 503 while it is away, and a new socket works when it returns")
    func runtimeGoesAway() async throws {
        let directory = NSTemporaryDirectory() + "portcullis-relay-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        _ = try KeyDirectory(path: directory + "/keys").generate(algorithm: .es256)
        let first = try await StandaloneRuntime.start(directory: directory)
        let port = first.port
        let fixture = try await GatewayFixture(directory: directory, runtimeURL: "http://127.0.0.1:\(port)")
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let transcript = try await Self.sessionOnceAdmitted(Self.url(fixture, login)) { outbound, iterator, _ in
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

        // While the Runtime is away a new upgrade is refused with 503, not answered 101 and then closed.
        let gatewayPort = fixture.gatewayPort
        let target = "/api/runtime/agent?access_token=\(login.accessToken)&session_id=\(login.sessionID)"
        let refused = try await onOwnThread { try RawUpgrade.send(port: gatewayPort, target: target) }
        #expect(refused.status == 503 && ["upstream_unavailable", "runtime_unavailable"].contains(refused.error), "\(refused.head) \(refused.body)")

        let runtime = try await StandaloneRuntime.start(directory: directory, port: port)
        // The gateway serves again once its background check has seen the Runtime back (within 2 s).
        // Within 2 s when the machine is not busy (the PostgreSQL outage test holds that bound); generous here beside the whole suite.
        let back = try await Answer.eventually(within: TimeBounds.seconds(15)) { try await fixture.send(.GET, "/readyz") } until: { $0.status == 200 }
        #expect(back.status == 200, "ready again after the Runtime's return")
        // The agent link to the new Runtime opens on its own schedule: upgrades are answered 101 again soon after.
        var upgraded = 0
        let returned = ContinuousClock.now
        while upgraded != 101, ContinuousClock.now - returned < .seconds(TimeBounds.seconds(15)) {
            upgraded = try await onOwnThread { try RawUpgrade.send(port: gatewayPort, target: target) }.status
            if upgraded != 101 { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(upgraded == 101, "upgrades are admitted again after the Runtime's return")
        let again = try await Self.sessionOnceAdmitted(Self.url(fixture, login)) { outbound, iterator, transcript in
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
