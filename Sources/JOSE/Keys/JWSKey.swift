import CLibCrypto

/// A key bound to exactly one JWS algorithm, identified by its `kid`.
///
/// Binding is the point: a key never signs or verifies under any algorithm
/// but its own, which closes the RS/ES -> HS confusion attack and its kin.
/// Keys are parsed once, at load; every later operation reuses the parsed form.
public struct JWSKey: Sendable {
    /// The key identifier; also the file name in `keys/`.
    public let kid: String
    /// The one algorithm this key signs and verifies with.
    public let algorithm: JWSAlgorithm
    /// True if the key can sign (holds a private key or an HMAC secret).
    public let canSign: Bool

    enum Material: Sendable {
        case asymmetric(EVPKey)
        case symmetric(HMACKey)
    }

    let material: Material

    /// Largest RSA modulus accepted: bigger keys make verification a denial of service.
    public static let maximumRSABits = 8192
    /// Smallest RSA modulus accepted (RFC 7518 section 3.3).
    public static let minimumRSABits = 2048

    init(kid: String, algorithm: JWSAlgorithm, canSign: Bool, material: Material) {
        self.kid = kid
        self.algorithm = algorithm
        self.canSign = canSign
        self.material = material
    }

    /// True for HMAC keys, which are never published.
    public var isSymmetric: Bool { algorithm.family == .hmac }

    // MARK: Construction

    /// Generates a fresh key for `algorithm`.
    ///
    /// - Parameters:
    ///   - kid: the key id; `nil` uses the RFC 7638 thumbprint for public-key
    ///     algorithms and a random id for HMAC (a secret's hash is not published).
    ///   - rsaBits: modulus size for RS and PS algorithms (2048 by default).
    public static func generate(algorithm: JWSAlgorithm, kid: String? = nil, rsaBits: Int = 2048) throws -> JWSKey {
        let material: Material
        switch algorithm.family {
        case .hmac:
            material = .symmetric(try HMACKey(secret: try SecureRandom.bytes(algorithm.hashLength), digestName: algorithm.digestName!, outputLength: algorithm.hashLength))
        case .rsaPKCS1, .rsaPSS:
            guard (minimumRSABits...maximumRSABits).contains(rsaBits) else {
                throw KeyError(.weakKey, "RSA keys must be \(minimumRSABits) to \(maximumRSABits) bits, not \(rsaBits)")
            }
            material = .asymmetric(try EVPKey.generate(type: "RSA", rsaBits: rsaBits))
        case .ecdsa:
            material = .asymmetric(try EVPKey.generate(type: "EC", group: algorithm.ecCurve!.group))
        case .eddsa:
            material = .asymmetric(try EVPKey.generate(type: "ED25519"))
        }
        return try bind(material, algorithm: algorithm, kid: kid, canSign: true)
    }

    /// Loads a PEM key (PKCS#8 private key as `openssl genpkey` writes it, or
    /// an SPKI public key) and binds it to `algorithm`.
    public init(pem: String, algorithm: JWSAlgorithm, kid: String? = nil) throws {
        guard algorithm.family != .hmac else {
            throw KeyError(.algorithmMismatch, "\(algorithm.rawValue) needs a symmetric key (a JWK with \"kty\":\"oct\"), not a PEM key")
        }
        let (key, isPrivate) = try EVPKey.fromPEM(pem)
        self = try Self.bind(.asymmetric(key), algorithm: algorithm, kid: kid, canSign: isPrivate)
    }

    /// Wraps an HMAC secret for `algorithm`. Secrets shorter than the hash output are refused.
    public init(hmacSecret secret: [UInt8], algorithm: JWSAlgorithm, kid: String) throws {
        guard algorithm.family == .hmac else {
            throw KeyError(.algorithmMismatch, "\(algorithm.rawValue) is not an HMAC algorithm; a symmetric key cannot be bound to it")
        }
        self = try Self.bind(.symmetric(try HMACKey(secret: secret, digestName: algorithm.digestName!, outputLength: algorithm.hashLength)), algorithm: algorithm, kid: kid, canSign: true)
    }

    /// Checks that `material` fits `algorithm` (type, curve, size) and assigns the kid.
    static func bind(_ material: Material, algorithm: JWSAlgorithm, kid: String?, canSign: Bool) throws -> JWSKey {
        switch (material, algorithm.family) {
        case (.symmetric(let key), .hmac):
            guard key.secret.count >= algorithm.hashLength else {
                throw KeyError(.weakKey, "an \(algorithm.rawValue) secret must be at least \(algorithm.hashLength) bytes, not \(key.secret.count)")
            }
        case (.asymmetric(let key), .rsaPKCS1), (.asymmetric(let key), .rsaPSS):
            guard key.baseID == EVP_PKEY_RSA else {
                throw KeyError(.algorithmMismatch, "\(algorithm.rawValue) needs an RSA key, but this is \(Self.typeName(key))")
            }
            guard (minimumRSABits...maximumRSABits).contains(key.bits) else {
                throw KeyError(.weakKey, "RSA keys must be \(minimumRSABits) to \(maximumRSABits) bits; this one has \(key.bits)")
            }
            // e = 1 makes every "signature" verify; even exponents are not RSA.
            guard let e = key.bignum("e"), let last = e.last, last & 1 == 1, e.count > 1 || last >= 3 else {
                throw KeyError(.weakKey, "the RSA public exponent must be odd and at least 3")
            }
        case (.asymmetric(let key), .ecdsa):
            let curve = algorithm.ecCurve!
            guard key.baseID == EVP_PKEY_EC, key.groupName == curve.group else {
                throw KeyError(.algorithmMismatch, "\(algorithm.rawValue) needs an EC key on \(curve.jwk), but this is \(Self.typeName(key))")
            }
        case (.asymmetric(let key), .eddsa):
            guard key.baseID == EVP_PKEY_ED25519 else {
                throw KeyError(.algorithmMismatch, "EdDSA needs an Ed25519 key, but this is \(Self.typeName(key))")
            }
        default:
            throw KeyError(.algorithmMismatch, "a \(material.isSymmetric ? "symmetric" : "public-key") key cannot be used with \(algorithm.rawValue)")
        }
        let provisional = JWSKey(kid: kid ?? "-", algorithm: algorithm, canSign: canSign, material: material)
        let resolvedKID = try kid ?? (algorithm.family == .hmac ? "hs-" + SecureRandom.identifier(bytes: 9) : provisional.thumbprint())
        guard KeyID.isAcceptable(resolvedKID) else {
            throw KeyError(.invalidKeyID, "the kid must be 1-256 bytes of printable text")
        }
        return JWSKey(kid: resolvedKID, algorithm: algorithm, canSign: canSign, material: material)
    }

    private static func typeName(_ key: EVPKey) -> String {
        switch key.baseID {
        case EVP_PKEY_RSA: return "an RSA key"
        case EVP_PKEY_RSA_PSS: return "an RSA-PSS-restricted key (use a plain RSA key)"
        case EVP_PKEY_EC: return "an EC key on \(key.groupName ?? "an unknown curve")"
        case EVP_PKEY_ED25519: return "an Ed25519 key"
        case EVP_PKEY_ED448: return "an Ed448 key"
        default: return "an unsupported key type"
        }
    }

    // MARK: Export

    /// The private key as PKCS#8 PEM, for writing to `keys/`.
    public func privatePEM() throws -> String {
        guard case .asymmetric(let key) = material, canSign else {
            throw KeyError(.notPrivate, "key \(kid) has no private PEM form")
        }
        return try key.pem(private: true)
    }

    /// The public key as SPKI PEM.
    public func publicPEM() throws -> String {
        guard case .asymmetric(let key) = material else {
            throw KeyError(.unsupported, "key \(kid) is symmetric and has no public form")
        }
        return try key.pem(private: false)
    }

    // MARK: Signing and verifying

    /// Signs `message`, returning the JWS signature bytes (raw `r || s` for ECDSA).
    public func sign(_ message: [UInt8]) throws -> [UInt8] {
        guard canSign else { throw KeyError(.notPrivate, "key \(kid) is a public key and cannot sign") }
        return try message.withUnsafeBytes { input in
            switch material {
            case .symmetric(let key):
                guard let tag = key.authenticate(input) else { throw KeyError(.libcrypto, "HMAC failed") }
                return tag
            case .asymmetric(let key):
                let digest = FetchedDigests.shared.digest(for: algorithm)
                let signature = try key.sign(input, digest: digest, pssSaltLength: algorithm.family == .rsaPSS ? algorithm.hashLength : nil)
                guard let curve = algorithm.ecCurve else { return signature }
                guard let raw = ECDSASignature.raw(fromDER: signature, coordinateLength: curve.coordinateLength) else {
                    throw KeyError(.libcrypto, "libcrypto returned an ECDSA signature this module cannot convert")
                }
                return raw
            }
        }
    }

    /// Verifies a JWS signature over `message` under this key's algorithm.
    ///
    /// ECDSA signatures must be raw `r || s` of exactly twice the coordinate
    /// length; EdDSA signatures 64 bytes; HMAC tags the full hash length.
    public func verify(signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> Bool {
        switch material {
        case .symmetric(let key):
            return key.verify(tag: signature, message: message)
        case .asymmetric(let key):
            switch algorithm.family {
            case .ecdsa:
                let digest = FetchedDigests.shared.digest(for: algorithm)
                return ECDSASignature.withDER(fromRaw: signature, coordinateLength: algorithm.ecCurve!.coordinateLength) {
                    key.verify(signature: $0, message: message, digest: digest, pssSaltLength: nil)
                } ?? false
            case .eddsa:
                guard signature.count == 64 else { return false }
                return key.verify(signature: signature, message: message, digest: nil, pssSaltLength: nil)
            case .rsaPSS:
                return key.verify(signature: signature, message: message, digest: FetchedDigests.shared.digest(for: algorithm), pssSaltLength: algorithm.hashLength)
            case .rsaPKCS1:
                return key.verify(signature: signature, message: message, digest: FetchedDigests.shared.digest(for: algorithm), pssSaltLength: nil)
            case .hmac:
                return false
            }
        }
    }

    /// Convenience over `verify(signature:message:)` for arrays.
    public func verify(signature: [UInt8], message: [UInt8]) -> Bool {
        signature.withUnsafeBytes { s in message.withUnsafeBytes { m in verify(signature: s, message: m) } }
    }
}

extension JWSKey.Material {
    var isSymmetric: Bool {
        if case .symmetric = self { return true }
        return false
    }
}
