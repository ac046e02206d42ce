import NIOCore

/// Gathers an HTTP/2 connection's flushes into one per event-loop tick.
///
/// Every stream's answer ends with a flush, and each reached the socket as a system call of its
/// own: with a hundred streams on a connection answered by as many upstream reads in one tick,
/// a hundred writes of a few frames each. Between the socket and swift-nio-http2's handler, this
/// handler lets the frames be written at once and puts off the flush to the end of the tick
/// (a task on the event loop, which runs once the tick's I/O has been handled), so the answers
/// of one tick leave in one write.
final class HTTP2FlushCoalescer: ChannelOutboundHandler {
    typealias OutboundIn = Any

    private var flushScheduled = false

    func flush(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            loopBound.value.flush()
        }
    }

    /// What waits for the tick's flush goes out before a close (a `GOAWAY`, the last answers).
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if flushScheduled { context.flush() }
        context.close(mode: mode, promise: promise)
    }
}
