import NIOCore
import NIOPosix

/// The byte-framing floor: finds each request head in the raw bytes and forwards it as one
/// buffer with the added header; the response is streamed back as it arrives, its end found
/// from its head's Content-Length.
final class ByteProxyHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private static let addedHeader = ByteBuffer(string: "\(assertionHeaderName): \(assertionHeaderValue)\r\n\r\n")

    private let upstream: UpstreamLink
    private var received = ByteBuffer()

    init(upstream: SocketAddress) { self.upstream = UpstreamLink(address: upstream) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        received.writeBuffer(&bytes)
        while let headLength = HeadScan.headLength(received) {
            guard let head = received.readSlice(length: headLength) else { return }
            if Self.hasBody(head) {
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")))
                    .whenComplete { _ in context.close(promise: nil) }
                return
            }
            var out = ByteBuffer()
            out.reserveCapacity(headLength + Self.addedHeader.readableBytes)
            out.writeBytes(head.readableBytesView.dropLast(2))  // up to the last header's CRLF
            out.writeImmutableBuffer(Self.addedHeader)
            let client = context.channel
            upstream.forward(out, client: client) { ByteUpstreamHandler(client: client) }
        }
        if received.readableBytes == 0 { received.clear() }
        if received.readableBytes > 16_384 { context.close(promise: nil) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        upstream.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        upstream.close()
        context.fireChannelInactive()
    }

    /// Whether the head announces a body (Content-Length other than 0, or Transfer-Encoding).
    static func hasBody(_ head: ByteBuffer) -> Bool {
        HeadScan.number(of: "transfer-encoding:", in: head) != nil || (HeadScan.number(of: "content-length:", in: head) ?? 0) != 0
    }
}

/// Streams the upstream's bytes to the client, tracking where each response ends.
final class ByteUpstreamHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let client: Channel
    private let write: (ByteBuffer) -> Void
    private let flush: () -> Void
    private var head = ByteBuffer()
    private var remainingBody = 0

    /// `write` and `flush` reach the client (by default its channel's tail).
    init(client: Channel, write: ((ByteBuffer) -> Void)? = nil, flush: (() -> Void)? = nil) {
        self.client = client
        self.write = write ?? { client.write($0, promise: nil) }
        self.flush = flush ?? { client.flush() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        write(bytes)
        while bytes.readableBytes > 0 {
            if remainingBody > 0 {
                let step = min(remainingBody, bytes.readableBytes)
                bytes.moveReaderIndex(forwardBy: step)
                remainingBody -= step
                continue
            }
            head.writeBuffer(&bytes)
            guard let headLength = HeadScan.headLength(head) else { return }
            remainingBody = max(0, HeadScan.number(of: "content-length:", in: head.getSlice(at: head.readerIndex, length: headLength) ?? head) ?? 0)
            head.moveReaderIndex(forwardBy: headLength)
            bytes = head
            head = ByteBuffer()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        client.close(promise: nil)
    }
}
