@testable import DataPlane
import NIOCore
import Testing

/// `PartialHead`: when the data plane's front reads a waiting head again.
@Suite("A head waited for is read again once a blank line can have come, or past the head's bound")
struct PartialHeadTests {
    static let head = Array("GET /api/x HTTP/1.1\r\nHost: gw\r\nX-Long: \(String(repeating: "v", count: 300))\r\n\r\n".utf8)

    /// Whether a head arriving in the reads `cuts` make is seen to have ended by the read that ends it, and not before.
    static func endSeen(cuts: [Int], head: [UInt8] = head, maximumHeadBytes: Int = 16_384) -> (early: Bool, atEnd: Bool) {
        var waiting = PartialHead(deadline: .now(), timedHere: true)
        var received = ByteBuffer()
        var start = 0
        var early = false
        for end in cuts + [head.count] {
            received.writeBytes(head[start..<end])
            start = end
            let seen = waiting.mayHaveEnded(received, maximumHeadBytes: maximumHeadBytes)
            if end < head.count { early = early || seen } else { return (early, seen) }
            waiting.scanned = received.readableBytes
        }
        return (early, false)
    }

    @Test("the blank line is seen whichever byte of it a read ends on (CR LF CR LF cut anywhere), and nothing before it opens the wait")
    func blankLineAtEverySplit() {
        let blankStart = Self.head.count - 4
        for first in 1..<blankStart {
            for cut in (blankStart - 2)...(Self.head.count - 1) where cut > first {
                let (early, atEnd) = Self.endSeen(cuts: [first, cut])
                #expect(!early && atEnd, "cut at \(first) and \(cut)")
            }
        }
        // A byte at a time.
        let (early, atEnd) = Self.endSeen(cuts: Array(1..<Self.head.count))
        #expect(!early && atEnd)
    }

    @Test("LF LF ends the wait too (not plain, so NIO's decoder answers it at once), as does a head past its bound with no blank line")
    func bareLineFeedAndBound() {
        let bare = Array("GET /x HTTP/1.1\nHost: gw\n\n".utf8)
        for cut in 1..<(bare.count - 1) {
            #expect(Self.endSeen(cuts: [cut], head: bare).atEnd, "cut at \(cut)")
        }
        let long = Array("GET /x HTTP/1.1\r\nX-A: \(String(repeating: "a", count: 200))\r\n".utf8)
        #expect(Self.endSeen(cuts: [10], head: long, maximumHeadBytes: 100).atEnd)
        #expect(!Self.endSeen(cuts: [10], head: long, maximumHeadBytes: 1_000).atEnd)
    }
}
