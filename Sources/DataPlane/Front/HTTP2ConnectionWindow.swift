import NIOCore
import NIOHTTP2

/// Keeps an HTTP/2 connection's inbound flow-control window at its own target, larger than a
/// stream's, as swift-nio-http2's inline multiplexer does.
///
/// The stream multiplexer the gateway uses as a handler of its own (so that `HTTP2RouteStreams`
/// can serve route streams before it) has one target for both windows. Ahead of it, this handler
/// takes the connection's window events and sends the connection's `WINDOW_UPDATE`s itself, with
/// swift-nio-http2's rule: back up to the target once the window is down to half of it or less.
package final class HTTP2ConnectionWindow: ChannelInboundHandler {
    package typealias InboundIn = HTTP2Frame
    package typealias InboundOut = HTTP2Frame
    package typealias OutboundOut = HTTP2Frame

    private let target: Int

    package init(target: Int) {
        self.target = min(max(target, 0), Int(Int32.max))
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let window = event as? NIOHTTP2WindowUpdatedEvent, window.streamID == .rootStream else {
            return context.fireUserInboundEventTriggered(event)
        }
        guard let size = window.inboundWindowSize, let increment = Self.increment(window: size, target: target) else { return }
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
    }

    /// The increment that restores `window` to `target`, when it is due: none while the window is
    /// above half the target; a negative window (settings shrank it) is restored in full, within `Int32.max`.
    package static func increment(window: Int, target: Int) -> Int? {
        if window >= target { return nil }
        if window >= 0 { return target - window >= window ? target - window : nil }
        return min(-window + target, Int(Int32.max))
    }
}
