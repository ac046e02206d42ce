@testable import Gateway
import NIOCore
import Testing

@Suite("ReusableByteBuffer: a loop's head storage is reused, never written over while a write holds it")
struct HeadBuffersTests {
    /// Where `buffer`'s storage begins (the same address: the same storage).
    private func storageAddress(_ buffer: ByteBuffer) -> UInt? {
        buffer.withVeryUnsafeBytes { $0.baseAddress.map { UInt(bitPattern: $0) } }
    }

    @Test("storage kept and held by nothing else is taken again, empty, for the next head")
    func reusesStorageNothingElseHolds() {
        var reusable = ReusableByteBuffer()
        var first = reusable.take(minimumCapacity: 256)
        first.writeString("GET /a HTTP/1.1\r\n\r\n")
        let address = storageAddress(first)
        reusable.keep(first)
        first = ByteBuffer()  // the write has gone out: nothing else holds the storage
        let second = reusable.take(minimumCapacity: 128)
        #expect(storageAddress(second) == address)
        #expect(second.readableBytes == 0 && second.capacity >= 256)
    }

    @Test("storage a write still holds is left to it: the next head gets new storage and the held bytes stay as written")
    func neverOverwritesHeldStorage() {
        var reusable = ReusableByteBuffer()
        var inFlight = reusable.take(minimumCapacity: 64)
        inFlight.writeString("HTTP/1.1 200 OK\r\n\r\n")
        reusable.keep(inFlight)  // kept while `inFlight` (the pending write) still holds it
        var next = reusable.take(minimumCapacity: 64)
        next.writeString("HTTP/1.1 404 Not Found\r\n\r\n")
        #expect(storageAddress(next) != storageAddress(inFlight))
        #expect(inFlight.readableBytesView.elementsEqual("HTTP/1.1 200 OK\r\n\r\n".utf8))
    }

    @Test("storage larger than the largest kept is let go, so one huge head does not stay in memory")
    func dropsLargeStorage() {
        var reusable = ReusableByteBuffer()
        var large = reusable.take(minimumCapacity: ReusableByteBuffer.largestKept + 1)
        large.writeString("x")
        reusable.keep(large)
        large = ByteBuffer()
        let next = reusable.take(minimumCapacity: 16)
        #expect(next.capacity < ReusableByteBuffer.largestKept)
    }
}
