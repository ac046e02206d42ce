import CLibCrypto

/// scrypt (RFC 7914) through libcrypto's `EVP_PBE_scrypt`.
///
/// Blocking and memory-hungry by design (N = 2^15, r = 8 takes 32 MiB and
/// tens of milliseconds): call it from a thread pool, never an event loop.
public enum Scrypt {
    /// Cost parameters.
    public struct Parameters: Sendable, Equatable {
        /// log2 of N, the CPU/memory cost.
        public var logN: Int
        public var r: Int
        public var p: Int

        public init(logN: Int, r: Int, p: Int) {
            self.logN = logN
            self.r = r
            self.p = p
        }

        /// The default for passwords: N = 2^15, r = 8, p = 1.
        public static let interactive = Parameters(logN: 15, r: 8, p: 1)

        /// True for parameters this module will run: bounded so that a stored
        /// hash cannot make a login take unbounded memory or time.
        public var isWithinLimits: Bool {
            (10...20).contains(logN) && (1...32).contains(r) && (1...16).contains(p)
        }

        /// Memory scrypt needs, in bytes, with headroom.
        var memory: UInt64 { 128 * UInt64(r) * (UInt64(1) << UInt64(logN)) + 128 * UInt64(r) * UInt64(p) + (1 << 20) }
    }

    /// Derives `length` bytes from `password` and `salt`.
    public static func derive(password: [UInt8], salt: [UInt8], parameters: Parameters, length: Int = 32) throws -> [UInt8] {
        guard parameters.isWithinLimits else {
            throw KeyError(.weakKey, "scrypt parameters out of range (log2 N 10-20, r 1-32, p 1-16)")
        }
        var out = [UInt8](repeating: 0, count: length)
        // A trailing zero keeps the pointer valid for an empty password; it is not counted.
        var terminated = password + [0]
        defer { for index in terminated.indices { terminated[index] = 0 } }
        let rc = terminated.withUnsafeBufferPointer { pass in
            salt.withUnsafeBufferPointer { saltBuffer in
                out.withUnsafeMutableBufferPointer { key in
                    // The pointer casts: libcrypto takes the password as char* and bytes as unsigned char*.
                    EVP_PBE_scrypt(
                        UnsafeRawPointer(pass.baseAddress!).assumingMemoryBound(to: CChar.self), password.count,
                        saltBuffer.baseAddress, saltBuffer.count,
                        UInt64(1) << UInt64(parameters.logN), UInt64(parameters.r), UInt64(parameters.p), parameters.memory,
                        key.baseAddress, length)
                }
            }
        }
        guard rc == 1 else { throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_PBE_scrypt"))") }
        return out
    }

    /// Compares two byte strings in constant time for equal lengths (`CRYPTO_memcmp`).
    public static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count, !a.isEmpty else { return false }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
    }
}
