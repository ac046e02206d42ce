import Foundation
import Gateway
import Synchronization
import Testing

@Suite("The buffered access log: gathered per thread, written in batches, never dropped")
struct BufferedLogSinkTests {
    /// Collects the batches the sink writes.
    final class Batches: Sendable {
        private let list = Mutex<[[UInt8]]>([])
        func append(_ batch: [UInt8]) { list.withLock { $0.append(batch) } }
        var all: [[UInt8]] { list.withLock { $0 } }
        var lines: [String] { all.flatMap { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } }
    }

    @Test("lines wait in their thread's buffer until flush; every line from four threads arrives once, each thread's in its order")
    func flushWritesEverything() async throws {
        let batches = Batches()
        let sink = BufferedLogSink(capacity: 1 << 20) { batches.append($0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for thread in 0..<4 {
                group.addTask {
                    try await onOwnThread {
                        for line in 0..<1_000 { sink.write("t\(thread) \(line)") }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(batches.all.isEmpty, "nothing is written before the buffer fills or a flush")
        sink.flush()
        let lines = batches.lines
        #expect(lines.count == 4_000)
        #expect(batches.all.count == 4, "one write per thread's buffer")
        for thread in 0..<4 {
            let mine = lines.filter { $0.hasPrefix("t\(thread) ") }
            #expect(mine == (0..<1_000).map { "t\(thread) \($0)" })
        }
        sink.flush()
        #expect(batches.all.count == 4, "an empty buffer writes nothing")
    }

    @Test("a buffer that reaches its capacity is written by the thread that filled it, without waiting for a flush")
    func fullBufferWrites() {
        let batches = Batches()
        let sink = BufferedLogSink(capacity: 100) { batches.append($0) }
        for index in 0..<30 { sink.write("line \(index)") }  // 8 bytes each with its newline
        #expect(batches.all.count >= 2)
        #expect(batches.all.allSatisfy { $0.count >= 100 && $0.count < 110 })
        sink.flush()
        #expect(batches.lines == (0..<30).map { "line \($0)" })
    }
}
