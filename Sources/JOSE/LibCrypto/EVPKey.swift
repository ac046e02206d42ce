import CLibCrypto

/// Owns one libcrypto `EVP_PKEY` and frees it when the last reference goes.
///
/// `@unchecked Sendable`: the key is never mutated after construction, and
/// OpenSSL 3 allows one `EVP_PKEY` to be used by many signing and verifying
/// contexts on different threads at once.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes ownership of `pointer`.
    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    var baseID: Int32 { EVP_PKEY_get_base_id(pointer) }
    var bits: Int { Int(EVP_PKEY_get_bits(pointer)) }

    /// The EC group name (`prime256v1`, ...), or `nil` for non-EC keys.
    var groupName: String? {
        var buffer = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pointer, "group", &buffer, buffer.count, &length) == 1 else {
            LibCryptoError.clearQueue()
            return nil
        }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: Loading

    /// Reads a PEM private key (PKCS#8, or the traditional forms) or public key (SPKI).
    static func fromPEM(_ pem: String) throws -> (key: EVPKey, isPrivate: Bool) {
        if pem.contains("ENCRYPTED") {
            throw KeyError(.encrypted, "the PEM key is encrypted; decrypt it first (openssl pkey -in KEY -out PLAIN)")
        }
        let isPrivate = pem.contains("PRIVATE KEY-----")
        guard isPrivate || pem.contains("-----BEGIN PUBLIC KEY-----") else {
            throw KeyError(.invalidKey, "the file is not a PEM private key (PKCS#8) or public key (SPKI)")
        }
        var bytes = Array(pem.utf8)
        let loaded: OpaquePointer? = bytes.withUnsafeMutableBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            // A password callback that always declines, so libcrypto never prompts on a terminal.
            let declinePassword: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = { _, _, _, _ in 0 }
            return isPrivate
                ? PEM_read_bio_PrivateKey(bio, nil, declinePassword, nil)
                : PEM_read_bio_PUBKEY(bio, nil, declinePassword, nil)
        }
        // Wipe our copy of the PEM text: it may hold a private key.
        for index in bytes.indices { bytes[index] = 0 }
        guard let loaded else {
            LibCryptoError.clearQueue()
            throw KeyError(.invalidKey, "the PEM data could not be parsed as a \(isPrivate ? "private" : "public") key")
        }
        return (EVPKey(taking: loaded), isPrivate)
    }

    /// Builds a key from OpenSSL parameters (`EVP_PKEY_fromdata`).
    ///
    /// - Parameters:
    ///   - type: `"RSA"` or `"EC"`.
    ///   - bignums: big-endian unsigned integers, by OpenSSL parameter name.
    ///   - octets: octet-string parameters (the EC public point).
    ///   - utf8: UTF-8 parameters (the EC group name).
    static func fromData(
        type: String, isPrivate: Bool, bignums: [(String, [UInt8])], octets: [(String, [UInt8])] = [],
        utf8: [(String, String)] = []
    ) throws -> EVPKey {
        guard let builder = OSSL_PARAM_BLD_new() else { throw KeyError(.libcrypto, "\(LibCryptoError.drain("OSSL_PARAM_BLD_new"))") }
        defer { OSSL_PARAM_BLD_free(builder) }
        // The builder keeps pointers to names, BIGNUMs and buffers until
        // OSSL_PARAM_BLD_to_param copies them, so all of them are allocated
        // here and released only after the parameters are built and used.
        var owned: [UnsafeMutableRawPointer] = []
        var bns: [OpaquePointer] = []
        defer {
            for bn in bns { BN_clear_free(bn) }
            for pointer in owned { free(pointer) }
        }
        func cString(_ text: String) -> UnsafeMutablePointer<CChar> {
            let pointer = strdup(text)!
            owned.append(pointer)
            return pointer
        }
        var ok = true
        for (name, value) in bignums {
            guard let bn = value.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else { ok = false; break }
            bns.append(bn)
            ok = ok && OSSL_PARAM_BLD_push_BN(builder, cString(name), bn) == 1
        }
        for (name, value) in octets where ok {
            let buffer = malloc(max(value.count, 1))!
            owned.append(buffer)
            value.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            ok = OSSL_PARAM_BLD_push_octet_string(builder, cString(name), buffer, value.count) == 1
        }
        for (name, value) in utf8 where ok {
            ok = OSSL_PARAM_BLD_push_utf8_string(builder, cString(name), cString(value), 0) == 1
        }
        guard ok, let params = OSSL_PARAM_BLD_to_param(builder) else {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("OSSL_PARAM_BLD"))")
        }
        defer { OSSL_PARAM_free(params) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_PKEY_CTX_new_from_name"))")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer? = nil
        let selection = isPrivate ? portcullis_selection_keypair() : portcullis_selection_public_key()
        guard EVP_PKEY_fromdata_init(context) == 1, EVP_PKEY_fromdata(context, &key, selection, params) == 1, let key else {
            LibCryptoError.clearQueue()
            throw KeyError(.invalidKey, "the \(type) key parameters are not a valid key")
        }
        return EVPKey(taking: key)
    }

    /// Builds an Ed25519 key from its raw 32-byte public or private key.
    static func ed25519(raw: [UInt8], isPrivate: Bool) throws -> EVPKey {
        guard raw.count == 32 else { throw KeyError(.invalidKey, "an Ed25519 key must be 32 bytes, not \(raw.count)") }
        let key = raw.withUnsafeBufferPointer { buffer in
            isPrivate
                ? EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, buffer.baseAddress, 32)
                : EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, buffer.baseAddress, 32)
        }
        guard let key else {
            LibCryptoError.clearQueue()
            throw KeyError(.invalidKey, "the Ed25519 key bytes are not a valid key")
        }
        return EVPKey(taking: key)
    }

    /// Generates a key: `"RSA"` with `rsaBits`, `"EC"` with `group`, or `"ED25519"`.
    static func generate(type: String, rsaBits: Int? = nil, group: String? = nil) throws -> EVPKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_PKEY_CTX_new_from_name"))")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_PKEY_keygen_init"))") }
        if let rsaBits, EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(rsaBits)) != 1 {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_PKEY_CTX_set_rsa_keygen_bits"))")
        }
        if let group, EVP_PKEY_CTX_set_group_name(context, group) != 1 {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_PKEY_CTX_set_group_name"))")
        }
        var key: OpaquePointer? = nil
        guard EVP_PKEY_generate(context, &key) == 1, let key else {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_PKEY_generate"))")
        }
        return EVPKey(taking: key)
    }

    /// Runs libcrypto's public-key check (the EC point is on the curve, say).
    func passesPublicCheck() -> Bool {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else { return false }
        defer { EVP_PKEY_CTX_free(context) }
        let ok = EVP_PKEY_public_check(context) == 1
        if !ok { LibCryptoError.clearQueue() }
        return ok
    }

    // MARK: Export

    /// A big-number parameter (`n`, `e`, `qx`, ...) as big-endian bytes,
    /// left-padded to `length` when given.
    func bignum(_ name: String, length: Int? = nil) -> [UInt8]? {
        var bn: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(pointer, name, &bn) == 1, let bn else {
            LibCryptoError.clearQueue()
            return nil
        }
        defer { BN_free(bn) }
        let size = (Int(BN_num_bits(bn)) + 7) / 8
        let width = max(length ?? size, size)
        var out = [UInt8](repeating: 0, count: width)
        out.withUnsafeMutableBufferPointer { _ = BN_bn2bin(bn, $0.baseAddress! + (width - size)) }
        return out
    }

    /// The raw public key of an Ed25519 key.
    func rawPublicKey() -> [UInt8]? {
        var length = 0
        guard EVP_PKEY_get_raw_public_key(pointer, nil, &length) == 1 else { LibCryptoError.clearQueue(); return nil }
        var out = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_get_raw_public_key(pointer, &out, &length) == 1 else { LibCryptoError.clearQueue(); return nil }
        return out
    }

    /// PEM text: PKCS#8 for the private key, SPKI for the public key.
    func pem(private isPrivateExport: Bool) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw KeyError(.libcrypto, "\(LibCryptoError.drain("BIO_new"))") }
        defer { BIO_free(bio) }
        let rc = isPrivateExport
            ? PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil)
            : PEM_write_bio_PUBKEY(bio, pointer)
        guard rc == 1 else { throw KeyError(.libcrypto, "\(LibCryptoError.drain("PEM_write_bio"))") }
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = portcullis_bio_get_mem_data(bio, &data)
        guard length > 0, let data else { throw KeyError(.libcrypto, "\(LibCryptoError.drain("BIO_get_mem_data"))") }
        let text = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
        // The memory BIO is freed with the private key's PEM in it; wipe it first.
        if isPrivateExport { memset(data, 0, length) }
        return text
    }

    // MARK: Signing and verifying

    /// Signs `message` with `EVP_DigestSign`; for RSA-PSS, MGF1 with the same
    /// hash and a salt as long as the hash are set explicitly.
    func sign(_ message: UnsafeRawBufferPointer, digest: OpaquePointer?, pssSaltLength: Int?) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_MD_CTX_new"))") }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer? = nil
        guard EVP_DigestSignInit(context, &keyContext, digest, nil, pointer) == 1 else {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_DigestSignInit"))")
        }
        if let pssSaltLength, !Self.configurePSS(keyContext, digest: digest, saltLength: pssSaltLength) {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_PKEY_CTX_set_rsa_pss"))")
        }
        var length = 0
        let input = message.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? Self.emptyInput
        guard EVP_DigestSign(context, nil, &length, input, message.count) == 1 else {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_DigestSign"))")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, input, message.count) == 1 else {
            throw KeyError(.libcrypto, "\(LibCryptoError.drain("EVP_DigestSign"))")
        }
        return Array(signature.prefix(length))
    }

    /// Verifies a signature in libcrypto's own format (DER for ECDSA).
    /// Any failure, including a malformed signature, is `false` with the
    /// error queue cleared.
    func verify(signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer, digest: OpaquePointer?, pssSaltLength: Int?) -> Bool {
        guard let context = EVP_MD_CTX_new() else { LibCryptoError.clearQueue(); return false }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer? = nil
        guard EVP_DigestVerifyInit(context, &keyContext, digest, nil, pointer) == 1 else {
            LibCryptoError.clearQueue()
            return false
        }
        if let pssSaltLength, !Self.configurePSS(keyContext, digest: digest, saltLength: pssSaltLength) {
            LibCryptoError.clearQueue()
            return false
        }
        let rc = EVP_DigestVerify(
            context,
            signature.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? Self.emptyInput, signature.count,
            message.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? Self.emptyInput, message.count)
        if rc != 1 { LibCryptoError.clearQueue() }
        return rc == 1
    }

    /// RSASSA-PSS as RFC 7518 section 3.5 fixes it. OpenSSL 3.0 would
    /// otherwise accept any salt length when verifying.
    private static func configurePSS(_ keyContext: OpaquePointer?, digest: OpaquePointer?, saltLength: Int) -> Bool {
        EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1
            && EVP_PKEY_CTX_set_rsa_mgf1_md(keyContext, digest) == 1
            && EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, Int32(saltLength)) == 1
    }

    /// A valid pointer for zero-length input: libcrypto wants non-NULL data.
    // Written once, never mutated: a single zero byte shared by every caller.
    nonisolated(unsafe) private static let emptyInput: UnsafePointer<UInt8> = {
        let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
        pointer.initialize(to: 0)
        return UnsafePointer(pointer)
    }()
}
