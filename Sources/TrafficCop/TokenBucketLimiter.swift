// TrafficCop: admission — rate limits, execution contracts, session intents.
import Synchronization

/// A token-bucket rate limiter keyed by a string (client address, username, user id).
///
/// Each key's bucket holds up to `burst` tokens and refills at `ratePerSecond`.
/// A request takes one token; an empty bucket answers with how long until one
/// is available (the `Retry-After` of a 429). Idle buckets are forgotten, so
/// memory is bounded by the number of keys active within `burst / rate` seconds,
/// and never exceeds `maximumKeys` (the oldest buckets are dropped first).
public final class TokenBucketLimiter: Sendable {
    public struct Decision: Sendable, Equatable {
        public let allowed: Bool
        /// Seconds until a request would be allowed; 0 when allowed.
        public let retryAfter: Double
    }

    public let maximumKeys: Int
    private let clock: @Sendable () -> Double
    /// The rate and burst in force (changed by a reload) with the buckets they fill.
    private let state: Mutex<(ratePerSecond: Double, burst: Double, buckets: [String: (tokens: Double, updated: Double)])>

    /// - Parameter clock: seconds from any fixed origin (monotonic in production).
    public init(ratePerSecond: Double, burst: Int, maximumKeys: Int = 100_000, clock: @escaping @Sendable () -> Double) {
        precondition(ratePerSecond > 0 && burst > 0, "a rate limit needs a positive rate and burst")
        self.maximumKeys = maximumKeys
        self.clock = clock
        self.state = Mutex((ratePerSecond, Double(burst), [:]))
    }

    /// The sustained rate in force.
    public var ratePerSecond: Double { state.withLock { $0.ratePerSecond } }
    /// The burst in force.
    public var burst: Double { state.withLock { $0.burst } }

    /// Puts a new rate and burst in force (a configuration reload); the buckets are kept, each
    /// held to the new burst, so a reload neither forgives nor punishes anyone.
    public func reconfigure(ratePerSecond: Double, burst: Int) {
        guard ratePerSecond > 0, burst > 0 else { return }
        state.withLock { state in
            state.ratePerSecond = ratePerSecond
            state.burst = Double(burst)
            state.buckets = state.buckets.mapValues { (tokens: min($0.tokens, Double(burst)), updated: $0.updated) }
        }
    }

    /// Takes one token for `key`, or says how long to wait.
    public func admit(_ key: String) -> Decision {
        let now = clock()
        return state.withLock { state in
            let (ratePerSecond, burst) = (state.ratePerSecond, state.burst)
            var bucket = state.buckets[key] ?? (tokens: burst, updated: now)
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.updated) * ratePerSecond)
            bucket.updated = now
            let decision: Decision
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                decision = Decision(allowed: true, retryAfter: 0)
            } else {
                decision = Decision(allowed: false, retryAfter: (1 - bucket.tokens) / ratePerSecond)
            }
            if state.buckets.count >= maximumKeys, state.buckets[key] == nil {
                Self.evict(&state.buckets, now: now, refillTime: burst / ratePerSecond)
            }
            state.buckets[key] = bucket
            return decision
        }
    }

    /// Drops full (idle) buckets; if none are idle, the least recently used ones.
    private static func evict(_ buckets: inout [String: (tokens: Double, updated: Double)], now: Double, refillTime: Double) {
        let idle = buckets.filter { now - $0.value.updated >= refillTime }.map(\.key)
        if !idle.isEmpty {
            for key in idle { buckets[key] = nil }
            return
        }
        let oldest = buckets.sorted { $0.value.updated < $1.value.updated }.prefix(max(1, buckets.count / 10)).map(\.key)
        for key in oldest { buckets[key] = nil }
    }

    /// How many keys are tracked (for tests and metrics).
    public var trackedKeys: Int { state.withLock { $0.buckets.count } }
}
