import Glibc

/// A raw TCP connection to a server on 127.0.0.1: exact bytes for the limits and
/// refusals a well-behaved client never hits, and for probes that need no HTTP stack.
public struct RawConnection: Sendable {
    public let descriptor: Int32

    /// Wraps a descriptor that is already connected (one taken from another connection, say).
    public init(descriptor: Int32) { self.descriptor = descriptor }

    /// `receiveTimeout` is stretched in a sanitized run (`TimeBounds`).
    public init(port: Int, receiveTimeout seconds: Int = 10) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: Int(TimeBounds.seconds(Double(seconds))), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
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

    public func send(_ text: String) {
        _ = text.utf8CString.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count - 1) }
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
}

/// No connection could be made.
public struct RawConnectionError: Error, CustomStringConvertible {
    public let port: Int
    public var description: String { "cannot connect to 127.0.0.1:\(port)" }
}
