import NIOCore
import NIOHTTP2

/// Closes an HTTP/2 stream whose answer went out whole before its request did (a 413, a 401 at the
/// head of an upload) without losing the answer.
///
/// A stream closed at once is reset with `CANCEL`, and its answer's frames still queued are dropped;
/// clients read that as a failed request. So a close asked for then waits for the answer's last
/// frame, and reads (and drops) the rest of the request meanwhile, as an HTTP/1.1 connection is
/// drained: a request that ends within `drainLimit` bytes and `answerGrace` closes the stream
/// cleanly, and the client reads its answer (curl 7.88 reports a stream reset during an upload as a
/// failure, the answer unread). Past either bound the stream is reset with `RST_STREAM` `NO_ERROR`
/// after the answer, as RFC 9113 §8.1 allows: the client stops sending and keeps the answer.
///
/// First in a stream's pipeline, it sees every frame: whether the request ended, and whether the answer did.
final class HTTP2StreamEarlyAnswer: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// The most of a request's rest read and dropped after its answer, before the stream is reset instead.
    static let drainLimit = 1 << 20
    /// How long a closing stream waits for its request's end, and for its answer's last frame to be taken.
    static let answerGrace = TimeAmount.seconds(5)

    private var requestEnded = false
    /// The answer's last frame, once written: the close waits for it.
    private var answerEnd: EventLoopFuture<Void>?
    /// A close asked for while the request was still arriving: what it asked, and what was dropped since.
    private var draining: (mode: CloseMode, promise: EventLoopPromise<Void>?, bytes: Int)?
    private var closed = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame {
        case .headers(let headers) where headers.endStream: requestEnded = true
        case .data(let data) where data.endStream: requestEnded = true
        default: break
        }
        guard var drain = draining else { return context.fireChannelRead(data) }
        if case .data(let data) = frame { drain.bytes += data.data.readableBytes }
        draining = drain
        if requestEnded {
            finish(context: context, reset: false)
        } else if drain.bytes > Self.drainLimit {
            finish(context: context, reset: true)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard draining == nil else { return context.read() }
        context.fireChannelReadComplete()
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
        guard mode == .all, answerEnd != nil, draining == nil else { return context.close(mode: mode, promise: promise) }
        if requestEnded {
            // Both halves ended: the close waits for the answer's last frame (its frames may still be
            // queued below, and a close now would reset the stream and drop them: a 400's body was lost).
            closed = true
            return closeAfterAnswer(context: context, mode: mode, promise: promise, reset: false)
        }
        draining = (mode, promise, 0)
        context.read()
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.assumeIsolated().scheduleTask(in: Self.answerGrace) { [self] in
            finish(context: loopBound.value, reset: true)
        }
    }

    /// Closes the draining stream once its answer's last frame is out: reset (`NO_ERROR`) when the
    /// request did not end, else as it stands (both halves ended).
    private func finish(context: ChannelHandlerContext, reset: Bool) {
        guard let drain = draining, !closed else { return }
        closed = true
        draining = nil
        closeAfterAnswer(context: context, mode: drain.mode, promise: drain.promise, reset: reset)
    }

    /// Closes the stream once the answer's last frame is taken, `answerGrace` at most: a client
    /// that keeps its window shut (the frame never goes) is reset (`NO_ERROR`) then, so that it
    /// cannot hold the stream, and its connection, for good. `reset`: the request did not end, so
    /// the stream is reset after the answer too (RFC 9113 §8.1).
    private func closeAfterAnswer(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?, reset: Bool) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let close = { (resetting: Bool) in
            let context = loopBound.value
            if resetting { context.writeAndFlush(NIOAny(HTTP2Frame.FramePayload.rstStream(.noError)), promise: nil) }
            context.close(mode: mode, promise: promise)
        }
        guard let answerEnd else { return close(false) }
        // One of the two closes, whichever comes first: the answer's end, or the grace's.
        let done = NIOLoopBoundBox(false, eventLoop: context.eventLoop)
        let grace = context.eventLoop.assumeIsolated().scheduleTask(in: Self.answerGrace) {
            guard !done.value else { return }
            done.value = true
            close(true)
        }
        answerEnd.assumeIsolated().whenComplete { result in
            guard !done.value else { return }
            done.value = true
            grace.cancel()
            if case .success = result { close(reset) } else { close(false) }
        }
    }
}
