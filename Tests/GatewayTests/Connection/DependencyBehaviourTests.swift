import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PortcullisTestSupport
import Testing

/// What the gateway's HTTP/1 handling assumes of its dependencies, stated where an update that
/// changes it fails with a message saying what changed (Package.swift takes swift-nio,
/// swift-nio-extras and Hummingbird up to the next minor version only; README, "Updating the
/// dependencies"). Each test names the code that relies on the behaviour.
@Suite("What the data plane assumes of NIO's HTTP/1 codec and Hummingbird, pinned")
struct DependencyBehaviourTests {
    /// An unpaired response encoder (as `AgentUpgradeChannel.configureHTTPPipeline` builds it): the bytes it writes for `parts`.
    static func encoded(_ parts: [HTTPServerResponsePart]) throws -> String {
        let channel = EmbeddedChannel(handler: HTTPResponseEncoder(configuration: .init()))
        defer { _ = try? channel.finish() }
        for part in parts { try channel.writeOutbound(part) }
        var text = ""
        while let data = try channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(var bytes) = data { text += bytes.readString(length: bytes.readableBytes) ?? "" }
        }
        return text
    }

    /// What NIO's request decoder, with the gateway's limits, reads from `text`: its parts, and the error it stopped on.
    static func decoded(_ text: String, limits: NIOHTTPDecoderLimitConfiguration = .init()) -> (parts: [HTTPServerRequestPart], error: (any Error)?) {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, limitConfiguration: limits)))
        defer { _ = try? channel.finish() }
        var failure: (any Error)?
        do {
            try channel.writeInbound(ByteBuffer(string: text))
        } catch {
            failure = error
        }
        var parts: [HTTPServerRequestPart] = []
        while let part = try? channel.readInbound(as: HTTPServerRequestPart.self) { parts.append(part) }
        return (parts, failure)
    }

    @Test("NIO's encoder, unpaired, frames by status alone: a sized head writes no body of its own, a head without a length is made chunked, an empty body part writes nothing, and .end writes the last chunk (RequestTargetHandler's HEAD framing rests on all four)")
    func unpairedEncoderFramesByStatus() throws {
        let sized = try Self.encoded([
            .head(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "5"])), .end(nil),
        ])
        #expect(sized == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "NIO's encoder changed what it writes for a sized head and .end: \(sized.debugDescription)")
        let unsized = try Self.encoded([.head(HTTPResponseHead(version: .http1_1, status: .ok)), .body(.byteBuffer(ByteBuffer())), .end(nil)])
        #expect(
            unsized == "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
            "NIO's encoder changed how it frames a head without a length (RequestTargetHandler turns .end into an empty body part for HEAD to avoid the last chunk): \(unsized.debugDescription)")
        let suppressed = try Self.encoded([.head(HTTPResponseHead(version: .http1_1, status: .ok)), .body(.byteBuffer(ByteBuffer()))])
        #expect(suppressed == "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", "an empty body part now writes bytes: \(suppressed.debugDescription)")
    }

    @Test("NIO's request decoder, built with the public initialiser, decodes every pipelined head in a read before any answer (so the books of owed answers are a queue)")
    func pipelinedHeadsDecodeTogether() {
        let (parts, error) = Self.decoded("GET /a HTTP/1.1\r\nHost: x\r\n\r\nHEAD /b HTTP/1.1\r\nHost: x\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(error == nil)
        let heads = parts.compactMap { part -> String? in
            if case .head(let head) = part { return "\(head.method) \(head.uri)" }
            return nil
        }
        #expect(heads == ["GET /a", "HEAD /b", "GET /c"], "NIO's decoder no longer decodes pipelined heads together: \(heads)")
    }

    @Test("NIO's decoder counts the request target as a header field: a target past maxHeaderFieldSize is headerOverflow, 431 (PlainRequestHead leaves such a head to it, so both paths answer alike)")
    func targetCountsAsAField() {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldSize = 64
        limits.maxHeaderListSize = 1_024
        let long = Self.decoded("GET /\(String(repeating: "a", count: 64)) HTTP/1.1\r\nHost: x\r\n\r\n", limits: limits)
        #expect(long.error as? HTTPParserError == .headerOverflow, "a long target is no longer headerOverflow: \(String(describing: long.error))")
        let bound = Self.decoded("GET /\(String(repeating: "a", count: 63)) HTTP/1.1\r\nHost: x\r\n\r\n", limits: limits)
        #expect(bound.error == nil, "a target at maxHeaderFieldSize is refused now: \(String(describing: bound.error))")
    }

    @Test("NIO's decoder reads Proxy-Connection: close as Connection: close (the head is not keep-alive, and nothing after that request parses) but adds no Connection field, which the HTTPTypes conversion and Hummingbird read (so RequestTargetHandler adds Connection: close)")
    func proxyConnectionClose() {
        let (parts, error) = Self.decoded("GET /a HTTP/1.1\r\nHost: x\r\nProxy-Connection: close\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(error != nil, "NIO's decoder now parses a request after Proxy-Connection: close; RequestTargetHandler's close rule can go")
        guard case .head(let head)? = parts.first else {
            Issue.record("no head decoded: \(parts)")
            return
        }
        #expect(!head.isKeepAlive, "NIO's decoder no longer marks a Proxy-Connection: close head as closing")
        #expect(!head.headers.contains(name: "connection"), "NIO's decoder now adds a Connection field; the one RequestTargetHandler adds is redundant")
    }

    @Test("Hummingbird's router with autoGenerateHeadEndpoints answers HEAD on a GET route with the GET's status and Content-Length and no body, and a HEAD on an unknown path as the GET's 404")
    func hummingbirdGeneratesHEAD() async throws {
        let router = Router(options: .autoGenerateHeadEndpoints)
        router.get("/thing") { _, _ in Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "twelve bytes"))) }
        let server = try await BackgroundServer.start { onPort in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.pinned"))
        }
        let port = server.port
        let answers = try await onOwnThread { () throws -> [StrictAnswerReader.Answer] in
            // 30 s: Hummingbird answers on the concurrency pool, which other tests' blocking work can hold a while (CI).
            let connection = try RawConnection(port: port, receiveTimeout: 30)
            defer { connection.close() }
            connection.send("HEAD /thing HTTP/1.1\r\nHost: x\r\n\r\nHEAD /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return try StrictAnswerReader.readAll(connection.readAll(), methods: ["HEAD", "HEAD"])
        }
        #expect(answers.map(\.status) == [200, 404], "Hummingbird's generated HEAD changed: \(answers.map(\.status))")
        #expect(answers.first?.field("content-length") == "12", "the generated HEAD no longer keeps the GET's Content-Length")
        try await server.stop()
    }
}
