import NIOCore
import NIOHTTP1

/// The reader of one HTTP/2 stream to an upstream (after swift-nio-http2's HTTP/1 client codec):
/// passes the answer's parts to the exchange as an HTTP/1 connection's handler does, so the
/// exchange screens and relays them the one way it knows.
///
/// The answer's head is read through `UpstreamResponseParser`, as HTTP/1.1 bytes: the fields
/// that may go back, the framing and the length are decided by the same code for both
/// protocols. Trailers (gRPC's status) are handed over before the end.
final class UpstreamStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    /// The exchange the stream belongs to; cleared when the exchange ends.
    var delegate: (any UpstreamConnectionDelegate)?
    /// The request was a `HEAD`: the answer has no body, whatever its length says.
    var answersHEAD = false
    private var ended = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            // An interim answer (100 Continue, 103) is the stream's business: the gateway answers expectations itself.
            guard head.status.code >= 200 else { return }
            do {
                delegate?.upstreamRead(.head(try Self.parsed(head, answersHEAD: answersHEAD)))
            } catch {
                delegate?.upstreamFailed(error)
                context.close(promise: nil)
            }
        case .body(let buffer):
            delegate?.upstreamRead(.body(buffer))
        case .end(let trailers):
            ended = true
            if let trailers, !trailers.isEmpty { delegate?.upstreamTrailers(trailers) }
            delegate?.upstreamRead(.end)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        delegate?.upstreamReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        delegate?.upstreamWritabilityChanged(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    /// A reset stream (or a closed connection) ends the exchange as a closed HTTP/1 connection does.
    func channelInactive(context: ChannelHandlerContext) {
        if !ended { delegate?.upstreamClosed() }
        delegate = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// `head` as the HTTP/1 parser reads it.
    static func parsed(_ head: HTTPResponseHead, answersHEAD: Bool) throws -> UpstreamResponseHead {
        var bytes = "HTTP/1.1 \(head.status.code) \(head.status.reasonPhrase)\r\n"
        for (name, value) in head.headers { bytes += name + ": " + value + "\r\n" }
        bytes += "\r\n"
        var parser = UpstreamResponseParser()
        parser.expectResponse(toHEAD: answersHEAD)
        var parsed: UpstreamResponseHead?
        var failure: UpstreamResponseError?
        let buffer = ByteBuffer(string: bytes)
        buffer.withUnsafeReadableBytes { raw in
            do {
                try parser.parse(raw) { event in
                    if case .head(let head) = event { parsed = head }
                }
            } catch {
                failure = error as? UpstreamResponseError ?? .invalidStatusLine
            }
        }
        if let failure { throw failure }
        guard let parsed else { throw UpstreamResponseError.invalidStatusLine }
        return parsed
    }
}

/// One stream to an upstream over a pooled HTTP/2 connection: the exchange writes its request's
/// parts to `channel` and reads the answer through `handler`.
final class UpstreamStream {
    let channel: any Channel
    let handler: UpstreamStreamHandler

    init(channel: any Channel, handler: UpstreamStreamHandler) {
        self.channel = channel
        self.handler = handler
    }
}
