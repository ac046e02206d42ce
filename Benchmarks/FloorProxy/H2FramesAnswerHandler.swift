import NIOCore
import NIOHPACK
import NIOHTTP2

/// `--codec h2-frames`: swift-nio-http2's connection handler alone, no stream channels: each
/// request's frames reach this one handler on the connection's pipeline, which answers a stream
/// when its request ends (HEADERS and DATA frames) and flushes once a read cycle. The least
/// swift-nio-http2 itself can cost a request (its framing, HPACK and stream state), for
/// comparison with `h2-answer`'s stream channel a request.
final class H2FramesAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private var answered = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers) where headers.endStream:
            answer(frame.streamID, context: context)
        case .data(let data) where data.endStream:
            answer(frame.streamID, context: context)
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if answered {
            answered = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    private func answer(_ stream: HTTP2StreamID, context: ChannelHandlerContext) {
        let headers: HPACKHeaders = [
            ":status": "200", "content-type": "application/json", "content-length": "\(H2AnswerHandler.body.utf8.count)",
        ]
        context.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .headers(.init(headers: headers)))), promise: nil)
        let body = context.channel.allocator.buffer(string: H2AnswerHandler.body)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        answered = true
    }

    /// The connection's pipeline: the HTTP/2 handler, then this handler for every stream's frames.
    static func configure(_ channel: Channel) throws {
        try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server))
        try channel.pipeline.syncOperations.addHandler(H2FramesAnswerHandler())
    }
}
