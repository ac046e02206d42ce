import AgentLink
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import HummingbirdWebSocket
import HummingbirdWSTesting
import JOSE
import PortcullisTestSupport
import RuntimeAPI
import Runtime
import StateSurface
import Synchronization
import Testing

/// Replies collected by a WebSocket client handler.
final class Transcript: Sendable {
    private let frames = Mutex<[JSONObject]>([])
    func append(_ frame: JSONObject) { frames.withLock { $0.append(frame) } }
    var all: [JSONObject] { frames.withLock { $0 } }
}

@Suite("Runtime agent link: many agent streams over one real WebSocket")
struct AgentLinkTests {
    static let link = "/runtime/v1/agent-link"

    static func send(_ frame: AgentLinkFrame, _ outbound: WebSocketOutboundWriter) async throws {
        try await outbound.write(.binary(frame.buffer()))
    }

    /// The next link frame the Runtime sent, or `nil` when the link closed.
    static func next(_ iterator: inout WebSocketInboundMessageStream.AsyncIterator) async throws -> AgentLinkFrame? {
        guard let message = try await iterator.next() else { return nil }
        guard case .binary(let buffer) = message else { throw TestFailure("the Runtime sent a text message on the link") }
        return try AgentLinkFrame(reading: buffer)
    }

    /// The JSON reply of a text frame on `stream`.
    static func reply(_ frame: AgentLinkFrame?, stream: UInt64) throws -> JSONObject {
        guard case .text(stream, let message)? = frame else { throw TestFailure("expected a text frame on stream \(stream), got \(String(describing: frame))") }
        return try StrictJSONReader().parseObject(Array(message.readableBytesView))
    }

    static func text(_ stream: UInt64, _ text: String) -> AgentLinkFrame { .text(stream: stream, ByteBuffer(string: text)) }

    static func identity(_ sessionID: String, _ caller: RuntimeCaller) -> AgentStreamIdentity {
        AgentStreamIdentity(sessionID: sessionID, userID: caller.userID!, tenantID: caller.tenantID!)
    }

    @Test("ping gets pong, an intent gets its result, and a malformed frame gets an error frame while the stream stays usable")
    func frames() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let id = try await client.createSession(headers: try fixture.headers(RuntimeFixture.alice))
            let gateway = try fixture.headers(RuntimeFixture.anonymous)
            let transcript = Transcript()
            let close = try await client.ws(Self.link, configuration: .init(additionalHeaders: gateway)) { inbound, outbound, _ in
                var replies = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                try await Self.send(.open(stream: 7, Self.identity(id, RuntimeFixture.alice)), outbound)
                for frame in [
                    #"{"type":"ping"}"#,
                    #"{"type":"intent","request_id":"r1","intent_type":"echo","payload":{"n":1}}"#,
                    #"{"type":"intent","request_id":"r2""#,
                    #"not json at all"#,
                    #"{"type":"teleport"}"#,
                    #"{"type":"intent","request_id":"r3","intent_type":"nope"}"#,
                    #"{"type":"intent","request_id":"r4","intent_type":"session.describe","idempotency_key":"a"}"#,
                    #"{"type":"ping"}"#,
                ] {
                    try await Self.send(Self.text(7, frame), outbound)
                    transcript.append(try Self.reply(try await Self.next(&replies), stream: 7))
                }
                try await Self.send(.binary(stream: 7, ByteBuffer(string: "bytes")), outbound)
                transcript.append(try Self.reply(try await Self.next(&replies), stream: 7))
                try await outbound.close(.normalClosure, reason: nil)
            }
            #expect(close?.closeCode == .normalClosure)
            let replies = transcript.all
            #expect(replies.count == 9)
            guard replies.count == 9 else { return }
            #expect(replies[0] == ["type": "pong"])
            #expect(replies[1]["type"] == "result")
            #expect(replies[1]["request_id"] == "r1")
            #expect(replies[1]["status"] == "completed")
            #expect(replies[1]["result"] == ["n": 1])
            #expect(replies[2]["type"] == "error" && replies[2]["error"] == "invalid_frame")
            #expect(replies[3]["error"] == "invalid_frame")
            #expect(replies[4]["error"] == "invalid_frame")
            #expect(replies[5]["status"] == "failed")
            #expect(replies[5]["error"]?.objectValue?["error"] == "intent_unknown")
            #expect(replies[6]["result"]?.objectValue?["session_id"]?.stringValue == id)
            #expect(replies[7] == ["type": "pong"])
            #expect(replies[8]["error"] == "invalid_frame")
        }
    }

    @Test("streams on one link act for their own session and owner only; a message on a stream never opened is refused with a close")
    func streamsAreSeparate() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let aliceSession = try await client.createSession(headers: try fixture.headers(RuntimeFixture.alice))
            let bobSession = try await client.createSession(headers: try fixture.headers(RuntimeFixture.bob))
            let gateway = try fixture.headers(RuntimeFixture.anonymous)
            let transcript = Transcript()
            let unknown = Mutex<AgentLinkFrame?>(nil)
            _ = try await client.ws(Self.link, configuration: .init(additionalHeaders: gateway)) { inbound, outbound, _ in
                var replies = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                try await Self.send(.open(stream: 1, Self.identity(aliceSession, RuntimeFixture.alice)), outbound)
                try await Self.send(.open(stream: 2, Self.identity(bobSession, RuntimeFixture.bob)), outbound)
                // A stream that names alice's session for bob: the Runtime checks ownership on every intent.
                try await Self.send(.open(stream: 3, Self.identity(aliceSession, RuntimeFixture.bob)), outbound)
                for stream: UInt64 in [1, 2, 3] {
                    try await Self.send(Self.text(stream, #"{"type":"intent","request_id":"d","intent_type":"session.describe"}"#), outbound)
                    transcript.append(try Self.reply(try await Self.next(&replies), stream: stream))
                }
                try await Self.send(Self.text(99, #"{"type":"ping"}"#), outbound)
                let refusal = try await Self.next(&replies)
                unknown.withLock { $0 = refusal }
                try await outbound.close(.normalClosure, reason: nil)
            }
            let replies = transcript.all
            #expect(replies.count == 3)
            guard replies.count == 3 else { return }
            #expect(replies[0]["result"]?.objectValue?["session_id"]?.stringValue == aliceSession)
            #expect(replies[1]["result"]?.objectValue?["session_id"]?.stringValue == bobSession)
            #expect(replies[2]["status"] == "failed")
            #expect(["session_forbidden", "session_not_found"].contains(replies[2]["error"]?.objectValue?["error"]?.stringValue ?? ""))
            guard case .close(99, 1008, _)? = unknown.withLock({ $0 }) else {
                Issue.record("a stream never opened was not refused: \(String(describing: unknown.withLock { $0 }))")
                return
            }
        }
    }

    @Test("a link message over the size limit closes the link with 1009")
    func oversized() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let id = try await client.createSession(headers: try fixture.headers(RuntimeFixture.alice))
            let gateway = try fixture.headers(RuntimeFixture.anonymous)
            let big = #"{"type":"intent","request_id":"big","intent_type":"echo","payload":""# + String(repeating: "x", count: 40_000) + #""}"#
            let close = try await client.ws(Self.link, configuration: .init(maxFrameSize: 1 << 20, additionalHeaders: gateway)) { inbound, outbound, _ in
                try await Self.send(.open(stream: 1, Self.identity(id, RuntimeFixture.alice)), outbound)
                try await Self.send(Self.text(1, big), outbound)
                for try await _ in inbound {}
            }
            #expect(close?.closeCode == .messageTooLarge)
        }
    }

    /// Sends one raw HTTP/1.1 request on a fresh TCP connection and returns the status line.
    static func rawStatusLine(port: Int, request: String) throws -> String {
        let connection = try RawConnection(port: port)
        defer { connection.close() }
        connection.send(request)
        return String(String(decoding: connection.readSome(), as: UTF8.self).split(separator: "\r\n").first ?? "")
    }

    static func upgradeRequest(path: String, assertion: String?) -> String {
        var lines = [
            "GET \(path) HTTP/1.1", "Host: 127.0.0.1", "Connection: Upgrade", "Upgrade: websocket",
            "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        ]
        if let assertion { lines.append("\(AssertionHeader.name): \(assertion)") }
        return lines.joined(separator: "\r\n") + "\r\n\r\n"
    }

    @Test("the link's upgrade is refused before the 101 without the gateway's assertion or with a forged one")
    func refusedUpgrades() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let port = try #require(client.port)
            let forger = try JWSKey.generate(algorithm: .es256, kid: "gw1")
            let refusals: [(String, String?)] = [
                (Self.link, nil),
                (Self.link, try fixture.assertion(RuntimeFixture.anonymous, key: forger)),
                (Self.link, try fixture.assertion(RuntimeFixture.anonymous, audience: "another-upstream")),
                ("/runtime/v1/agent", try fixture.assertion(RuntimeFixture.anonymous)),
            ]
            for (path, assertion) in refusals {
                let status = try Self.rawStatusLine(port: port, request: Self.upgradeRequest(path: path, assertion: assertion))
                // hummingbird-websocket answers every refused upgrade with a bare 400 or 404 (see docs/RUNTIME.md).
                #expect(status.hasPrefix("HTTP/1.1 400") || status.hasPrefix("HTTP/1.1 404"), "\(path): \(status)")
            }
            let accepted = try Self.rawStatusLine(port: port, request: Self.upgradeRequest(path: Self.link, assertion: try fixture.assertion(RuntimeFixture.anonymous)))
            #expect(accepted.hasPrefix("HTTP/1.1 101"), "\(accepted)")
        }
    }

    @Test("an intent after the session was revoked fails with session_not_found and that stream closes with 1008; the link and its other streams carry on")
    func revokedMidStream() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let alice = try fixture.headers(RuntimeFixture.alice)
            let revoked = try await client.createSession(headers: alice)
            let kept = try await client.createSession(headers: alice)
            let gateway = try fixture.headers(RuntimeFixture.anonymous)
            let transcript = Transcript()
            let ended = Mutex<AgentLinkFrame?>(nil)
            _ = try await client.ws(Self.link, configuration: .init(additionalHeaders: gateway)) { inbound, outbound, _ in
                var replies = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                try await Self.send(.open(stream: 1, Self.identity(revoked, RuntimeFixture.alice)), outbound)
                try await Self.send(.open(stream: 2, Self.identity(kept, RuntimeFixture.alice)), outbound)
                try await Self.send(Self.text(1, #"{"type":"intent","request_id":"a","intent_type":"echo"}"#), outbound)
                transcript.append(try Self.reply(try await Self.next(&replies), stream: 1))
                _ = try await client.call(.post, "/runtime/v1/sessions/\(revoked)/revoke", headers: alice)
                try await Self.send(Self.text(1, #"{"type":"intent","request_id":"b","intent_type":"echo"}"#), outbound)
                transcript.append(try Self.reply(try await Self.next(&replies), stream: 1))
                let close = try await Self.next(&replies)
                ended.withLock { $0 = close }
                try await Self.send(Self.text(2, #"{"type":"intent","request_id":"c","intent_type":"echo"}"#), outbound)
                transcript.append(try Self.reply(try await Self.next(&replies), stream: 2))
                try await outbound.close(.normalClosure, reason: nil)
            }
            let replies = transcript.all
            #expect(replies.count == 3)
            guard replies.count == 3 else { return }
            #expect(replies[0]["status"] == "completed")
            #expect(replies[1]["error"]?.objectValue?["error"] == "session_not_found")
            guard case .close(1, 1008, _)? = ended.withLock({ $0 }) else {
                Issue.record("the revoked session's stream did not close with 1008")
                return
            }
            #expect(replies[2]["status"] == "completed")
        }
    }
}
