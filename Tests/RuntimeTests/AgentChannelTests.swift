import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import HummingbirdWebSocket
import HummingbirdWSTesting
import JOSE
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

@Suite("Runtime agent channel over a real WebSocket")
struct AgentChannelTests {
    static func read(_ iterator: inout WebSocketInboundMessageStream.AsyncIterator) async throws -> JSONObject? {
        guard let message = try await iterator.next() else { return nil }
        guard case .text(let text) = message else { return nil }
        return try StrictJSONReader().parseObject(Array(text.utf8))
    }

    @Test("ping gets pong, an intent gets its result, and a malformed frame gets an error frame while the connection stays usable")
    func frames() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let alice = try fixture.headers(RuntimeFixture.alice)
            let id = try await client.createSession(headers: alice)
            let transcript = Transcript()
            let close = try await client.ws("/runtime/v1/agent?session_id=\(id)", configuration: .init(additionalHeaders: alice)) { inbound, outbound, _ in
                var replies = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
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
                    try await outbound.write(.text(frame))
                    if let reply = try await Self.read(&replies) { transcript.append(reply) }
                }
                try await outbound.close(.normalClosure, reason: nil)
            }
            #expect(close?.closeCode == .normalClosure)
            let replies = transcript.all
            #expect(replies.count == 8)
            guard replies.count == 8 else { return }
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
        }
    }

    @Test("a message over the size limit closes the connection with 1009")
    func oversized() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let alice = try fixture.headers(RuntimeFixture.alice)
            let id = try await client.createSession(headers: alice)
            let big = #"{"type":"intent","request_id":"big","intent_type":"echo","payload":""# + String(repeating: "x", count: 40_000) + #""}"#
            let close = try await client.ws("/runtime/v1/agent?session_id=\(id)", configuration: .init(maxFrameSize: 1 << 20, additionalHeaders: alice)) { inbound, outbound, _ in
                try await outbound.write(.text(big))
                for try await _ in inbound {}
            }
            #expect(close?.closeCode == .messageTooLarge)
        }
    }

    /// Sends one raw HTTP/1.1 request on a fresh TCP connection and returns the status line.
    static func rawStatusLine(port: Int, request: String) throws -> String {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket() failed") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestFailure("connect() failed") }
        _ = request.withCString { send(descriptor, $0, strlen($0), 0) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        let text = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)
        return String(text.split(separator: "\r\n").first ?? "")
    }

    static func upgradeRequest(path: String, assertion: String?) -> String {
        var lines = [
            "GET \(path) HTTP/1.1", "Host: 127.0.0.1", "Connection: Upgrade", "Upgrade: websocket",
            "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        ]
        if let assertion { lines.append("\(AssertionHeader.name): \(assertion)") }
        return lines.joined(separator: "\r\n") + "\r\n\r\n"
    }

    @Test("the upgrade is refused before the 101: no assertion, a forged one, no session, another user's session")
    func refusedUpgrades() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let port = try #require(client.port)
            let alice = try fixture.headers(RuntimeFixture.alice)
            let id = try await client.createSession(headers: alice)
            let forger = try JWSKey.generate(algorithm: .es256, kid: "gw1")
            let refusals: [(String, String?)] = [
                ("/runtime/v1/agent?session_id=\(id)", nil),
                ("/runtime/v1/agent?session_id=\(id)", try fixture.assertion(RuntimeFixture.alice, key: forger)),
                ("/runtime/v1/agent?session_id=\(id)", try fixture.assertion(RuntimeFixture.bob)),
                ("/runtime/v1/agent", try fixture.assertion(RuntimeFixture.alice)),
                ("/runtime/v1/agent?session_id=ses_bad", try fixture.assertion(RuntimeFixture.alice)),
                ("/runtime/v1/agent?session_id=\(try SessionID.generate())", try fixture.assertion(RuntimeFixture.alice)),
            ]
            for (path, assertion) in refusals {
                let status = try Self.rawStatusLine(port: port, request: Self.upgradeRequest(path: path, assertion: assertion))
                // hummingbird-websocket answers every refused upgrade with a bare 400 (see docs/RUNTIME.md).
                #expect(status.hasPrefix("HTTP/1.1 400"), "\(path): \(status)")
            }
            let accepted = try Self.rawStatusLine(port: port, request: Self.upgradeRequest(path: "/runtime/v1/agent?session_id=\(id)", assertion: try fixture.assertion(RuntimeFixture.alice)))
            #expect(accepted.hasPrefix("HTTP/1.1 101"), "\(accepted)")
            await #expect(throws: (any Error).self) {
                try await client.ws("/runtime/v1/agent?session_id=\(id)", configuration: .init(additionalHeaders: try fixture.headers(RuntimeFixture.bob))) { _, _, _ in
                    Issue.record("another user's session was upgraded")
                }
            }
        }
    }

    @Test("an intent after the session was revoked fails with session_not_found and the channel closes with 1008")
    func revokedMidConnection() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let alice = try fixture.headers(RuntimeFixture.alice)
            let id = try await client.createSession(headers: alice)
            let transcript = Transcript()
            let close = try await client.ws("/runtime/v1/agent?session_id=\(id)", configuration: .init(additionalHeaders: alice)) { inbound, outbound, _ in
                var replies = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                try await outbound.write(.text(#"{"type":"intent","request_id":"a","intent_type":"echo"}"#))
                if let reply = try await Self.read(&replies) { transcript.append(reply) }
                _ = try await client.call(.post, "/runtime/v1/sessions/\(id)/revoke", headers: alice)
                try await outbound.write(.text(#"{"type":"intent","request_id":"b","intent_type":"echo"}"#))
                if let reply = try await Self.read(&replies) { transcript.append(reply) }
                while try await replies.next() != nil {}
            }
            #expect(transcript.all.first?["status"] == "completed")
            #expect(transcript.all.last?["error"]?.objectValue?["error"] == "session_not_found")
            #expect(close?.closeCode == .policyViolation)
        }
    }
}
