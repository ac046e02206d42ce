import NIOCore
import NIOHTTP1
import NIOHTTP2

/// `--codec h2-answer`: swift-nio-http2 as the gateway uses it (a stream channel a request, the
/// HTTP/1 types by `HTTP2FramePayloadToHTTP1ServerCodec`), answering each request itself with a
/// small JSON body, no upstream: what HTTP/2 costs in SwiftNIO before any proxying.
final class H2AnswerHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let body = #"{"ok":true,"service":"bench upstream"}"#

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: "\(Self.body.utf8.count)")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http2, status: .ok, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: Self.body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    /// The connection's pipeline: the HTTP/2 handler and a stream channel a request.
    static func configure(_ channel: Channel) throws {
        _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(mode: .server, connectionConfiguration: .init(), streamConfiguration: .init()) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandlers([HTTP2FramePayloadToHTTP1ServerCodec(), H2AnswerHandler()])
            }
        }
    }
}
