import NIOCore
import NIOWebSocket

/// Reads an agent socket's WebSocket frames into whole messages and writes the gateway's frames,
/// in one handler: in place of NIO's frame decoder (and the `ByteToMessageHandler` around it),
/// its protocol-error handler, its aggregator and its encoder, which between them and their
/// pipeline slots held about 750 bytes of every idle socket.
///
/// Inbound (RFC 6455 §5): frames masked, as a client's must be; control frames (close, ping,
/// pong) final and at most 125 bytes, passed on at once, also between a message's fragments;
/// a message's fragments joined, at most `maximumMessageBytes` in all, checked from the frame's
/// header before its payload is waited for, so no more than that is ever held. Anything else
/// (a reserved bit or opcode, an unmasked frame, a continuation with no message begun, a new
/// message inside one, a length with its top bit set) is an `AgentFrameError` passed to
/// `errorCaught`, and nothing more is read from the connection. Messages are passed on as
/// `WebSocketFrame`s with `fin` set and the payload unmasked.
///
/// Outbound: each `WebSocketFrame` as one unmasked frame (a server's are not masked).
package final class AgentFrameCodec: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = WebSocketFrame
    package typealias OutboundIn = WebSocketFrame
    package typealias OutboundOut = ByteBuffer

    /// The largest message, its fragments' payloads together (`gateway.max_message_bytes`).
    let maximumMessageBytes: Int
    /// Bytes of a frame not yet whole, in a buffer of this handler's own (`nil`, holding nothing,
    /// between frames). The next read is appended to it in place, so a frame trickled in a byte at
    /// a time costs its bytes once, not once a read.
    private var partial: ByteBuffer?
    /// A message begun in fragments: its opcode, its payload so far and how many frames brought it.
    private var fragments: (opcode: WebSocketOpcode, data: ByteBuffer, count: Int)?
    /// The most frames one message may come in (NIO's aggregator's bound, as before): empty
    /// fragments cost the client six bytes each and would otherwise never end a message.
    static let maximumFragments = 1_024
    /// A frame was refused: the bytes after it cannot be read as frames.
    private var failed = false

    package init(maximumMessageBytes: Int) {
        self.maximumMessageBytes = max(0, maximumMessageBytes)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        var bytes = unwrapInboundIn(data)
        // Whether `bytes` is this handler's own buffer (the frame begun earlier, this read appended).
        let owned = partial != nil
        if var held = partial {
            partial = nil  // uniquely referenced again: appended in place, its growth amortised
            held.writeBuffer(&bytes)
            bytes = held
        }
        var consumed = false
        while !failed {
            switch nextFrame(&bytes) {
            case .frame(let frame):
                consumed = true
                context.fireChannelRead(wrapInboundOut(frame))
            case .incomplete:
                guard bytes.readableBytes > 0 else { return }
                if owned && !consumed {
                    // Still the frame begun earlier: kept as it is, no copy.
                    partial = bytes
                } else {
                    // A frame begun in this read (after one it ended, or in NIO's receive buffer, which
                    // holding a slice of would keep from being reused): its bytes so far, all from this read, copied.
                    var held = context.channel.allocator.buffer(capacity: bytes.readableBytes)
                    held.writeBuffer(&bytes)
                    partial = held
                }
                return
            case .refused(let error):
                failed = true
                partial = nil
                fragments = nil
                context.fireErrorCaught(error)
                return
            }
        }
    }

    private enum Next {
        case frame(WebSocketFrame)
        case incomplete
        case refused(AgentFrameError)
    }

    /// Reads the next frame at the start of `bytes`, consuming it when it is whole; a data frame
    /// that does not end a message is joined to `fragments` and the frame after it read.
    private func nextFrame(_ bytes: inout ByteBuffer) -> Next {
        while true {
            guard let first = bytes.getInteger(at: bytes.readerIndex, as: UInt8.self),
                let second = bytes.getInteger(at: bytes.readerIndex + 1, as: UInt8.self)
            else { return .incomplete }
            let fin = first & 0x80 != 0
            guard first & 0x70 == 0 else { return .refused(.protocolError("a reserved bit is set; no extension was agreed")) }
            guard let opcode = WebSocketOpcode(encodedWebSocketOpcode: first & 0x0F), Self.isDefined(opcode) else {
                return .refused(.protocolError("the opcode is reserved"))
            }
            guard second & 0x80 != 0 else { return .refused(.protocolError("a client's frame must be masked")) }
            var headerBytes = 2
            var length = UInt64(second & 0x7F)
            if length == 126 {
                guard let extended = bytes.getInteger(at: bytes.readerIndex + 2, as: UInt16.self) else { return .incomplete }
                length = UInt64(extended)
                headerBytes = 4
            } else if length == 127 {
                guard let extended = bytes.getInteger(at: bytes.readerIndex + 2, as: UInt64.self) else { return .incomplete }
                guard extended >> 63 == 0 else { return .refused(.protocolError("the frame's length has its top bit set")) }
                length = extended
                headerBytes = 10
            }
            let isControl = opcode.isControlOpcode
            if isControl {
                guard fin, length <= 125 else { return .refused(.protocolError("a control frame is fragmented or longer than 125 bytes")) }
            } else {
                // A continuation needs a message begun, a new message needs none.
                guard (opcode == .continuation) == (fragments != nil) else {
                    return .refused(.protocolError(opcode == .continuation ? "a continuation with no message begun" : "a new message before the last one ended"))
                }
                let joined = UInt64(fragments?.data.readableBytes ?? 0)
                guard length <= UInt64(maximumMessageBytes) - joined else { return .refused(.messageTooLarge(maximumMessageBytes)) }
            }
            // Within the bounds above, so an Int.
            let payloadBytes = Int(length)
            let frameBytes = headerBytes + 4 + payloadBytes
            guard bytes.readableBytes >= frameBytes, let mask = bytes.getInteger(at: bytes.readerIndex + headerBytes, as: UInt32.self) else { return .incomplete }
            let payloadStart = bytes.readerIndex + headerBytes + 4
            if isControl || (fin && fragments == nil) {
                var payload = ByteBufferAllocator().buffer(capacity: payloadBytes)
                Self.unmask(bytes, at: payloadStart, length: payloadBytes, mask: mask, into: &payload)
                if opcode == .connectionClose, let problem = Self.closeProblem(payload) { return .refused(.protocolError(problem)) }
                bytes.moveReaderIndex(forwardBy: frameBytes)
                return .frame(WebSocketFrame(fin: true, opcode: opcode, data: payload))
            }
            // A fragment: joined, and the message passed on at its last one.
            var message = fragments ?? (opcode, ByteBufferAllocator().buffer(capacity: payloadBytes), 0)
            fragments = nil
            message.count += 1
            guard fin || message.count < Self.maximumFragments else { return .refused(.messageTooLarge(maximumMessageBytes)) }
            Self.unmask(bytes, at: payloadStart, length: payloadBytes, mask: mask, into: &message.data)
            bytes.moveReaderIndex(forwardBy: frameBytes)
            if fin { return .frame(WebSocketFrame(fin: true, opcode: message.opcode, data: message.data)) }
            fragments = message
        }
    }

    /// What is wrong with a close frame's payload (RFC 6455 §5.5.1, §7.4): one byte (a code is two),
    /// a code no endpoint may send (below 1000, 1004-1006, 1015, 1016-2999 unassigned), or a reason
    /// that is not UTF-8. `nil`: none, or a code and a UTF-8 reason.
    static func closeProblem(_ payload: ByteBuffer) -> String? {
        guard payload.readableBytes > 0 else { return nil }
        guard let code = payload.getInteger(at: payload.readerIndex, as: UInt16.self) else { return "a close frame's payload is one byte; a code is two" }
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: break
        default: return "the close code \(code) may not be sent"
        }
        guard let reason = payload.getBytes(at: payload.readerIndex + 2, length: payload.readableBytes - 2),
            String(validating: reason, as: UTF8.self) != nil
        else { return "a close frame's reason is not UTF-8" }
        return nil
    }

    /// Text, binary, continuation, close, ping, pong: the opcodes RFC 6455 defines.
    private static func isDefined(_ opcode: WebSocketOpcode) -> Bool {
        switch opcode {
        case .continuation, .text, .binary, .connectionClose, .ping, .pong: return true
        default: return false
        }
    }

    /// Appends `length` bytes of `source` from `index`, XORed in turn with the bytes of `mask`
    /// (the masking key as read, most significant byte first).
    private static func unmask(_ source: ByteBuffer, at index: Int, length: Int, mask: UInt32, into target: inout ByteBuffer) {
        guard length > 0 else { return }
        let key = (UInt8(truncatingIfNeeded: mask >> 24), UInt8(truncatingIfNeeded: mask >> 16), UInt8(truncatingIfNeeded: mask >> 8), UInt8(truncatingIfNeeded: mask))
        source.withUnsafeReadableBytes { readable in
            // `index` is within the readable bytes and `length` of them follow it (checked by the caller).
            let offset = index - source.readerIndex
            _ = target.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { writable in
                for position in 0..<length {
                    let keyByte: UInt8
                    switch position & 3 {
                    case 0: keyByte = key.0
                    case 1: keyByte = key.1
                    case 2: keyByte = key.2
                    default: keyByte = key.3
                    }
                    writable[position] = readable[offset + position] ^ keyByte
                }
                return length
            }
        }
    }

    // MARK: Outbound

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = unwrapOutboundIn(data)
        let length = frame.data.readableBytes
        let headerBytes = length < 126 ? 2 : length <= Int(UInt16.max) ? 4 : 10
        // Small payloads go out with their header in one buffer; larger ones after it, uncopied.
        let together = length <= 1_024
        var header = context.channel.allocator.buffer(capacity: headerBytes + (together ? length : 0))
        header.writeInteger((frame.fin ? 0x80 : 0) | UInt8(webSocketOpcode: frame.opcode))
        if length < 126 {
            header.writeInteger(UInt8(length))
        } else if length <= Int(UInt16.max) {
            header.writeInteger(UInt8(126))
            header.writeInteger(UInt16(length))
        } else {
            header.writeInteger(UInt8(127))
            header.writeInteger(UInt64(length))
        }
        if together {
            var payload = frame.data
            header.writeBuffer(&payload)
            context.write(wrapOutboundOut(header), promise: promise)
        } else {
            context.write(wrapOutboundOut(header), promise: nil)
            context.write(wrapOutboundOut(frame.data), promise: promise)
        }
    }
}

/// A frame an agent socket's client sent that the gateway does not read further: the socket is
/// closed with `closeCode`.
struct AgentFrameError: Error, Equatable {
    /// The WebSocket close code: 1002 (protocol error) or 1009 (message too big).
    let closeCode: UInt16
    /// Why, for the close frame's reason.
    let reason: String

    static func protocolError(_ reason: String) -> AgentFrameError {
        AgentFrameError(closeCode: 1002, reason: reason)
    }

    static func messageTooLarge(_ limit: Int) -> AgentFrameError {
        AgentFrameError(closeCode: 1009, reason: "message too large (limit \(limit) bytes)")
    }
}
