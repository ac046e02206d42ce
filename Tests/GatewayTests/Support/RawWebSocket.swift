import Glibc
import JOSE
import PortcullisTestSupport

/// A WebSocket client over a plain socket, as much of one as the tunnel tests need: the opening
/// handshake with exactly the fields a test sets (a browser's `Origin`, a cookie: a client library
/// adds an `Origin` of its own), masked text frames out, whole frames in. Blocking: use it on a
/// thread of its own (`onOwnThread`).
final class RawWebSocket: @unchecked Sendable {
    let descriptor: Int32
    /// Bytes read past what has been returned so far.
    private var buffered: [UInt8] = []
    /// The handshake's answer head.
    private(set) var head = ""
    private(set) var status = 0

    /// Connects and sends the handshake (and, with `early`, a text frame right behind it, before
    /// any answer: a client that does not wait); reads the answer's head.
    init(port: Int, target: String, headers: [(String, String)], early: String? = nil) throws {
        descriptor = try RawUpgrade.connectAndRequest(port: port, target: target, headers: headers)
        if let early { try sendText(early) }
        while true {
            if let end = Self.headEnd(buffered) {
                head = String(decoding: buffered[..<end], as: UTF8.self)
                buffered.removeFirst(end + 4)
                status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                return
            }
            guard try readMore() else { throw FixtureError("the connection closed before the handshake's answer") }
        }
    }

    deinit { Glibc.close(descriptor) }

    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    private func readMore() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let count = read(descriptor, &chunk, chunk.count)
        if count < 0 { throw FixtureError("read failed (errno \(errno))") }
        if count == 0 { return false }
        buffered.append(contentsOf: chunk[0..<count])
        return true
    }

    /// Sends `text` in one masked text frame (RFC 6455 §5.3).
    func sendText(_ text: String) throws {
        let payload = Array(text.utf8)
        var frame: [UInt8] = [0x81]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        let mask = try SecureRandom.bytes(4)
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        _ = frame.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Sends `bytes` as they are (a frame a test shapes itself, well formed or not).
    func sendRaw(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The next whole frame (unmasked, as a server sends), or `nil` when the connection closed first.
    func readFrame() throws -> (opcode: UInt8, payload: [UInt8])? {
        while true {
            if buffered.count >= 2 {
                let length = Int(buffered[1] & 0x7F)
                let (headerLength, payloadLength): (Int, Int?) =
                    length == 126
                    ? (4, buffered.count >= 4 ? Int(buffered[2]) << 8 | Int(buffered[3]) : nil)
                    : (length == 127 ? (10, nil) : (2, length))
                if let payloadLength, buffered.count >= headerLength + payloadLength {
                    let frame = (opcode: buffered[0] & 0x0F, payload: Array(buffered[headerLength..<(headerLength + payloadLength)]))
                    buffered.removeFirst(headerLength + payloadLength)
                    return frame
                }
            }
            guard try readMore() else { return nil }
        }
    }
}
