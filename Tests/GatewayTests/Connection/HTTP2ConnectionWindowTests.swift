import DataPlane
@testable import Gateway
import Testing

/// The connection's inbound window kept at its own target (`HTTP2ConnectionWindow`), by
/// swift-nio-http2's rule for a window's update.
@Suite("An HTTP/2 connection's window is restored to its target once it is down to half of it")
struct HTTP2ConnectionWindowTests {
    static let target = 256 * 1024

    @Test("no update while the window is above half its target; at half or below, one that restores it whole")
    func restoresAtHalf() {
        #expect(HTTP2ConnectionWindow.increment(window: Self.target, target: Self.target) == nil)
        #expect(HTTP2ConnectionWindow.increment(window: Self.target + 1, target: Self.target) == nil)
        #expect(HTTP2ConnectionWindow.increment(window: Self.target / 2 + 1, target: Self.target) == nil)
        #expect(HTTP2ConnectionWindow.increment(window: Self.target / 2, target: Self.target) == Self.target / 2)
        #expect(HTTP2ConnectionWindow.increment(window: 65_535, target: Self.target) == Self.target - 65_535)
        #expect(HTTP2ConnectionWindow.increment(window: 0, target: Self.target) == Self.target)
    }

    @Test("a negative window (the peer's settings shrank it) is restored in full, never past Int32.max")
    func negativeWindow() {
        #expect(HTTP2ConnectionWindow.increment(window: -1000, target: Self.target) == Self.target + 1000)
        #expect(HTTP2ConnectionWindow.increment(window: -Int(Int32.max), target: Self.target) == Int(Int32.max))
    }
}
