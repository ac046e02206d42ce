import Synchronization
import Testing
import TrafficCop

final class FakeTime: Sendable {
    private let value = Mutex<Double>(0)
    var now: Double { value.withLock { $0 } }
    func advance(_ seconds: Double) { value.withLock { $0 += seconds } }
}

@Suite("Token-bucket rate limits")
struct TokenBucketLimiterTests {
    @Test("a burst is allowed, the next request waits exactly until a token refills, and keys are independent")
    func burstAndRefill() {
        let time = FakeTime()
        let limiter = TokenBucketLimiter(ratePerSecond: 0.5, burst: 3) { time.now }
        for _ in 0..<3 { #expect(limiter.admit("10.0.0.1").allowed) }
        let refused = limiter.admit("10.0.0.1")
        #expect(!refused.allowed)
        #expect(refused.retryAfter == 2)
        #expect(limiter.admit("10.0.0.2").allowed, "another key has its own bucket")
        time.advance(1.9)
        #expect(!limiter.admit("10.0.0.1").allowed)
        time.advance(0.2)
        #expect(limiter.admit("10.0.0.1").allowed)
        #expect(!limiter.admit("10.0.0.1").allowed)
    }

    @Test("a bucket never holds more than its burst, however long it was idle")
    func cappedAtBurst() {
        let time = FakeTime()
        let limiter = TokenBucketLimiter(ratePerSecond: 10, burst: 2) { time.now }
        time.advance(3600)
        #expect(limiter.admit("k").allowed)
        #expect(limiter.admit("k").allowed)
        #expect(!limiter.admit("k").allowed)
    }

    @Test("a reload's new rate and burst: a key's bucket is kept, held to the new burst, and refills at the new rate")
    func reconfigureKeepsBuckets() {
        let time = FakeTime()
        let limiter = TokenBucketLimiter(ratePerSecond: 1, burst: 10) { time.now }
        for _ in 0..<4 { #expect(limiter.admit("k").allowed) }  // six left
        limiter.reconfigure(ratePerSecond: 0.5, burst: 2)
        #expect(limiter.burst == 2 && limiter.ratePerSecond == 0.5)
        #expect(limiter.admit("k").allowed && limiter.admit("k").allowed, "held to the new burst of two")
        let refused = limiter.admit("k")
        #expect(!refused.allowed && refused.retryAfter == 2, "the new rate: one token every two seconds")
        limiter.reconfigure(ratePerSecond: 100, burst: 50)
        #expect(!limiter.admit("k").allowed, "a larger burst forgives nothing: the bucket is still empty")
        limiter.reconfigure(ratePerSecond: 0, burst: 5)
        #expect(limiter.ratePerSecond == 100, "a rate of zero is not put in force")
    }

    @Test("the number of tracked keys stays bounded under a flood of distinct keys")
    func boundedMemory() {
        let time = FakeTime()
        let limiter = TokenBucketLimiter(ratePerSecond: 1, burst: 1, maximumKeys: 100) { time.now }
        for index in 0..<10_000 {
            _ = limiter.admit("client-\(index)")
            if index % 50 == 0 { time.advance(0.01) }
        }
        #expect(limiter.trackedKeys <= 100)
    }

    @Test("concurrent requests for one key never get more than the burst")
    func concurrentAdmission() async {
        let limiter = TokenBucketLimiter(ratePerSecond: 0.001, burst: 5) { 0 }
        let allowed = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<200 { group.addTask { limiter.admit("same").allowed } }
            var count = 0
            for await ok in group where ok { count += 1 }
            return count
        }
        #expect(allowed == 5)
    }
}
