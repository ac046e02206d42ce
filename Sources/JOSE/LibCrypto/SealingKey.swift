import CLibCrypto

/// An AES-256-GCM key that seals secrets kept at rest (a provider's refresh token, an ID token).
///
/// A sealed value is `nonce (12) || ciphertext || tag (16)`, base64url: a fresh random nonce
/// for every seal (2^32 seals under one key keep the collision chance negligible), and the
/// associated data binds a value to where it is kept, so a sealed value moved to another row
/// does not open.
public struct SealingKey: Sendable {
    /// The key's length in bytes.
    public static let length = 32
    private static let nonceLength = 12
    private static let tagLength = 16

    private let key: [UInt8]

    /// - Throws: `KeyError.invalidKey` unless `bytes` is 32 bytes long.
    public init(bytes: [UInt8]) throws(KeyError) {
        guard bytes.count == Self.length else { throw KeyError(.invalidKey, "a sealing key is \(Self.length) bytes, not \(bytes.count)") }
        key = bytes
    }

    /// The key as it is written to its file: base64url. Only for the key file.
    public func exportedText() throws -> String { Base64URL.encode(key) }

    /// A new key from the CSPRNG.
    public static func generate() throws -> SealingKey { try SealingKey(bytes: SecureRandom.bytes(length)) }

    /// Seals `plaintext`, bound to `context` (associated data, not secret).
    public func seal(_ plaintext: [UInt8], context: String) throws -> String {
        let nonce = try SecureRandom.bytes(Self.nonceLength)
        var output = nonce + [UInt8](repeating: 0, count: plaintext.count + Self.tagLength)
        try withContext { cipher in
            // Pointer work: libcrypto writes the ciphertext after the nonce, then the tag after it.
            guard EVP_EncryptInit_ex(cipher, EVP_aes_256_gcm(), nil, key, nonce) == 1 else { throw LibCryptoError.drain("EVP_EncryptInit_ex") }
            var length: Int32 = 0
            let aad = Array(context.utf8)
            guard EVP_EncryptUpdate(cipher, nil, &length, aad, Int32(aad.count)) == 1 else { throw LibCryptoError.drain("EVP_EncryptUpdate") }
            try output.withUnsafeMutableBufferPointer { buffer in
                guard let base = buffer.baseAddress else { return }
                let body = base + Self.nonceLength
                guard EVP_EncryptUpdate(cipher, body, &length, plaintext, Int32(plaintext.count)) == 1 else { throw LibCryptoError.drain("EVP_EncryptUpdate") }
                var final: Int32 = 0
                guard EVP_EncryptFinal_ex(cipher, body + Int(length), &final) == 1 else { throw LibCryptoError.drain("EVP_EncryptFinal_ex") }
                let tag = body + plaintext.count
                guard EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_GET_TAG, Int32(Self.tagLength), tag) == 1 else {
                    throw LibCryptoError.drain("EVP_CIPHER_CTX_ctrl")
                }
            }
        }
        return Base64URL.encode(output)
    }

    /// The plaintext of `sealed`, or `nil` when it is not a value this key sealed for `context`
    /// (another key, another context, or altered bytes: GCM's tag does not match).
    public func open(_ sealed: String, context: String) -> [UInt8]? {
        guard let bytes = Base64URL.decode(sealed), bytes.count >= Self.nonceLength + Self.tagLength else { return nil }
        let nonce = Array(bytes[0..<Self.nonceLength])
        let body = Array(bytes[Self.nonceLength..<(bytes.count - Self.tagLength)])
        var tag = Array(bytes[(bytes.count - Self.tagLength)...])
        var plaintext = [UInt8](repeating: 0, count: body.count)
        let opened: Bool? = try? withContext { cipher in
            guard EVP_DecryptInit_ex(cipher, EVP_aes_256_gcm(), nil, key, nonce) == 1 else { return false }
            var length: Int32 = 0
            let aad = Array(context.utf8)
            guard EVP_DecryptUpdate(cipher, nil, &length, aad, Int32(aad.count)) == 1 else { return false }
            let updated = plaintext.withUnsafeMutableBufferPointer { EVP_DecryptUpdate(cipher, $0.baseAddress, &length, body, Int32(body.count)) }
            guard updated == 1, EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_SET_TAG, Int32(Self.tagLength), &tag) == 1 else { return false }
            var final: Int32 = 0
            // The tag is checked here: 0 means the bytes are not what this key sealed.
            return plaintext.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(cipher, $0.baseAddress.map { $0 + Int(length) }, &final) } == 1
        }
        ERR_clear_error()
        return opened == true ? plaintext : nil
    }

    private func withContext<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        guard let cipher = EVP_CIPHER_CTX_new() else { throw LibCryptoError.drain("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(cipher) }
        return try body(cipher)
    }
}
