import NIOCore
import NIOHTTP1
import NIOPosix

/// The decoder floor: NIO's request decoder on the client side, everything else framed as bytes
/// (the upstream request head written as one buffer, the answer relayed past NIO's response
/// encoder). The shape of the gateway's data plane: the difference to the byte floor is what
/// NIO's request decoder and its typed parts cost.
final class DecoderProxyHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart

    private let upstream: UpstreamLink
    /// The response encoder's context: writes through it go past the encoder as bytes.
    private var outlet: ChannelHandlerContext?

    init(upstream: SocketAddress) { self.upstream = UpstreamLink(address: upstream) }

    func handlerAdded(context: ChannelHandlerContext) {
        outlet = try? context.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            var out = context.channel.allocator.buffer(capacity: 512)
            out.writeString(head.method.rawValue)
            out.writeStaticString(" ")
            out.writeString(head.uri)
            out.writeStaticString(" HTTP/1.1\r\n")
            for (name, value) in head.headers {
                out.writeString(name)
                out.writeStaticString(": ")
                out.writeString(value)
                out.writeStaticString("\r\n")
            }
            out.writeString("\(assertionHeaderName): \(assertionHeaderValue)\r\n\r\n")
            guard let outlet else { return context.close(promise: nil) }
            let client = context.channel
            upstream.forward(out, client: client) {
                ByteUpstreamHandler(client: client, write: { outlet.write(NIOAny($0), promise: nil) }, flush: { outlet.flush() })
            }
        case .body:
            context.close(promise: nil)
        case .end:
            upstream.flush()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        upstream.close()
        context.fireChannelInactive()
    }
}
