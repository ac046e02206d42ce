import CLibCrypto

/// One-shot SHA-2 digests through `EVP_Digest`.
public enum Digest {
    /// SHA-256 of `data`. Used for thumbprints and for storing opaque tokens by hash.
    public static func sha256(_ data: [UInt8]) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let rc = data.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        guard rc == 1, length == 32 else { throw LibCryptoError.drain("EVP_Digest") }
        return out
    }

    /// SHA-256 of `text`'s UTF-8, base64url: how opaque tokens, states and codes are kept.
    public static func sha256Base64URL(_ text: String) throws -> String {
        Base64URL.encode(try sha256(Array(text.utf8)))
    }
}
