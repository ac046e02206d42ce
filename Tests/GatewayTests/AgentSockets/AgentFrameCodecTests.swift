import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import SocketGuard

/// `AgentFrameCodec`: an agent socket's frames read into whole messages (RFC 6455 §5), and the
/// gateway's written, in place of NIO's decoder, aggregator and encoder.
@Suite("Agent socket frames: read whole and strictly, written in the shortest form")
struct AgentFrameCodecTests {
    /// Records what reaches the end of the pipeline: messages, and the first error.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = WebSocketFrame
        var frames: [WebSocketFrame] = []
        var error: AgentFrameError?
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { frames.append(unwrapInboundIn(data)) }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { self.error = self.error ?? (error as? AgentFrameError) }
    }

    /// A client's frame: FIN, RSV bits, opcode, the mask bit and key, the length in the form asked
    /// for (7, 16 or 64 bits; the shortest by default), the payload masked.
    static func clientFrame(
        fin: Bool = true, rsv: UInt8 = 0, opcode: UInt8, _ payload: [UInt8], masked: Bool = true, lengthForm: Int? = nil,
        announcedLength: UInt64? = nil
    ) -> [UInt8] {
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | rsv << 4 | opcode]
        let length = announcedLength ?? UInt64(payload.count)
        let form = lengthForm ?? (length < 126 ? 7 : length <= 0xFFFF ? 16 : 64)
        let maskBit: UInt8 = masked ? 0x80 : 0
        switch form {
        case 7: bytes.append(maskBit | UInt8(length))
        case 16: bytes += [maskBit | 126, UInt8(length >> 8), UInt8(length & 0xFF)]
        default: bytes += [maskBit | 127] + (0..<8).reversed().map { UInt8(truncatingIfNeeded: length >> (8 * UInt64($0))) }
        }
        guard masked else { return bytes + payload }
        let key: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        return bytes + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    }

    /// Feeds `chunks` to a codec, one read each, and returns what it passed on.
    static func read(_ chunks: [[UInt8]], maximumMessageBytes: Int = 100_000) throws -> Recorder {
        let recorder = Recorder()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(AgentFrameCodec(maximumMessageBytes: maximumMessageBytes))
        try channel.pipeline.syncOperations.addHandler(recorder)
        for chunk in chunks { try channel.writeInbound(ByteBuffer(bytes: chunk)) }
        _ = try? channel.finish()
        return recorder
    }

    /// `bytes` cut into pieces of `size`.
    static func pieces(_ bytes: [UInt8], _ size: Int) -> [[UInt8]] {
        stride(from: 0, to: bytes.count, by: size).map { Array(bytes[$0..<min($0 + size, bytes.count)]) }
    }

    static func payload(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) } }

    @Test("a frame of every length form (0, 125, 126, 65,535 and 65,536 bytes; a 64-bit length for a short payload) is read whole and unmasked, sent in one read, a byte at a time or in 7-byte pieces")
    func everyLengthForm() throws {
        for (count, form) in [(0, nil), (125, nil), (126, nil), (65_535, nil), (65_536, nil), (5, 64), (5, 16)] as [(Int, Int?)] {
            let data = Self.payload(count)
            let frame = Self.clientFrame(opcode: 0x2, data, lengthForm: form)
            let splits = count < 200 ? [[frame], Self.pieces(frame, 1), Self.pieces(frame, 7)] : [[frame], Self.pieces(frame, 7)]
            for chunks in splits {
                let recorder = try Self.read(chunks)
                #expect(recorder.error == nil)
                #expect(recorder.frames.count == 1, "\(count) bytes in \(chunks.count) reads")
                #expect(recorder.frames.first.map { $0.fin && $0.opcode == .binary && Array($0.unmaskedData.readableBytesView) == data } == true)
            }
        }
    }

    @Test("a message in fragments is one message, its payloads joined in order; control frames between its fragments are passed on at once; frames after it in the same read are read too")
    func fragmentsAndControlFrames() throws {
        let bytes =
            Self.clientFrame(fin: false, opcode: 0x1, Array("he".utf8)) + Self.clientFrame(opcode: 0x9, Array("ping".utf8))
            + Self.clientFrame(fin: false, opcode: 0x0, Array("ll".utf8)) + Self.clientFrame(opcode: 0x0, Array("o".utf8))
            + Self.clientFrame(opcode: 0x2, [1, 2, 3]) + Self.clientFrame(opcode: 0x8, [0x03, 0xE8])
        for chunks in [[bytes], Self.pieces(bytes, 1), Self.pieces(bytes, 5)] {
            let recorder = try Self.read(chunks)
            #expect(recorder.error == nil)
            let seen = recorder.frames.map { "\($0.opcode):\(String(decoding: $0.unmaskedData.readableBytesView, as: UTF8.self).utf8.count)" }
            #expect(recorder.frames.map(\.opcode) == [.ping, .text, .binary, .connectionClose], "\(seen)")
            #expect(recorder.frames.count == 4 && String(buffer: recorder.frames[1].unmaskedData) == "hello")
            #expect(recorder.frames.allSatisfy { $0.fin })
        }
    }

    @Test(
        "a frame outside the protocol is refused with 1002, and nothing after it is read: a reserved bit, a reserved opcode, an unmasked frame, a continuation with no message begun, a new message inside one, a fragmented or long control frame, a length with its top bit set, a close frame of one byte, with a code no endpoint sends or a reason not UTF-8",
        arguments: [
            ("rsv1", Self.clientFrame(rsv: 0x4, opcode: 0x1, [0x61])),
            ("rsv3", Self.clientFrame(rsv: 0x1, opcode: 0x2, [0x61])),
            ("opcode 3", Self.clientFrame(opcode: 0x3, [0x61])),
            ("opcode 11", Self.clientFrame(opcode: 0xB, [])),
            ("unmasked", Self.clientFrame(opcode: 0x1, Self.payload(10), masked: false)),
            ("lone continuation", Self.clientFrame(opcode: 0x0, [0x61])),
            ("message inside a message", Self.clientFrame(fin: false, opcode: 0x1, [0x61]) + Self.clientFrame(opcode: 0x1, [0x62])),
            ("fragmented ping", Self.clientFrame(fin: false, opcode: 0x9, [])),
            ("126-byte ping", Self.clientFrame(opcode: 0x9, Self.payload(126))),
            ("top bit", Self.clientFrame(opcode: 0x2, [], lengthForm: 64, announcedLength: 1 << 63)),
            ("one-byte close", Self.clientFrame(opcode: 0x8, [0x03])),
            ("close 1005", Self.clientFrame(opcode: 0x8, [0x03, 0xED])),
            ("close 999", Self.clientFrame(opcode: 0x8, [0x03, 0xE7])),
            ("close 2000", Self.clientFrame(opcode: 0x8, [0x07, 0xD0])),
            ("close reason not UTF-8", Self.clientFrame(opcode: 0x8, [0x03, 0xE8, 0xC3, 0x28])),
        ])
    func protocolErrors(_ shape: String, _ frame: [UInt8]) throws {
        // Refused from its own bytes, alone: not from what a wrong reading of it runs into.
        let alone = try Self.read([frame])
        #expect(alone.error?.closeCode == 1002, "\(shape) alone: \(String(describing: alone.error))")
        let after = Self.clientFrame(opcode: 0x1, Array("after".utf8))
        let recorder = try Self.read([frame + after, after])
        #expect(recorder.error?.closeCode == 1002, "\(shape): \(String(describing: recorder.error))")
        // Only a whole message before the refused frame could have been passed on.
        #expect(recorder.frames.allSatisfy { String(buffer: $0.unmaskedData) != "after" }, "\(shape)")
    }

    @Test("a close frame with no payload, with a code an endpoint may send (1000, 1001, 1011, 3000, 4999) and a UTF-8 reason is read as a close")
    func closeFramesRead() throws {
        for payload in [[], [0x03, 0xE8], [0x03, 0xE9], [0x03, 0xF3], [0x0B, 0xB8], [0x13, 0x87], [0x03, 0xE8] + Array("bye é".utf8)] as [[UInt8]] {
            let read = try Self.read([Self.clientFrame(opcode: 0x8, payload)])
            #expect(read.error == nil && read.frames.first?.opcode == .connectionClose, "\(payload)")
        }
    }

    @Test("a message past max_message_bytes is refused with 1009 from its header, before its payload comes; its fragments count together; at the bound it is read; more than 1,024 fragments are refused")
    func messageBounds() throws {
        // The header alone announces too much: refused with no payload sent.
        let announced = try Self.read([Array(Self.clientFrame(opcode: 0x2, [], lengthForm: 64, announcedLength: 1 << 40).prefix(14))], maximumMessageBytes: 1_000)
        #expect(announced.error?.closeCode == 1009)
        let atBound = try Self.read([Self.clientFrame(opcode: 0x2, Self.payload(1_000))], maximumMessageBytes: 1_000)
        #expect(atBound.error == nil && atBound.frames.first?.unmaskedData.readableBytes == 1_000)
        let pastBound = try Self.read([Self.clientFrame(opcode: 0x2, Self.payload(1_001))], maximumMessageBytes: 1_000)
        #expect(pastBound.error?.closeCode == 1009 && pastBound.frames.isEmpty)
        let fragmented = Self.clientFrame(fin: false, opcode: 0x2, Self.payload(600)) + Array(Self.clientFrame(opcode: 0x0, Self.payload(401)).prefix(8))
        let joinedPast = try Self.read([fragmented], maximumMessageBytes: 1_000)
        #expect(joinedPast.error?.closeCode == 1009 && joinedPast.frames.isEmpty)
        let manyEmpty = Array((0..<1_100).map { _ in Self.clientFrame(fin: false, opcode: 0x0, []) }.joined())
        let tooMany = try Self.read([Self.clientFrame(fin: false, opcode: 0x1, []) + manyEmpty], maximumMessageBytes: 1_000)
        #expect(tooMany.error?.closeCode == 1009 && tooMany.frames.isEmpty)
        let justEnough = Array((0..<1_022).map { _ in Self.clientFrame(fin: false, opcode: 0x0, [0x61]) }.joined())
        let within = try Self.read([Self.clientFrame(fin: false, opcode: 0x1, [0x61]) + justEnough + Self.clientFrame(opcode: 0x0, [0x61])], maximumMessageBytes: 1_024)
        #expect(within.error == nil && within.frames.first?.unmaskedData.readableBytes == 1_024)
    }

    @Test("the gateway's frames go out unmasked, final, in the shortest length form (0, 125, 126, 65,535, 65,536 bytes), the payload as given")
    func writtenFrames() throws {
        for count in [0, 125, 126, 65_535, 65_536] {
            let channel = EmbeddedChannel()
            try channel.pipeline.syncOperations.addHandler(AgentFrameCodec(maximumMessageBytes: 1 << 20))
            let data = Self.payload(count)
            try channel.writeOutbound(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: data)))
            var written: [UInt8] = []
            while let part = try channel.readOutbound(as: ByteBuffer.self) { written += part.readableBytesView }
            let header: [UInt8] =
                count < 126 ? [0x81, UInt8(count)]
                : count <= 0xFFFF ? [0x81, 126, UInt8(count >> 8), UInt8(count & 0xFF)]
                : [0x81, 127] + (0..<8).reversed().map { UInt8(truncatingIfNeeded: count >> (8 * $0)) }
            #expect(written == header + data, "\(count) bytes")
            _ = try channel.finish()
        }
    }
}
