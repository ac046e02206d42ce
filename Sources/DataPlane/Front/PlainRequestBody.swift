import NIOCore

/// The body of a plain request the data plane's front is reading: how many of its bytes are
/// still to come, by when, and whether they go to the request's exchange or are dropped.
///
/// The front knows the body's end from its one `Content-Length` (`PlainRequestHead.bodyLength`),
/// so the bytes after it are the next request's head and nothing else, whichever way the exchange
/// ended. An exchange that answered before the body ended (a refusal, say) leaves the rest to be
/// read and dropped, at most `ProxyChannelHandler.maximumDrainBytes` of it, as NIO's path does.
struct PlainRequestBody {
    /// Bytes of the body not yet read.
    var remaining: Int
    /// When the whole request must have arrived (`limits.request_timeout_seconds` from its head),
    /// as NIO's path times a request's body.
    let deadline: NIODeadline
    /// Bytes dropped since the exchange answered (none while the body goes to the exchange).
    var dropped = 0

    init(length: Int, deadline: NIODeadline) {
        remaining = length
        self.deadline = deadline
    }
}
