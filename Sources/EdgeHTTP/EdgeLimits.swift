import JOSE
import NIOCore
import NIOHTTP1
import Synchronization

/// Limits at the edge, each configurable (`limits.*`), each answered in a documented way.
public struct EdgeLimits: Sendable, Equatable {
    /// Largest request head (request line and headers), in bytes: 431 beyond.
    public var maximumHeaderBytes: Int = 16 * 1024
    /// Most header fields in one request: 431 beyond (Envoy's `max_headers_count` is 100 too).
    public var maximumHeaderCount: Int = 100
    /// Longest header name, and longest header value, in bytes: 431 beyond (nginx's buffer for one line is 8 KB).
    public var maximumHeaderFieldBytes: Int = 8 * 1024
    /// Time to receive a connection's first request head, in seconds: 408 and close beyond (slow clients).
    public var requestHeadTimeout: Double = 10
    /// Idle time allowed between requests on a keep-alive connection, in seconds.
    public var idleTimeout: Double = 60
    /// Time to receive a whole request, head and body, from its head, in seconds: a body that
    /// trickles in is answered 408 (or the connection closed, if its answer began) beyond.
    public var requestTimeout: Double = 30
    /// Open connections at once on the public listener: 503 and close beyond.
    public var maximumConnections: Int = 25_000
    /// Streams one HTTP/2 connection may have open at once (`SETTINGS_MAX_CONCURRENT_STREAMS`,
    /// nginx's default is 128): a client that opens more breaks the protocol, and swift-nio-http2
    /// closes its connection (`GOAWAY` `PROTOCOL_ERROR`).
    public var http2MaximumConcurrentStreams: Int = 100
    /// Streams an HTTP/2 client may reset per second on one connection, counted over 10 s: beyond,
    /// the connection is closed with `GOAWAY` (`ENHANCE_YOUR_CALM`); Rapid Reset (CVE-2023-44487).
    public var http2MaximumResetsPerSecond: Int = 10
    /// WebSocket messages a client may send per second (sustained; bursts of twice that): 1008 beyond.
    public var webSocketMessagesPerSecond: Double = 50
    /// Seconds between the gateway's pings on an idle socket; a socket that does not
    /// answer within another interval is closed with 1001.
    public var webSocketPingInterval: Double = 30
    /// Seconds an agent socket may stay unwritable (its client takes in nothing while messages wait)
    /// before it is closed with 1008; meanwhile the client is not read.
    public var webSocketSendTimeout: Double = 10

    public init() {}
}

/// Counts open connections against `EdgeLimits.maximumConnections`.
package final class ConnectionCounter: Sendable {
    let limit: Int
    private let open = Atomic<Int>(0)

    package init(limit: Int) { self.limit = limit }

    /// True if the connection may stay; then `release()` when it closes.
    package func acquire() -> Bool {
        let now = open.add(1, ordering: .relaxed).newValue
        if now > limit {
            open.subtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    package func release() { open.subtract(1, ordering: .relaxed) }
    var current: Int { open.load(ordering: .relaxed) }
}

/// A complete HTTP/1.1 response written straight to the socket, for answers
/// given before (or instead of) the HTTP pipeline: the error's JSON, then close.
package enum RawResponse {
    package static func bytes(_ error: GatewayError) -> ByteBuffer {
        let body = JSONWriter.string(error.json)
        var text = "HTTP/1.1 \(error.status.code) \(error.status.reasonPhrase)\r\ncontent-type: application/json\r\nconnection: close\r\n"
        text += "content-length: \(body.utf8.count)\r\n\r\n" + body
        return ByteBuffer(string: text)
    }
}

extension GatewayError {
    /// A request head that did not arrive whole within `limits.request_head_timeout_seconds`.
    package static var requestHeadTimedOut: GatewayError {
        GatewayError(.requestTimeout, "request_timeout", "the request head did not arrive in time; send it at once")
    }
}

/// Closes a connection whose first request head has not fully arrived within
/// the timeout (a slowloris client), answering 408 with the JSON error.
/// Sees raw bytes (after TLS); removes itself once the head's blank line arrives.
package final class RequestHeadTimeoutHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer

    let timeout: TimeAmount
    private var timer: Scheduled<Void>?
    private var tail: [UInt8] = []

    package init(timeout: TimeAmount) { self.timeout = timeout }

    package func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) {
            let context = loopBound.value
            let answer = RawResponse.bytes(.requestHeadTimedOut)
            context.writeAndFlush(NIOAny(answer)).whenComplete { _ in context.close(promise: nil) }
        }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        // Look for CRLFCRLF, across reads.
        tail.append(contentsOf: buffer.readableBytesView)
        let complete = tail.withUnsafeBufferPointer { bytes in
            bytes.count >= 4 && (0...(bytes.count - 4)).contains { bytes[$0] == 13 && bytes[$0 + 1] == 10 && bytes[$0 + 2] == 13 && bytes[$0 + 3] == 10 }
        }
        if tail.count > 3 { tail.removeFirst(tail.count - 3) }
        context.fireChannelRead(data)
        if complete {
            timer?.cancel()
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }
}

/// Answers HTTP parse errors with a JSON error instead of NIO's empty 400:
/// 431 for a head over the limit, 400 otherwise; then closes.
package final class HTTPParseErrorResponder: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias OutboundOut = HTTPServerResponsePart

    /// Its name in the pipeline (an upgraded socket removes it).
    package static let name = "portcullis.http-parse-error"

    package init() {}

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parseError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        let error = Self.answer(to: parseError)
        let body = ByteBuffer(bytes: JSONWriter.bytes(error.json))
        context.write(wrapOutboundOut(.head(error.responseHead(contentLength: body.readableBytes, close: true))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }
}

extension HTTPParseErrorResponder {
    /// The answer to a head NIO's decoder could not parse: 431 for one over the limits, 400 otherwise.
    static func answer(to parseError: HTTPParserError) -> GatewayError {
        parseError == .headerOverflow
            ? GatewayError(
                .requestHeaderFieldsTooLarge, "headers_too_large",
                "the request headers are too large (too many fields, a field too long, or too many bytes in all); send fewer or shorter headers")
            : GatewayError.invalidRequest("the request is not valid HTTP/1.1")
    }
}

/// Writes one prepared answer as soon as the connection is active, then closes it.
package final class AnswerAndCloseHandler: ChannelInboundHandler {
    package typealias InboundIn = ByteBuffer
    let answer: ByteBuffer
    private var answered = false

    package init(answer: ByteBuffer) { self.answer = answer }

    package func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { answerAndClose(context: context) }
    }

    package func channelActive(context: ChannelHandlerContext) {
        answerAndClose(context: context)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    private func answerAndClose(context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        context.writeAndFlush(NIOAny(answer)).whenComplete { _ in context.close(promise: nil) }
    }
}
