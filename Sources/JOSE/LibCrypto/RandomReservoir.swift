import CLibCrypto
import Synchronization

/// Random bytes drawn from libcrypto's CSPRNG a block at a time and handed out in small pieces,
/// for identifiers that are not secrets (a trace id on every MCP call, say).
///
/// `RAND_bytes` costs about a microsecond a call on this gateway's hot path (a lock in the DRBG
/// and a `getpid` for its fork check), whatever the length: one call per 4 KiB instead of one per
/// identifier. The bytes wait in memory until used, so keys, tokens and nonces that guard
/// something keep coming from ``SecureRandom`` directly.
public final class RandomReservoir: Sendable {
    /// The shared reservoir.
    public static let shared = RandomReservoir()

    private static let blockSize = 4096
    private let state = Mutex<(block: [UInt8], used: Int)>(([], 0))

    public init() {}

    /// `count` bytes (at most 256), or `nil` when the generator failed: a caller goes without
    /// an identifier rather than with a weak one.
    public func bytes(_ count: Int) -> [UInt8]? {
        guard count > 0, count <= 256 else { return nil }
        return state.withLock { state -> [UInt8]? in
            if state.used + count > state.block.count {
                var block = [UInt8](repeating: 0, count: Self.blockSize)
                let rc = block.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
                guard rc == 1 else { return nil }
                state = (block, 0)
            }
            defer { state.used += count }
            return Array(state.block[state.used..<(state.used + count)])
        }
    }
}
