import NIOCore
import NIOHTTP2

/// Ends an HTTP/2 stream whose answer went out whole before its request did (a 413, a 401 at
/// the head of an upload) with `RST_STREAM` `NO_ERROR`, as RFC 9113 §8.1 asks: the client
/// stops sending and keeps the answer. Closed otherwise, a stream is reset with `CANCEL`, and
/// clients read that as a failed request, dropping the answer they were given.
///
/// First in a stream's pipeline, it sees every frame: whether the request ended, and whether
/// the answer did; a close asked for in between becomes the early answer's reset.
final class HTTP2StreamEarlyAnswer: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private var requestEnded = false
    /// The answer's last frame, once written: the reset waits for it (a reset drops the stream's frames still queued).
    private var answerEnd: EventLoopFuture<Void>?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers) where headers.endStream: requestEnded = true
        case .data(let data) where data.endStream: requestEnded = true
        default: break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let ends: Bool
        switch unwrapOutboundIn(data) {
        case .headers(let headers): ends = headers.endStream
        case .data(let data): ends = data.endStream
        default: ends = false
        }
        guard ends else { return context.write(data, promise: promise) }
        let written = context.eventLoop.makePromise(of: Void.self)
        if let promise { written.futureResult.cascade(to: promise) }
        answerEnd = written.futureResult
        context.write(data, promise: written)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, let answerEnd, !requestEnded else { return context.close(mode: mode, promise: promise) }
        requestEnded = true
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        var closed = false
        let closeOnce = { (reset: Bool) in
            guard !closed else { return }
            closed = true
            let context = loopBound.value
            if reset { context.writeAndFlush(NIOAny(HTTP2Frame.FramePayload.rstStream(.noError)), promise: nil) }
            context.close(mode: mode, promise: promise)
        }
        answerEnd.assumeIsolated().whenComplete { result in
            if case .success = result { closeOnce(true) } else { closeOnce(false) }
        }
        // A client that never opens its window never takes the answer's last frame: the stream is closed anyway.
        context.eventLoop.assumeIsolated().scheduleTask(in: Self.answerGrace) { closeOnce(false) }
    }

    /// How long a closing stream waits for its answer's last frame to be taken.
    static let answerGrace = TimeAmount.seconds(5)
}
