import NIOCore

/// A request head the data plane's front has begun to read and is waiting for the rest of:
/// when it must have arrived, and how much of it has been looked at already.
///
/// The front reads such a head again only once bytes that can end it have come (a blank line's
/// `CRLF CRLF`) or it has passed the head's bound, so a head trickled in a byte or a line at a
/// time is parsed once when it ends, not once a read.
struct PartialHead {
    /// When the head must be whole: from the first time it was seen unfinished, never moved by
    /// the bytes that follow.
    let deadline: NIODeadline
    /// The front's 408 for a later head at `deadline`; `nil` for the connection's first head,
    /// which the `RequestHeadTimeoutHandler` ahead of the front times.
    var deadlineCheck: Scheduled<Void>?
    /// How many of the waiting bytes have been looked at for the head's end.
    var scanned = 0

    init(deadline: NIODeadline) {
        self.deadline = deadline
    }

    /// Whether `received` (the head's bytes so far, from its first) may now hold the head's end,
    /// or holds more than a head may: then it is parsed again.
    func mayHaveEnded(_ received: ByteBuffer, maximumHeadBytes: Int) -> Bool {
        guard received.readableBytes <= maximumHeadBytes else { return true }
        // Three bytes before the new ones: a CRLF CRLF may straddle the reads.
        let from = max(0, scanned - 3)
        return received.withUnsafeReadableBytes { bytes in
            guard bytes.count - from >= 4 else { return false }
            var index = from
            while index + 3 < bytes.count {
                if bytes[index + 3] != 0x0A {
                    index += 1
                    continue
                }
                if bytes[index] == 0x0D, bytes[index + 1] == 0x0A, bytes[index + 2] == 0x0D { return true }
                index += 1
            }
            return false
        }
    }
}
