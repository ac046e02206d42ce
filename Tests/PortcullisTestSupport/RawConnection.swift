import Glibc

/// A raw TCP connection to a server on 127.0.0.1: exact bytes for the limits and
/// refusals a well-behaved client never hits, and for probes that need no HTTP stack.
public struct RawConnection: Sendable {
    public let descriptor: Int32

    /// Wraps a descriptor that is already connected (one taken from another connection, say).
    public init(descriptor: Int32) { self.descriptor = descriptor }

    /// `receiveTimeout` is stretched in a sanitized run (`TimeBounds`).
    /// `receiveBufferBytes` shrinks the kernel's receive buffer (set before connecting, so the window is small
    /// from the start): a client that does not read then stops the sender sooner.
    /// `source`: the loopback address to connect from (`127.0.0.2`: a second peer on one machine).
    public init(port: Int, receiveTimeout seconds: Int = 10, receiveBufferBytes: Int32? = nil, source: String? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                _ = Glibc.close(descriptor)
                throw RawConnectionError(port: port)
            }
        }
        var timeout = timeval(tv_sec: Int(TimeBounds.seconds(Double(seconds))), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBufferBytes {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard descriptor >= 0, connected == 0 else {
            if descriptor >= 0 { _ = Glibc.close(descriptor) }
            throw RawConnectionError(port: port)
        }
    }

    /// Writes `text`; to a peer that has closed, nothing (no SIGPIPE).
    public func send(_ text: String) {
        _ = text.utf8CString.withUnsafeBufferPointer { Glibc.send(descriptor, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
    }

    /// `POLLRDHUP` (Linux): the peer closed its side.
    static let readHangUp: Int16 = 0x2000

    /// Whether something can be read now (an answer, or the peer's close), waiting up to `milliseconds`.
    public func isReadable(within milliseconds: Int32 = 0) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN) | Self.readHangUp, revents: 0)
        return poll(&entry, 1, milliseconds) > 0
    }

    /// Whether the peer has closed the connection (a FIN or a reset), whatever is still unread.
    public var isClosedByPeer: Bool {
        var entry = pollfd(fd: descriptor, events: Self.readHangUp, revents: 0)
        _ = poll(&entry, 1, 0)
        return entry.revents & (Self.readHangUp | Int16(POLLHUP) | Int16(POLLERR)) != 0
    }

    /// Everything until the peer closes (or the receive timeout).
    public func readAll() -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count <= 0 { break }
            received.append(contentsOf: buffer[0..<count])
        }
        return received
    }

    /// Reads until what has arrived contains `marker` (or the peer closes, or the receive timeout passes).
    public func readUntil(_ marker: String) -> [UInt8] {
        var received: [UInt8] = []
        while !String(decoding: received, as: UTF8.self).contains(marker) {
            let more = readSome()
            if more.isEmpty { break }
            received += more
        }
        return received
    }

    /// One read (what has arrived so far).
    public func readSome() -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = read(descriptor, &buffer, buffer.count)
        return count > 0 ? Array(buffer[0..<count]) : []
    }

    public func close() { _ = Glibc.close(descriptor) }

    /// One masked WebSocket frame (FIN set) as a client must send it (RFC 6455 §5.2).
    public static func maskedFrame(opcode: UInt8, _ payload: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = [0x80 | opcode]
        switch payload.count {
        case ..<126: frame.append(0x80 | UInt8(payload.count))
        case ..<65_536: frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: frame += [0x80 | 127] + (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        let mask: [UInt8] = [0x1F, 0x2E, 0x3D, 0x4C]
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        return frame
    }

    /// Writes `bytes`; false when the peer has closed (no SIGPIPE).
    @discardableResult
    public func send(bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }
}

/// No connection could be made.
public struct RawConnectionError: Error, CustomStringConvertible {
    public let port: Int
    public var description: String { "cannot connect to 127.0.0.1:\(port)" }
}
