import NIOCore

/// The storage that the proxied requests on one event loop write their heads into (the upstream
/// request's, the client answer's), reused from one request to the next rather than allocated for each.
///
/// A head is kept here as soon as it is written and handed to its channel; by the time the loop's
/// next request writes a head, that write has usually gone out. Storage a write still holds is
/// never written over: `write` clears it only when nothing else holds it (ByteBuffer's
/// copy-on-write) and otherwise starts new storage. Only the loop's own thread touches it.
final class HeadBuffers {
    /// A request's head for its upstream (`ProxyExchange.proceed`).
    var upstreamRequest = ReusableByteBuffer()
    /// The answer's head for the client (`ProxyExchange.writeClientHead`).
    var clientAnswer = ReusableByteBuffer()

    init() {}
}

/// One buffer's storage, written into for a head and kept for the next.
struct ReusableByteBuffer {
    /// Storage larger than this is not kept: an unusually large head does not stay in memory for the next.
    static let largestKept = 16 * 1024

    private var spare = ByteBuffer()

    /// A head written by `body` into the kept storage (emptied first), returned to be handed to its
    /// channel; the storage is kept again for the next head.
    ///
    /// The only way in: `body` writes through `inout`, so no copy of the buffer is alive while it
    /// writes (a copy would make the storage shared, and the first write would allocate new storage).
    /// Storage a write still holds when the next head comes is left to it: that head gets new storage.
    mutating func write(minimumCapacity: Int, _ body: (inout ByteBuffer) throws -> Void) rethrows -> ByteBuffer {
        var buffer = spare
        spare = ByteBuffer()
        buffer.clear(minimumCapacity: minimumCapacity)  // new storage when a pending write still holds this one
        try body(&buffer)
        if buffer.capacity <= Self.largestKept { spare = buffer }
        return buffer
    }
}
