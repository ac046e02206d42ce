import NIOCore

/// The first handler of every connection to the Runtime's listener: it makes a graceful
/// stop reach connections whose first request Hummingbird has not yet classified.
///
/// Hummingbird's HTTP/1-with-WebSocket-upgrade channel adds the handler that acts on
/// `ChannelShouldQuiesceEvent` (close when idle, or after the answer in flight) only once
/// the first request has shown it is not an upgrade. Until then the event is dropped: a
/// client that connected and sent nothing, or a request that arrived just as the stop
/// began, held the listener's shutdown, and so the process, open for ever (and a
/// never-classified connection ignores task cancellation too). This handler:
///
/// - closes at once a connection that has sent nothing when the stop begins;
/// - otherwise repeats the event after every later read and write (on the next turn of
///   the event loop, so an answer being written and flushed is never cut by a close in the
///   middle of its write), so the handlers added meanwhile act on it (close after the
///   answer in flight);
/// - and closes the connection `closeAfter` into the stop whatever it is doing, which
///   makes `limits.shutdown_timeout_seconds` hold for every connection.
final class QuiesceRelay: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let closeAfter: TimeAmount
    private var sawBytes = false
    private var quiescing = false
    private var forcedClose: Scheduled<Void>?
    /// A repeat of the quiesce event is scheduled for the next turn of the loop.
    private var relayScheduled = false

    /// - Parameter closeAfter: how long into a graceful stop the connection may stay open.
    init(closeAfter: TimeAmount) {
        self.closeAfter = closeAfter
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        forcedClose?.cancel()
        forcedClose = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        forcedClose?.cancel()
        forcedClose = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        sawBytes = true
        context.fireChannelRead(data)
        relayLater(context: context)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
        relayLater(context: context)
    }

    /// Repeats the quiesce event on the next turn of the loop, once, while the stop goes on.
    private func relayLater(context: ChannelHandlerContext) {
        guard quiescing, !relayScheduled else { return }
        relayScheduled = true
        context.eventLoop.assumeIsolated().execute { [weak self, weak context] in
            guard let self, let context else { return }
            self.relayScheduled = false
            context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent, !quiescing else { return context.fireUserInboundEventTriggered(event) }
        quiescing = true
        guard sawBytes else {
            context.close(promise: nil)
            return
        }
        forcedClose = context.eventLoop.assumeIsolated().scheduleTask(in: closeAfter) { [weak context] in
            context?.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }
}
