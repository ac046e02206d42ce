/// Where the frames of one direction of a WebSocket begin and end (RFC 6455 §5.2), read from their
/// headers only (payloads are neither unmasked nor copied).
///
/// A tunnel the gateway must close (its session ended) is closed between two of the upstream's
/// frames, with a close frame of the gateway's own: the browser's WebSocket then reports 1008 and
/// the reason, as an agent socket's does, instead of a connection cut in the middle of a frame.
struct WebSocketFrameBoundary {
    /// The bytes of a frame header not yet whole.
    private var header: [UInt8] = []
    /// Payload bytes of the current frame still to come.
    private var remaining: UInt64 = 0

    /// Whether the bytes seen so far end exactly between two frames.
    var isAtBoundary: Bool { header.isEmpty && remaining == 0 }

    /// Walks `bytes`. With `stoppingAtBoundary`, returns how many of them lead up to the first
    /// frame boundary in them (the rest is not walked); otherwise walks them all and returns `nil`.
    mutating func advance(_ bytes: UnsafeRawBufferPointer, stoppingAtBoundary: Bool) -> Int? {
        var index = 0
        if stoppingAtBoundary, isAtBoundary { return 0 }
        while index < bytes.count {
            if remaining > 0 {
                let take = Int(min(remaining, UInt64(bytes.count - index)))
                index += take
                remaining -= UInt64(take)
                if remaining == 0, stoppingAtBoundary { return index }
                continue
            }
            header.append(bytes[index])
            index += 1
            guard let length = Self.headerLength(header), header.count == length else { continue }
            remaining = Self.payloadLength(header)
            header.removeAll(keepingCapacity: true)
            if remaining == 0, stoppingAtBoundary { return index }
        }
        return nil
    }

    /// A header's whole length once its first two bytes are known: 2, the extended length (2 or 8),
    /// and the mask key (4) when the mask bit is set.
    static func headerLength(_ header: [UInt8]) -> Int? {
        guard header.count >= 2 else { return nil }
        let length = header[1] & 0x7F
        let extended = length == 126 ? 2 : (length == 127 ? 8 : 0)
        return 2 + extended + (header[1] & 0x80 != 0 ? 4 : 0)
    }

    /// The payload length a whole header states.
    static func payloadLength(_ header: [UInt8]) -> UInt64 {
        let length = header[1] & 0x7F
        switch length {
        case 126: return UInt64(header[2]) << 8 | UInt64(header[3])
        case 127: return header[2..<10].reduce(0) { $0 << 8 | UInt64($1) }
        default: return UInt64(length)
        }
    }

    /// A server's close frame (unmasked): `code` and `reason` (cut to the 123 bytes a control frame allows).
    static func closeFrame(code: UInt16, reason: String) -> [UInt8] {
        var reasonBytes = Array(reason.utf8.prefix(123))
        // Never a UTF-8 sequence cut in two (the reason must be valid UTF-8).
        while !reasonBytes.isEmpty, String(validating: reasonBytes, as: UTF8.self) == nil { reasonBytes.removeLast() }
        return [0x88, UInt8(2 + reasonBytes.count), UInt8(code >> 8), UInt8(code & 0xFF)] + reasonBytes
    }
}
