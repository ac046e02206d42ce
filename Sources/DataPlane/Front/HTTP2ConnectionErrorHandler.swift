import NIOCore

/// Closes an HTTP/2 connection once swift-nio-http2 has answered a connection error with `GOAWAY`.
///
/// On a connection error (a protocol violation, a CONTINUATION or control-frame flood, a header
/// list past the limit, too many resets) swift-nio-http2 sends `GOAWAY` with the error's code and
/// leaves the close to the pipeline: without this handler the connection stayed open, and a
/// flooding client went on being read (160 MB of CONTINUATION frames read after the `GOAWAY`).
/// The errors it reports do not say which end a stream and which the connection (most stream
/// errors come unwrapped), so this handler reads what is sent instead: between the socket and the
/// HTTP/2 handler, it follows the frames going out, and after a `GOAWAY` whose code is not
/// `NO_ERROR` (a graceful stop's is) it flushes and closes.
package final class HTTP2ConnectionErrorHandler: ChannelOutboundHandler {
    package typealias OutboundIn = IOData
    package typealias OutboundOut = IOData

    /// The bytes of the current frame's header read so far (9 when whole).
    private var header: [UInt8] = []
    /// Payload bytes of the current frame still to come.
    private var remaining = 0
    /// In a `GOAWAY` payload: its first 8 bytes (last stream id, error code) as they come.
    private var goaway: [UInt8]?
    private var closing = false
    private var closed = false

    package init() {}

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if !closing, case .byteBuffer(let buffer) = unwrapOutboundIn(data) {
            follow(buffer.readableBytesView)
        }
        context.write(data, promise: promise)
        if closing && !closed {
            closed = true
            context.flush()
            context.close(promise: nil)
        }
    }

    /// Reads the frames in `bytes`, which continue those written before.
    private func follow(_ bytes: ByteBufferView) {
        var index = bytes.startIndex
        while index < bytes.endIndex, !closing {
            if remaining == 0, header.isEmpty, bytes.endIndex - index >= 9 {
                // A whole frame header in this write (the usual case): read in place.
                remaining = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
                goaway = bytes[index + 3] == 7 ? [] : nil
                index += 9
                continue
            }
            if remaining == 0 {
                header.append(bytes[index])
                index += 1
                guard header.count == 9 else { continue }
                remaining = Int(header[0]) << 16 | Int(header[1]) << 8 | Int(header[2])
                goaway = header[3] == 7 ? [] : nil
                header.removeAll(keepingCapacity: true)
                continue
            }
            let take = min(remaining, bytes.endIndex - index)
            if var code = goaway, code.count < 8 {
                code.append(contentsOf: bytes[index..<(index + min(take, 8 - code.count))])
                goaway = code
                // The error code is the second word; NO_ERROR (a graceful stop's GOAWAY) keeps the connection.
                if code.count == 8, code[4..<8].contains(where: { $0 != 0 }) { closing = true }
            }
            remaining -= take
            index += take
        }
    }
}
