import NIOCore
import NIOHTTP1
import NIOPosix

/// The NIOHTTP1 floor: typed request parts in, typed parts out to a keep-alive upstream connection.
final class CodecProxyHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let upstreamAddress: SocketAddress
    private var upstream: Channel?
    private var connecting = false
    private var queued: [HTTPClientRequestPart] = []

    init(upstream: SocketAddress) { self.upstreamAddress = upstream }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(var head):
            head.headers.add(name: assertionHeaderName, value: assertionHeaderValue)
            send(.head(head), flush: false, context: context)
        case .body(let body):
            send(.body(.byteBuffer(body)), flush: false, context: context)
        case .end(let trailers):
            send(.end(trailers), flush: true, context: context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        upstream?.close(promise: nil)
        context.fireChannelInactive()
    }

    private func send(_ part: HTTPClientRequestPart, flush: Bool, context: ChannelHandlerContext) {
        if let upstream {
            upstream.write(part, promise: nil)
            if flush { upstream.flush() }
            return
        }
        queued.append(part)
        guard !connecting else { return }
        connecting = true
        let client = context.channel
        connectUpstream(upstreamAddress, for: client, { pipeline in
            try pipeline.addHTTPClientHandlers()
            try pipeline.addHandler(CodecUpstreamHandler(client: client))
        }) { channel in
            self.upstream = channel
            for part in self.queued { channel.write(part, promise: nil) }
            self.queued = []
            channel.flush()
        }
    }
}

/// Relays the upstream's typed response parts to the client connection.
final class CodecUpstreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let client: Channel

    init(client: Channel) { self.client = client }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): client.write(HTTPServerResponsePart.head(head), promise: nil)
        case .body(let body): client.write(HTTPServerResponsePart.body(.byteBuffer(body)), promise: nil)
        case .end(let trailers): client.writeAndFlush(HTTPServerResponsePart.end(trailers), promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        client.close(promise: nil)
    }
}
