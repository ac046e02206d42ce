@testable import DataPlane
@testable import EdgeHTTP
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import Testing

/// Which HTTP/2 streams the data plane serves on the connection (`HTTP2RouteStreams.routeHead`),
/// and the head it serves them with: exactly what a stream channel's HTTP/1 codec and target
/// screen make of the same `HEADERS`, or `nil` so the stream takes that channel.
@Suite("A route stream's head is the one swift-nio-http2's HTTP/1 codec and the target screen make, or the stream takes a stream channel")
struct HTTP2RouteHeadTests {
    static let base: [(String, String)] = [(":method", "GET"), (":scheme", "http"), (":authority", "gateway.test:8080"), (":path", "/api/x")]

    /// The head a stream channel's pipeline reads: swift-nio-http2's server codec, then `RequestTargetHandler.screen`.
    static func channelHead(_ fields: [(String, String)]) throws -> HTTPRequestHead {
        let channel = EmbeddedChannel(handler: HTTP2FramePayloadToHTTP1ServerCodec())
        defer { _ = try? channel.finish() }
        try channel.writeInbound(HTTP2Frame.FramePayload.headers(.init(headers: HPACKHeaders(fields), endStream: true)))
        guard case .head(var head) = try channel.readInbound(as: HTTPServerRequestPart.self) else {
            throw ChannelError.inappropriateOperationForState
        }
        try RequestTargetHandler.screen(&head)
        return head
    }

    @Test("a plain GET's head is the stream channel's: host from :authority first, then the fields in order, repeated names kept, the target normalised", arguments: [
        base,
        base + [("authorization", "Bearer x"), ("accept", "*/*"), ("cookie", "a=1"), ("cookie", "b=2"), ("x-empty", "")],
        [(":method", "GET"), (":scheme", "https"), (":authority", "h"), (":path", "/api/a/../b/./c?x=1&y")],
        [(":path", "/files//x"), (":authority", "h"), (":method", "GET"), (":scheme", "http")],
    ])
    func plainGetMatchesTheChannelPath(fields: [(String, String)]) throws {
        let expected = try Self.channelHead(fields)
        let head = try #require(HTTP2RouteStreams.routeHead(HPACKHeaders(fields)))
        #expect(head.method == expected.method && head.uri == expected.uri && head.version == expected.version)
        #expect(head.headers.map { "\($0.name): \($0.value)" } == expected.headers.map { "\($0.name): \($0.value)" })
    }

    @Test("any other request takes the stream channel: another method, a host field, gRPC, a missing, repeated, unknown or malformed pseudo-header, a target the screen refuses", arguments: [
        [(":method", "POST"), (":scheme", "http"), (":authority", "h"), (":path", "/api/x")],
        [(":method", "HEAD"), (":scheme", "http"), (":authority", "h"), (":path", "/api/x")],
        base + [("host", "gateway.test:8080")],
        base + [("content-type", "application/grpc")],
        base + [("content-type", "application/grpc+proto")],
        [(":method", "GET"), (":scheme", "http"), (":path", "/api/x")],
        base + [(":path", "/api/y")],
        base + [(":protocol", "websocket")],
        [(":method", "GET"), (":scheme", "http"), (":authority", "h"), (":path", "/api/a b")],
        [(":method", "GET"), (":scheme", "http"), (":authority", "h\u{7F}"), (":path", "/api/x")],
        [(":method", "GET"), (":scheme", "http"), (":authority", "h"), (":path", "/api/%00")],
        [(":method", "GET"), (":scheme", "http"), (":authority", "h"), (":path", "")],
    ])
    func anythingElseTakesTheChannel(fields: [(String, String)]) {
        #expect(HTTP2RouteStreams.routeHead(HPACKHeaders(fields)) == nil)
    }
}
