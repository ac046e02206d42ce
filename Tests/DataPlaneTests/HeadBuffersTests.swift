@testable import DataPlane
@testable import EdgeHTTP
import NIOCore
import Testing

@Suite("ReusableByteBuffer: a loop's head storage is reused, never written over while a write holds it")
struct HeadBuffersTests {
    /// Where `buffer`'s storage begins (the same address: the same storage).
    private func storageAddress(_ buffer: ByteBuffer) -> UInt? {
        buffer.withVeryUnsafeBytes { $0.baseAddress.map { UInt(bitPattern: $0) } }
    }

    @Test("storage kept and held by nothing else is written again, emptied, for the next head")
    func reusesStorageNothingElseHolds() {
        var reusable = ReusableByteBuffer()
        var first: ByteBuffer? = reusable.write(minimumCapacity: 256) { $0.writeString("GET /a HTTP/1.1\r\n\r\n") }
        let address = first.flatMap(storageAddress)
        first = nil  // the write has gone out: nothing else holds the storage
        let second = reusable.write(minimumCapacity: 128) { $0.writeString("GET /b HTTP/1.1\r\n\r\n") }
        #expect(address != nil && storageAddress(second) == address)
        #expect(second.readableBytesView.elementsEqual("GET /b HTTP/1.1\r\n\r\n".utf8))
        #expect(second.capacity >= 256)
    }

    @Test("storage a write still holds is left to it: the next head gets new storage and the held bytes stay as written")
    func neverOverwritesHeldStorage() {
        var reusable = ReusableByteBuffer()
        let inFlight = reusable.write(minimumCapacity: 64) { $0.writeString("HTTP/1.1 200 OK\r\n\r\n") }  // the pending write holds it
        let next = reusable.write(minimumCapacity: 64) { $0.writeString("HTTP/1.1 404 Not Found\r\n\r\n") }
        #expect(storageAddress(next) != storageAddress(inFlight))
        #expect(inFlight.readableBytesView.elementsEqual("HTTP/1.1 200 OK\r\n\r\n".utf8))
        #expect(next.readableBytesView.elementsEqual("HTTP/1.1 404 Not Found\r\n\r\n".utf8))
    }

    @Test("storage larger than the largest kept is let go, so one huge head does not stay in memory")
    func dropsLargeStorage() {
        var reusable = ReusableByteBuffer()
        _ = reusable.write(minimumCapacity: ReusableByteBuffer.largestKept + 1) { $0.writeString("x") }  // written and gone
        let next = reusable.write(minimumCapacity: 16) { $0.writeString("y") }
        #expect(next.capacity < ReusableByteBuffer.largestKept)
    }
}
