import NIOCore

/// Tells the handlers after it that the channel is active, once, then leaves the pipeline.
///
/// The HTTP/2 pipeline is built after the preface was sniffed, on a channel already active, so
/// `channelActive` never reaches the handlers added then. swift-nio-http2's connection-management
/// handler starts its idle timer on that event: without it, a connection that sent the preface and
/// then nothing was never closed (twenty of them held `limits.max_connections` for good). Added
/// before that handler once the pipeline is built, it replays the event to it and the stream
/// multiplexer after it (which has no stream yet to activate).
final class ChannelActiveReplay: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { context.fireChannelActive() }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
