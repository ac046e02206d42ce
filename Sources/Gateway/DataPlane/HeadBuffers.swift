import NIOCore

/// The storage that the proxied requests on one event loop write their heads into (the upstream
/// request's, the client answer's), reused from one request to the next rather than allocated for each.
///
/// A head is handed to its channel as soon as it is written and kept here at once; by the time
/// the loop's next request takes it, the write has usually gone out. Storage a write still holds
/// is never written over: `take` clears it only when nothing else holds it (ByteBuffer's
/// copy-on-write) and otherwise starts new storage. Only the loop's own thread touches it.
final class HeadBuffers {
    /// A request's head for its upstream (`ProxyExchange.proceed`).
    var upstreamRequest = ReusableByteBuffer()
    /// The answer's head for the client (`ProxyExchange.clientHead`).
    var clientAnswer = ReusableByteBuffer()

    init() {}
}

/// One buffer's storage, taken for a write and kept again once the write is handed on.
struct ReusableByteBuffer {
    /// Storage larger than this is not kept: an unusually large head does not stay in memory for the next.
    static let largestKept = 16 * 1024

    private var spare = ByteBuffer()

    /// An empty buffer of at least `minimumCapacity` bytes: the kept storage when nothing else holds it.
    mutating func take(minimumCapacity: Int) -> ByteBuffer {
        var buffer = spare
        spare = ByteBuffer()
        buffer.clear(minimumCapacity: minimumCapacity)
        return buffer
    }

    /// Keeps `buffer`'s storage for the next `take` (a write may still hold it; `take` then leaves it to that write).
    mutating func keep(_ buffer: ByteBuffer) {
        guard buffer.capacity <= Self.largestKept else { return }
        spare = buffer
    }
}
