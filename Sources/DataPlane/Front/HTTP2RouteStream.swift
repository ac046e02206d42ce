import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// One HTTP/2 stream served by the data plane without a stream channel: the host of its
/// `ProxyExchange`, writing the answer as frames on the connection (`HTTP2RouteStreams`).
///
/// Only a request that ended with its `HEADERS` frame is served so (see
/// `HTTP2RouteStreams.routeHead`), so nothing of the request is left to read: no reads to hold,
/// no request deadline, no body to drain. The answer's parts are converted as swift-nio-http2's
/// HTTP/1 codec converts them (`:status` first, names lower-cased, connection-specific fields
/// dropped), and its body is held back from the upstream while more than `highWatermark` bytes of
/// it wait for the client's flow-control window, as a stream channel's writability would. Each
/// part is held back until the next one or a flush, so an end that comes in the same upstream read
/// as the last part is that frame's flag (`HEADERS`, then `DATA` with `END_STREAM`, as nginx sends)
/// rather than an empty frame more.
final class HTTP2RouteStream: ProxyExchangeHost {
    let streamID: HTTP2StreamID
    private unowned let connection: HTTP2RouteStreams
    var exchange: ProxyExchange?
    /// The answer's last frame was written (the stream closes cleanly once it is out).
    private(set) var answerEnded = false
    /// The stream was closed (answered, reset, or its connection gone): nothing more is written.
    private(set) var closed = false
    /// The gateway reset the stream (`reset`): nothing more is written; its close ends the exchange, if one still runs.
    private var resetSent = false
    /// Bytes of the answer's `DATA` written and not yet taken by the socket (the client's window holds them).
    private var unsentBytes = 0
    private var reportedWritable = true
    /// The answer's latest part, held back until the next part or a flush: so the answer's end
    /// travels in its last frame (the `END_STREAM` flag) instead of a frame of its own.
    private var held = HeldPart.none

    private enum HeldPart {
        case none
        case head(HPACKHeaders)
        case body(IOData)
    }

    /// Past this many unsent bytes the upstream's answer is read no further; below `lowWatermark` again, it is.
    static let highWatermark = 8192
    static let lowWatermark = 4096

    init(streamID: HTTP2StreamID, connection: HTTP2RouteStreams) {
        self.streamID = streamID
        self.connection = connection
    }

    var plane: DataPlane { connection.plane }
    var context: ChannelHandlerContext? { closed ? nil : connection.context }
    var pool: UpstreamPool? { connection.pool }
    var metricHandles: ProxyMetricHandles? { connection.metricHandles }
    var headBuffers: HeadBuffers? { connection.headBuffers }
    var peerAddress: String? { connection.peerAddress }
    var relaysAnswerParts: Bool { true }
    var clientIsWritable: Bool { unsentBytes < Self.highWatermark && (connection.context?.channel.isWritable ?? false) }
    var currentExchange: ProxyExchange? { exchange }

    func nextRequestID() -> String { connection.requestIDs.next() }

    /// Whether more of the answer may be written: the stream is open, its answer not ended, not reset.
    private var answerOpen: Bool { !closed && !answerEnded && !resetSent }

    func writeToClient(_ part: HTTPServerResponsePart, flush: Bool) {
        guard answerOpen, let context = connection.context else { return }
        switch part {
        case .head(let head):
            hold(.head(Self.fields(of: head)), context)
        case .body(let body):
            hold(.body(body), context)
        case .end(let trailers):
            if trailers != nil {
                writeHeld(context)
                guard answerOpen else { return }  // the part before was refused: the stream is reset
            }
            answerEnded = true
            // The answer's end goes with its last frame when that is still held (the end came in the
            // same read): a `DATA` or a `HEADERS` that ends the stream, rather than an empty frame more.
            let last: HTTP2Frame.FramePayload
            switch (takeHeld(), trailers) {
            case (_, let trailers?):
                last = .headers(.init(headers: HPACKHeaders(httpHeaders: trailers, normalizeHTTPHeaders: true), endStream: true))
            case (.body(let body), nil):
                last = .data(.init(data: body, endStream: true))
            case (.head(let fields), nil):
                last = .headers(.init(headers: fields, endStream: true))
            case (.none, nil):
                last = .data(.init(data: .byteBuffer(context.channel.allocator.buffer(capacity: 0)), endStream: true))
            }
            context.write(NIOAny(HTTP2Frame(streamID: streamID, payload: last)), promise: nil)
        }
        guard flush else { return }
        // Through the context taken above: a last `HEADERS` closes the stream within its write (a
        // `DATA` waits for the window), and a closed stream's `context` is `nil`.
        if !closed { writeHeld(context) }
        context.flush()
    }

    /// A relayed answer's head, as HPACK fields straight from the upstream's bytes (`:status` first).
    func writeAnswerHead(_ response: UpstreamResponseHead, of exchange: ProxyExchange) {
        guard answerOpen, let context = connection.context else { return }
        var fields = HPACKHeaders()
        fields.reserveCapacity(response.fields.count + 3)
        fields.add(name: ":status", value: String(response.status))
        exchange.addClientHeadFields(for: response, to: &fields)
        hold(.head(fields), context)
    }

    /// Writes the part held before, then holds `part` in its place (its bytes, a body's, counted as unsent).
    private func hold(_ part: HeldPart, _ context: ChannelHandlerContext) {
        writeHeld(context)
        // The part before was refused (swift-nio-http2 resets the stream within the write): nothing more goes.
        guard answerOpen else { return }
        held = part
        if case .body(let body) = part {
            unsentBytes += body.readableBytes
            updateWritability()
        }
    }

    /// The held part, no longer held; a body's bytes no longer count as unsent (they go with the
    /// answer's end, or are dropped with the stream).
    private func takeHeld() -> HeldPart {
        let part = held
        held = .none
        if case .body(let body) = part { unsentBytes -= body.readableBytes }
        return part
    }

    /// Writes the part held back, if any: a `DATA` frame with the promise that counts its bytes out
    /// once the socket has taken them (the client's window may hold them a while).
    private func writeHeld(_ context: ChannelHandlerContext) {
        switch held {
        case .none:
            return
        case .head(let fields):
            held = .none
            context.write(NIOAny(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: fields)))), promise: nil)
        case .body(let body):
            held = .none
            let bytes = body.readableBytes
            let taken = context.eventLoop.makePromise(of: Void.self)
            taken.futureResult.assumeIsolated().whenComplete { [self] _ in
                unsentBytes -= bytes
                updateWritability()
            }
            context.write(NIOAny(HTTP2Frame(streamID: streamID, payload: .data(.init(data: body)))), promise: taken)
        }
    }

    /// An answer head's HTTP/2 fields, as swift-nio-http2's HTTP/1 codec makes them (`:status`
    /// first, names lower-cased, the connection-specific fields dropped), in one pass: a name is
    /// copied only when it has a capital letter, and the request id, new for every answer, is kept
    /// out of HPACK's table (where it would only push out fields that repeat).
    static func fields(of head: HTTPResponseHead) -> HPACKHeaders {
        var fields = HPACKHeaders()
        fields.reserveCapacity(head.headers.count + 1)
        fields.add(name: ":status", value: String(head.status.code))
        for (name, value) in head.headers {
            let lowered = name.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) ? name.lowercased() : name
            switch lowered.utf8.count {
            case 7 where lowered == "upgrade", 10 where lowered == "connection" || lowered == "keep-alive",
                16 where lowered == "proxy-connection", 17 where lowered == "transfer-encoding":
                continue
            case 12 where lowered == "x-request-id":
                fields.add(name: lowered, value: value, indexing: .nonIndexable)
            default:
                fields.add(name: lowered, value: value)
            }
        }
        return fields
    }

    /// Relayed answers come as parts here (`relaysAnswerParts`), never as HTTP/1.1 bytes: a byte
    /// write is a fault of the caller, and the stream is reset rather than sent bytes it cannot frame.
    func writeBytesToClient(_ buffer: ByteBuffer) { reset() }
    func bytesAnswerEnded() {}

    /// Writes the part held back and flushes: the upstream's read has ended (or a gateway-made
    /// answer is out), and what was read goes to the client now.
    func flushClient() {
        guard let context else { return }
        writeHeld(context)
        context.flush()
    }

    /// The request ended with its head: there is nothing to hold back.
    func holdReads() {}
    func resumeReads() {}

    func exchangeFinished(requestEnded: Bool, closeConnection: Bool) {
        exchange = nil
        // A relayed answer's end is written just after (the exchange ends first). A close asked for
        // is the stream's, as a stream channel's close is: reset if its answer did not end (cut off).
        if closeConnection { reset() }
    }

    /// The connection keeps one check for all its route streams' deadlines (`HTTP2RouteStreams.watchDeadline`):
    /// a check scheduled and cancelled per stream costs a search of the event loop's task queue each.
    func watchDeadline() {
        if let deadline = exchange?.deadline { connection.watchDeadline(deadline) }
    }

    /// No WebSocket on an HTTP/2 stream (RFC 8441 is not served): such a request never gets here.
    func beginTunnel(_ exchange: ProxyExchange) -> TunnelInboundHandler? { nil }

    /// The connection's writability changed, or bytes were taken: tells the exchange when its answer may flow again, or not.
    func updateWritability() {
        let writable = clientIsWritable
        guard writable != reportedWritable, !closed else { return }
        if writable && unsentBytes > Self.lowWatermark { return }
        reportedWritable = writable
        exchange?.clientWritabilityChanged(writable)
    }

    /// The stream closed: when its answer's end went out, the exchange that wrote it finishes by
    /// itself (just after, or before: `exchangeFinished`); otherwise the client reset it or the
    /// connection went, and the exchange ends, unanswered.
    func streamClosed() {
        guard !closed else { return }
        closed = true
        _ = takeHeld()
        if answerEnded { return }
        let exchange = exchange
        self.exchange = nil
        exchange?.clientGone()
    }

    /// swift-nio-http2 refused one of the answer's frames: the stream is reset (`INTERNAL_ERROR`),
    /// since nothing more of the answer can go, and the exchange ends.
    func refused() {
        guard !closed else { return }
        closed = true
        _ = takeHeld()
        let exchange = exchange
        self.exchange = nil
        // Even after the answer's end: it was the end that was refused, and the stream is still open.
        connection.context?.writeAndFlush(NIOAny(HTTP2Frame(streamID: streamID, payload: .rstStream(.internalError))), promise: nil)
        exchange?.clientGone()
    }

    /// Resets the stream with `CANCEL`, as closing a stream channel with its answer unfinished does.
    private func reset() {
        guard !closed, !answerEnded, !resetSent, let context = connection.context else { return }
        resetSent = true
        _ = takeHeld()
        context.writeAndFlush(NIOAny(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))), promise: nil)
    }
}
