import CLibCryptoSetup

/// scrypt's work areas, kept for the life of a server instead of mapped and unmapped by every
/// password check.
///
/// Each derivation at N = 2^15, r = 8 needs one block of 32 MiB + 1 KiB. Left to malloc, that is
/// a fresh anonymous mapping per login, faulted in page by page and returned at the end: resident
/// memory then swings by 32 MiB per check in flight, and every login pays for 8,000 page faults.
/// Kept, the areas are mapped on first use, at most one per hashing thread, and reused; libcrypto
/// clears each one (`OPENSSL_clear_free`) before it comes back. A derivation that finds every
/// kept area busy, or needs more than one holds, is served by malloc as before.
public enum ScryptWorkAreas {
    /// Whether libcrypto's allocator could be wrapped (it can only be before its first allocation,
    /// which the constructor in `CLibCryptoSetup` ensures). When false, nothing is ever kept.
    public static var isAvailable: Bool { portcullis_scrypt_areas_result() == 1 }

    /// Keeps up to `count` areas sized for `parameters` (the first call sets the size for the process).
    /// - Returns: false when the allocator is not wrapped, the count is out of 0...64 (the C side's bound), or
    ///   areas of another size are already kept.
    @discardableResult
    public static func keep(_ count: Int, for parameters: Scrypt.Parameters) -> Bool {
        guard isAvailable, parameters.isWithinLimits, let count = Int32(exactly: count) else { return false }
        return portcullis_scrypt_areas_keep(count, Int(parameters.workAreaBytes)) == 1
    }

    /// What the kept areas have done so far in this process.
    public struct Counts: Sendable, Equatable {
        /// Areas mapped (never unmapped).
        public var made: Int
        /// Large blocks served from a kept area.
        public var served: Int
        /// Large blocks that found no free area of their size and went to malloc.
        public var declined: Int
    }

    public static var counts: Counts {
        var made = 0, served = 0, declined = 0
        portcullis_scrypt_areas_counts(&made, &served, &declined)
        return Counts(made: made, served: served, declined: declined)
    }
}

extension Scrypt.Parameters {
    /// The block libcrypto allocates for one derivation: B (128·r·p bytes) and V with its two
    /// working rows (128·r·(N + 2) bytes), as `EVP_PBE_scrypt` computes them.
    public var workAreaBytes: UInt64 {
        128 * UInt64(r) * UInt64(p) + 128 * UInt64(r) * ((UInt64(1) << UInt64(logN)) + 2)
    }
}
