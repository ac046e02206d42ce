#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The source of "now" for token checks, in seconds since the Unix epoch.
///
/// Injected so tests and `token verify --at` can check a token as of any instant.
public protocol TokenClock: Sendable {
    func now() -> Double
}

/// Wall-clock time (`CLOCK_REALTIME`).
public struct SystemClock: TokenClock {
    public init() {}

    public func now() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1_000_000_000
    }
}

/// A clock that always reads the same instant.
public struct FixedClock: TokenClock {
    public let instant: Double

    public init(_ instant: Double) {
        self.instant = instant
    }

    public func now() -> Double { instant }
}
