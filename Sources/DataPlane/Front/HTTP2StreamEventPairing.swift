import NIOCore
import NIOHTTP2

/// Passes on a stream's close only for a stream whose opening was passed on, and each opening once.
///
/// swift-nio-http2's connection handler reports a stream closed that it never reported open when
/// the stream's first `HEADERS` is refused as it arrives (an empty or malformed header block: the
/// stream is reset at once). Its connection-management handler counts open streams from these
/// events and asserts that every close matches an opening (a debug build stops on it; a release
/// build would miscount, and close idle connections late or never). With its stream multiplexer as
/// a handler of its own, the gateway's management handler reads these events, so they are paired here first.
package final class HTTP2StreamEventPairing: ChannelInboundHandler {
    package typealias InboundIn = HTTP2Frame
    package typealias InboundOut = HTTP2Frame

    private var open = Set<HTTP2StreamID>()

    package init() {}

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let created as NIOHTTP2StreamCreatedEvent:
            guard open.insert(created.streamID).inserted else { return }
        case let closed as StreamClosedEvent:
            guard open.remove(closed.streamID) != nil else { return }
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }
}
