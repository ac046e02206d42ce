import NIOCore
import NIOHTTP1
import NIOPosix

/// The decoder floor: NIO's request decoder on the client side, everything else framed as bytes
/// (the upstream request head written as one buffer, the answer relayed past NIO's response
/// encoder). The shape of the gateway's data plane: the difference to the byte floor is what
/// NIO's request decoder and its typed parts cost.
final class DecoderProxyHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart

    private let upstreamAddress: SocketAddress
    private var upstream: Channel?
    private var connecting = false
    private var queued = ByteBuffer()
    /// The response encoder's context: writes through it go past the encoder as bytes.
    private var outlet: ChannelHandlerContext?

    init(upstream: SocketAddress) { self.upstreamAddress = upstream }

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
            forward(out, context: context)
        case .body:
            context.close(promise: nil)
        case .end:
            upstream?.flush()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        upstream?.close(promise: nil)
        context.fireChannelInactive()
    }

    private func forward(_ request: ByteBuffer, context: ChannelHandlerContext) {
        if let upstream {
            upstream.write(request, promise: nil)
            return
        }
        var request = request
        queued.writeBuffer(&request)
        guard !connecting, let outlet else { return }
        connecting = true
        let client = context.channel
        connectUpstream(upstreamAddress, for: client, { pipeline in
            try pipeline.addHandler(ByteUpstreamHandler(client: client, write: { outlet.write(NIOAny($0), promise: nil) }, flush: { outlet.flush() }))
        }) { channel in
            self.upstream = channel
            channel.writeAndFlush(self.queued, promise: nil)
            self.queued = ByteBuffer()
        }
    }
}
