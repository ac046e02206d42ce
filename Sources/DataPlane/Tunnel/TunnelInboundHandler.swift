import NIOCore

/// The client's side of a WebSocket tunnel once the upstream has answered 101: the raw bytes
/// NIO's HTTP decoder no longer reads go to the exchange, which writes them upstream as they came.
///
/// Added right after the decoder, which is then removed (its bytes read past the upgrade request
/// come here first, as the decoder forwards them on removal); the handlers behind it, which take
/// HTTP parts, see nothing more. It asks for the client's reads itself, from its place in the
/// pipeline: the HTTP handlers behind stop asking once the upgrade request has ended. It stops
/// asking while the upstream cannot take more (`pause`), and asks again when it can (`resume`).
final class TunnelInboundHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    /// The exchange relaying the tunnel; cleared when the connection goes.
    private var exchange: ProxyExchange?
    private var context: ChannelHandlerContext?
    /// The upstream cannot take more: no read is asked for until `resume`.
    private var paused = false

    init(exchange: ProxyExchange) {
        self.exchange = exchange
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        context.read()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        exchange = nil
    }

    /// Only bytes arrive here: it sits right behind the socket's decoders, where NIO's HTTP decoder
    /// was, and that decoder forwards its leftovers as bytes when it is removed (`.forwardBytes`).
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        exchange?.clientTunnelRead(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        exchange?.clientTunnelReadComplete()
        if !paused { context.read() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        exchange = nil
        context.fireChannelInactive()
    }

    /// The upstream's socket is full: read no more of the client for now.
    func pause() {
        paused = true
    }

    /// The upstream can take more: read the client again.
    func resume() {
        guard paused else { return }
        paused = false
        context?.read()
    }
}
