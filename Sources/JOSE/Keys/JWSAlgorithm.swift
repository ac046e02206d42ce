import CLibCrypto

/// The JWS algorithms Portcullis implements (RFC 7518, RFC 8037).
///
/// `none` is deliberately absent: there is no value of this type that means
/// "unsigned".
public enum JWSAlgorithm: String, Sendable, CaseIterable, Hashable {
    case hs256 = "HS256", hs384 = "HS384", hs512 = "HS512"
    case rs256 = "RS256", rs384 = "RS384", rs512 = "RS512"
    case ps256 = "PS256", ps384 = "PS384", ps512 = "PS512"
    case es256 = "ES256", es384 = "ES384", es512 = "ES512"
    case eddsa = "EdDSA"

    /// How an algorithm signs.
    public enum Family: Sendable {
        case hmac, rsaPKCS1, rsaPSS, ecdsa, eddsa
    }

    public var family: Family {
        switch self {
        case .hs256, .hs384, .hs512: return .hmac
        case .rs256, .rs384, .rs512: return .rsaPKCS1
        case .ps256, .ps384, .ps512: return .rsaPSS
        case .es256, .es384, .es512: return .ecdsa
        case .eddsa: return .eddsa
        }
    }

    /// Output length of the algorithm's hash in bytes (64 for EdDSA's SHA-512).
    public var hashLength: Int {
        switch self {
        case .hs256, .rs256, .ps256, .es256: return 32
        case .hs384, .rs384, .ps384, .es384: return 48
        case .hs512, .rs512, .ps512, .es512, .eddsa: return 64
        }
    }

    /// The libcrypto digest name, `nil` for EdDSA (which hashes internally).
    var digestName: String? {
        switch hashLength {
        case _ where self == .eddsa: return nil
        case 32: return "SHA256"
        case 48: return "SHA384"
        default: return "SHA512"
        }
    }

    /// For ECDSA: the JWK curve name, the libcrypto group name and the length
    /// of each of r and s in a JWS signature.
    var ecCurve: (jwk: String, group: String, coordinateLength: Int)? {
        switch self {
        case .es256: return ("P-256", "prime256v1", 32)
        case .es384: return ("P-384", "secp384r1", 48)
        case .es512: return ("P-521", "secp521r1", 66)
        default: return nil
        }
    }

    /// Parses a header `alg` value exactly (case-sensitive, as RFC 7515 requires).
    public init?(headerValue: String) {
        self.init(rawValue: headerValue)
    }

    /// The algorithm a JWK's type and curve imply, for keys without `alg`.
    /// RSA and symmetric keys imply none: their hash must be stated.
    static func implied(kty: String, crv: String?) -> JWSAlgorithm? {
        switch (kty, crv) {
        case ("EC", "P-256"): return .es256
        case ("EC", "P-384"): return .es384
        case ("EC", "P-521"): return .es512
        case ("OKP", "Ed25519"): return .eddsa
        default: return nil
        }
    }
}

/// Message digests fetched once: in OpenSSL 3 an implicit fetch per
/// operation (`EVP_sha256()` and friends) costs a lock and a lookup each time.
struct FetchedDigests: @unchecked Sendable {
    // EVP_MD objects are immutable once fetched and safe to share across threads.
    let sha256: OpaquePointer
    let sha384: OpaquePointer
    let sha512: OpaquePointer

    static let shared: FetchedDigests = {
        guard let a = EVP_MD_fetch(nil, "SHA256", nil), let b = EVP_MD_fetch(nil, "SHA384", nil),
            let c = EVP_MD_fetch(nil, "SHA512", nil)
        else {
            // libcrypto without SHA-2 cannot run any JOSE algorithm; this is an
            // installation fault, not an input, so there is nothing to recover.
            preconditionFailure("libcrypto has no SHA-2 digests: \(LibCryptoError.drain("EVP_MD_fetch"))")
        }
        return FetchedDigests(sha256: a, sha384: b, sha512: c)
    }()

    func digest(for algorithm: JWSAlgorithm) -> OpaquePointer? {
        switch algorithm.digestName {
        case "SHA256": return sha256
        case "SHA384": return sha384
        case "SHA512": return sha512
        default: return nil
        }
    }
}
