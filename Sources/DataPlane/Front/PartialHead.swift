import NIOCore

/// A request head the data plane's front has begun to read and is waiting for the rest of:
/// when it must have arrived, whether the front times it, and how much of it has been looked at.
///
/// The front reads such a head again only once bytes that can end it have come (a blank line:
/// `LF CR LF`, or `LF LF`, which is not plain but is NIO's to answer) or it has passed the
/// head's bound, so a head trickled in a byte or a line at a time is parsed once when it ends,
/// not once a read.
struct PartialHead {
    /// When the head must be whole; never moved by the bytes that follow.
    let deadline: NIODeadline
    /// Whether the front answers the head at `deadline`: a later head, or a first one once the
    /// `RequestHeadTimeoutHandler` ahead of the front has left.
    let timedHere: Bool
    /// How many of the waiting bytes have been looked at for the head's end.
    var scanned = 0

    /// Whether `received` (the head's bytes so far, from its first) may now hold the head's end,
    /// or holds more than a head may: then it is parsed again.
    func mayHaveEnded(_ received: ByteBuffer, maximumHeadBytes: Int) -> Bool {
        guard received.readableBytes <= maximumHeadBytes else { return true }
        // Two bytes before the new ones: a blank line may straddle the reads.
        let from = max(0, scanned - 2)
        return received.withUnsafeReadableBytes { bytes in
            var index = from
            while index + 1 < bytes.count {
                if bytes[index] == 0x0A {
                    if bytes[index + 1] == 0x0A { return true }
                    if bytes[index + 1] == 0x0D, index + 2 < bytes.count, bytes[index + 2] == 0x0A { return true }
                }
                index += 1
            }
            return false
        }
    }
}
