import NIOCore

/// Byte scans over a message head: no String, no generic search.
enum HeadScan {
    /// The length of the head at the start of `buffer`'s readable bytes (through its blank line), or `nil` when incomplete.
    static func headLength(_ buffer: ByteBuffer) -> Int? {
        buffer.withUnsafeReadableBytes { bytes -> Int? in
            guard bytes.count >= 4 else { return nil }
            var index = 3
            while index < bytes.count {
                if bytes[index] == 0x0A && bytes[index - 1] == 0x0D && bytes[index - 2] == 0x0A && bytes[index - 3] == 0x0D { return index + 1 }
                index += 1
            }
            return nil
        }
    }

    /// The value of header `name` (lower-case, with its colon: `content-length:`) as a number, when present.
    static func number(of name: StaticString, in head: ByteBuffer) -> Int? {
        head.withUnsafeReadableBytes { bytes -> Int? in
            let wanted = UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
            var lineStart = 0
            while lineStart < bytes.count {
                var lineEnd = lineStart
                while lineEnd < bytes.count && bytes[lineEnd] != 0x0A { lineEnd += 1 }
                if lineEnd - lineStart > wanted.count {
                    var matches = true
                    for offset in 0..<wanted.count where bytes[lineStart + offset] | 0x20 != wanted[offset] | 0x20 {
                        matches = false
                        break
                    }
                    if matches {
                        var value = 0
                        var found = false
                        for byte in bytes[(lineStart + wanted.count)..<lineEnd] where byte >= 0x30 && byte <= 0x39 {
                            value = value * 10 + Int(byte - 0x30)
                            found = true
                        }
                        return found ? value : -1
                    }
                }
                lineStart = lineEnd + 1
            }
            return nil
        }
    }
}
