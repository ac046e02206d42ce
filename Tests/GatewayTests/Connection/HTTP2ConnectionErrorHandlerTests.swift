import DataPlane
@testable import Gateway
import NIOCore
import NIOEmbedded
import Testing

/// The close that follows a connection error's `GOAWAY` (`HTTP2ConnectionErrorHandler`), read from
/// the frames going out however the writes split them.
@Suite("An HTTP/2 connection closes after a GOAWAY with an error code, whatever the writes' split")
struct HTTP2ConnectionErrorHandlerTests {
    /// A frame's bytes: the 9-byte header (length, type, flags, stream id) and its payload.
    static func frame(type: UInt8, stream: UInt32 = 0, payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, 0]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
            + payload
    }

    /// A `GOAWAY` naming stream 7 and `code`.
    static func goaway(code: UInt32) -> [UInt8] {
        frame(type: 7, payload: [0, 0, 0, 7, UInt8(code >> 24), UInt8(code >> 16 & 0xFF), UInt8(code >> 8 & 0xFF), UInt8(code & 0xFF)])
    }

    /// Ordinary traffic before the `GOAWAY`: a `HEADERS`, an empty `DATA` and a 300-byte `DATA`.
    static let traffic = frame(type: 1, stream: 1, payload: [0x88]) + frame(type: 0, stream: 1, payload: [])
        + frame(type: 0, stream: 3, payload: [UInt8](repeating: 7, count: 300))

    /// Writes `bytes` through the handler in pieces of `piece` bytes; whether the channel is still open after.
    static func stillOpen(after bytes: [UInt8], piece: Int) throws -> Bool {
        let channel = EmbeddedChannel(handler: HTTP2ConnectionErrorHandler())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var start = 0
        while start < bytes.count, channel.isActive {
            let end = min(start + piece, bytes.count)
            channel.write(ByteBuffer(bytes: bytes[start..<end]), promise: nil)
            start = end
        }
        channel.embeddedEventLoop.run()
        return channel.isActive
    }

    @Test("a GOAWAY with an error code closes the connection, split anywhere: whole, in 1-byte to 16-byte writes")
    func errorGoawayCloses() throws {
        let bytes = Self.traffic + Self.goaway(code: 1) + Self.frame(type: 6, payload: [UInt8](repeating: 0, count: 8))
        for piece in [bytes.count, 1, 2, 3, 5, 8, 9, 10, 13, 16] {
            #expect(try !Self.stillOpen(after: bytes, piece: piece), "split in \(piece)-byte writes")
        }
    }

    @Test("a GOAWAY with NO_ERROR (a graceful stop) and a GOAWAY-like payload in another frame keep the connection")
    func noErrorKeepsOpen() throws {
        // A DATA frame whose payload looks like a GOAWAY's header and error code is payload, not a frame.
        let lookalike = Self.frame(type: 0, stream: 1, payload: Self.goaway(code: 2))
        let bytes = Self.traffic + lookalike + Self.goaway(code: 0) + Self.traffic
        for piece in [bytes.count, 1, 4, 9, 11] {
            #expect(try Self.stillOpen(after: bytes, piece: piece), "split in \(piece)-byte writes")
        }
    }
}
