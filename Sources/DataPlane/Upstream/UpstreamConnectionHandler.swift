import NIOCore
import NIOHTTP1

/// A part of an upstream's answer, framed by `UpstreamResponseParser`.
enum UpstreamResponsePart {
    case head(UpstreamResponseHead)
    /// Body bytes as they arrived, with no framing (a slice of the read, not a copy).
    case body(ByteBuffer)
    case end
}

/// What an upstream connection reports to the exchange using it.
protocol UpstreamConnectionDelegate: AnyObject {
    func upstreamRead(_ part: UpstreamResponsePart)
    func upstreamReadComplete()
    func upstreamClosed()
    func upstreamWritabilityChanged(_ writable: Bool)
    /// The connection failed (a TLS handshake refused, or an answer that is not valid HTTP/1.1); it is closed next.
    func upstreamFailed(_ error: any Error)
    /// The answer's trailers (an HTTP/2 upstream's; gRPC's status), just before its `.end`.
    func upstreamTrailers(_ trailers: HTTPHeaders)
}

/// The only handler of an upstream connection (after TLS, for `https://`): frames the answer
/// from the raw bytes and passes its parts to the exchange using the connection.
///
/// The parts of one read are framed first and passed on after, so that what the exchange does
/// with them (end, release the connection, start the next request on it) never runs inside the parser.
final class UpstreamConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    /// The exchange using the connection. Strong, and cleared by every path that ends an exchange
    /// (the pool's release, the exchange's failure or its client's departure, the connection's
    /// close): a weak reference would allocate a side table for every exchange.
    var delegate: (any UpstreamConnectionDelegate)?
    private var parser = UpstreamResponseParser()
    /// The parts of the current read, reused from read to read.
    private var parts: [UpstreamResponsePart] = []
    /// No error was seen: the connection may carry another exchange once its answer has ended.
    private(set) var isReusable = true
    /// The connection failed (a reset, a TLS error): its close ends no answer, even one read until the close.
    private var failed = false

    /// A request is about to be written: the next bytes are its answer.
    func expectResponse(toHEAD: Bool, upgrade: Bool = false) {
        parser.expectResponse(toHEAD: toHEAD, upgrade: upgrade)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        var parts = self.parts
        self.parts = []
        var failure: UpstreamResponseError?
        do {
            try buffer.withUnsafeReadableBytes { bytes throws(UpstreamResponseError) in
                try parser.parse(bytes) { event in
                    switch event {
                    case .head(let head): parts.append(.head(head))
                    case .body(let range):
                        // The range lies inside the readable bytes by construction.
                        if let slice = buffer.getSlice(at: buffer.readerIndex + range.lowerBound, length: range.count) { parts.append(.body(slice)) }
                    case .end: parts.append(.end)
                    }
                }
            }
        } catch {
            failure = error
            isReusable = false
        }
        if delegate == nil && (!parts.isEmpty || failure != nil) {
            // Nothing is waiting for an answer on an idle connection: it cannot be reused.
            isReusable = false
            context.close(promise: nil)
        }
        for part in parts { delegate?.upstreamRead(part) }
        parts.removeAll(keepingCapacity: true)
        if self.parts.isEmpty { self.parts = parts }
        if let failure {
            delegate?.upstreamFailed(failure)
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        delegate?.upstreamReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        isReusable = false
        // Only an orderly close ends a body read until the close; after a reset the body was cut off.
        if !failed, parser.connectionClosed() { delegate?.upstreamRead(.end) }
        delegate?.upstreamClosed()
        delegate = nil
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        delegate?.upstreamWritabilityChanged(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        isReusable = false
        failed = true
        delegate?.upstreamFailed(error)
        context.close(promise: nil)
    }
}

/// One keep-alive connection to an upstream.
final class UpstreamConnection {
    let channel: any Channel
    let handler: UpstreamConnectionHandler

    init(channel: any Channel, handler: UpstreamConnectionHandler) {
        self.channel = channel
        self.handler = handler
    }
}
