import NIOCore
import NIOHTTP2

/// Closes an HTTP/2 connection that was sent a graceful `GOAWAY` and has no open stream
/// `grace` later, whether or not its client answered the `PING` that followed.
///
/// swift-nio-http2's connection-management handler closes an idle connection in two steps: a
/// `GOAWAY` and a `PING`, then, once the `PING` is acknowledged, the last `GOAWAY` and the close.
/// A client that never reads (the preface, then nothing) never acknowledges, and its connection
/// stayed open for good, holding a place of `limits.max_connections`. Between the management
/// handler and the stream-event pairing, it sees the management handler's `GOAWAY` go out and
/// every paired stream open and close; while streams are open it looks again every `grace`.
package final class HTTP2GoAwayCloser: ChannelDuplexHandler {
    package typealias InboundIn = HTTP2Frame
    package typealias InboundOut = HTTP2Frame
    package typealias OutboundIn = HTTP2Frame
    package typealias OutboundOut = HTTP2Frame

    private let grace: TimeAmount
    private var openStreams = 0
    private var check: Scheduled<Void>?

    package init(grace: TimeAmount) {
        self.grace = grace
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is NIOHTTP2StreamCreatedEvent: openStreams += 1
        case is StreamClosedEvent: openStreams = max(0, openStreams - 1)
        default: break
        }
        context.fireUserInboundEventTriggered(event)
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if check == nil, case .goAway = unwrapOutboundIn(data).payload { scheduleCheck(context: context) }
        context.write(data, promise: promise)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
        context.fireChannelInactive()
    }

    private func scheduleCheck(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleTask(in: grace) {
            let (closer, context) = loopBound.value
            guard context.channel.isActive else { return }
            if closer.openStreams == 0 {
                context.close(promise: nil)
            } else {
                closer.scheduleCheck(context: context)
            }
        }
    }
}
