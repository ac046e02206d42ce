import JOSE
import Testing

@Suite("Random reservoir")
struct RandomReservoirTests {
    @Test("the reservoir hands out the bytes asked for, never the same piece twice, across the 4 KiB blocks it draws from libcrypto")
    func piecesAreFreshAcrossBlocks() throws {
        let reservoir = RandomReservoir()
        var seen = Set<[UInt8]>()
        // 24 bytes at a time: 500 draws take about three blocks, so pieces straddle refills.
        for _ in 0..<500 {
            let piece = try #require(reservoir.bytes(24))
            #expect(piece.count == 24)
            seen.insert(piece)
        }
        #expect(seen.count == 500)
        // Over many pieces every byte value turns up: the bytes are not a constant or a short cycle.
        var values = Set<UInt8>()
        for piece in seen { values.formUnion(piece) }
        #expect(values.count == 256)
    }

    @Test("a length of none or more than 256 bytes is refused with nil, not served short")
    func lengthsOutsideTheBoundAreRefused() {
        let reservoir = RandomReservoir()
        #expect(reservoir.bytes(0) == nil)
        #expect(reservoir.bytes(-1) == nil)
        #expect(reservoir.bytes(257) == nil)
        #expect(reservoir.bytes(256)?.count == 256)
    }

    @Test("two reservoirs draw their own blocks: their pieces differ")
    func reservoirsAreIndependent() throws {
        let first = try #require(RandomReservoir().bytes(32))
        let second = try #require(RandomReservoir().bytes(32))
        #expect(first != second)
    }
}
