import CLibCrypto

/// Random bytes from libcrypto's CSPRNG (`RAND_bytes`).
public enum SecureRandom {
    /// Returns `count` bytes from the CSPRNG.
    ///
    /// - Throws: `LibCryptoError` if the generator is not seeded; never returns weak bytes.
    public static func bytes(_ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let rc = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        guard rc == 1 else { throw LibCryptoError.drain("RAND_bytes") }
        return out
    }

    /// A base64url string of `count` random bytes, for identifiers such as `jti`.
    public static func identifier(bytes count: Int = 16) throws -> String {
        Base64URL.encode(try bytes(count))
    }
}
