import CLibCrypto

/// A keyed HMAC context, created once per key and copied per operation.
///
/// OpenSSL 3's one-shot `HMAC()` fetches the digest and re-keys on every
/// call; duplicating a keyed `EVP_MAC_CTX` avoids both. `@unchecked Sendable`:
/// the template context is only read (by `EVP_MAC_CTX_dup`) after `init`.
final class HMACKey: @unchecked Sendable {
    private let template: OpaquePointer
    /// The secret, kept so the key can be written to `keys/`. Never logged.
    let secret: [UInt8]
    let outputLength: Int

    private static let hmac: MACAlgorithm = {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else {
            preconditionFailure("libcrypto has no HMAC: \(LibCryptoError.drain("EVP_MAC_fetch"))")
        }
        return MACAlgorithm(pointer: mac)
    }()

    private struct MACAlgorithm: @unchecked Sendable {
        // An EVP_MAC is immutable after fetch and shared freely.
        let pointer: OpaquePointer
    }

    init(secret: [UInt8], digestName: String, outputLength: Int) throws {
        guard let context = EVP_MAC_CTX_new(Self.hmac.pointer) else {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_MAC_CTX_new"))")
        }
        let ok = digestName.withCString { name -> Bool in
            var params = [
                OSSL_PARAM_construct_utf8_string("digest", UnsafeMutablePointer(mutating: name), 0),
                OSSL_PARAM_construct_end(),
            ]
            return secret.withUnsafeBufferPointer { key in
                EVP_MAC_init(context, key.baseAddress, key.count, &params) == 1
            }
        }
        guard ok else {
            EVP_MAC_CTX_free(context)
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_MAC_init"))")
        }
        self.template = context
        self.secret = secret
        self.outputLength = outputLength
    }

    deinit {
        EVP_MAC_CTX_free(template)
    }

    /// The MAC of `message`, or `nil` if libcrypto failed (queue cleared).
    func authenticate(_ message: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let context = EVP_MAC_CTX_dup(template) else { LibCryptoError.clearQueue(); return nil }
        defer { EVP_MAC_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: 64)
        var length = 0
        let ok = out.withUnsafeMutableBufferPointer { output in
            EVP_MAC_update(context, message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count) == 1
                && EVP_MAC_final(context, output.baseAddress, &length, 64) == 1
        }
        guard ok, length == outputLength else { LibCryptoError.clearQueue(); return nil }
        out.removeLast(64 - length)
        return out
    }

    /// Checks `tag` against the MAC of `message` in constant time
    /// (`CRYPTO_memcmp`); the tag's length is public and checked first.
    /// The MAC is computed into stack memory: no allocation per check.
    func verify(tag: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> Bool {
        guard tag.count == outputLength else { return false }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { output in
            guard let context = EVP_MAC_CTX_dup(template) else { LibCryptoError.clearQueue(); return false }
            defer { EVP_MAC_CTX_free(context) }
            var length = 0
            guard EVP_MAC_update(context, message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count) == 1,
                EVP_MAC_final(context, output.baseAddress, &length, 64) == 1, length == outputLength
            else {
                LibCryptoError.clearQueue()
                return false
            }
            return CRYPTO_memcmp(output.baseAddress, tag.baseAddress, outputLength) == 0
        }
    }
}
