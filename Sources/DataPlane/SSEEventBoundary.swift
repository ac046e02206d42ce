/// Where the events of a relayed SSE answer end (an empty line, after `\n`, `\r\n` or `\r`), so
/// that a stream ended by the gateway ends between two events, never inside one.
struct SSEEventBoundary {
    /// No byte of the current line was seen yet.
    private var lineEmpty = true
    /// The last byte was a `\r` (a `\n` right after it ends the same line).
    private var afterCR = false
    /// The bytes so far end an event (or nothing was relayed yet).
    private(set) var isAtBoundary = true

    /// Walks `bytes`; with `stoppingAtBoundary`, returns how many of them reach the first event's
    /// end (`nil`: none ends in them), else `nil` after walking them all.
    mutating func advance(_ bytes: UnsafeRawBufferPointer, stoppingAtBoundary: Bool) -> Int? {
        for (index, byte) in bytes.enumerated() {
            if afterCR {
                afterCR = false
                if byte == 0x0A {
                    if stoppingAtBoundary && isAtBoundary { return index + 1 }
                    continue
                }
                // A bare `\r` ended its line; an event that ended there ends before this byte.
                if stoppingAtBoundary && isAtBoundary { return index }
            }
            switch byte {
            case 0x0A, 0x0D:
                isAtBoundary = lineEmpty
                lineEmpty = true
                if byte == 0x0D {
                    afterCR = true
                } else if stoppingAtBoundary && isAtBoundary {
                    return index + 1
                }
            default:
                lineEmpty = false
                isAtBoundary = false
            }
        }
        if stoppingAtBoundary && isAtBoundary && !afterCR && bytes.count > 0 { return bytes.count }
        return nil
    }
}
