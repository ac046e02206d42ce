/// A bare libcrypto signature check, for benchmarks: what verifying costs
/// with no JOSE work around it.
///
/// It runs exactly the libcrypto calls `JWSKey.verify` runs
/// (`EVP_DigestVerifyInit`, PSS parameters, `EVP_DigestVerify`, or a copy of
/// the keyed HMAC context), on a signature already in libcrypto's format (DER
/// for ECDSA, converted once here), so `portcullis bench` can report the
/// overhead of parsing and policy as a ratio measured in the same run.
public struct RawSignatureCheck: Sendable {
    private let key: JWSKey
    private let message: [UInt8]
    private let nativeSignature: [UInt8]

    /// - Parameter jwsSignature: the signature as it appears in the token (raw `r || s` for ECDSA).
    public init(key: JWSKey, signingInput: [UInt8], jwsSignature: [UInt8]) throws {
        self.key = key
        self.message = signingInput
        if let curve = key.algorithm.ecCurve {
            guard let der = jwsSignature.withUnsafeBytes({ ECDSASignature.der(fromRaw: $0, coordinateLength: curve.coordinateLength) }) else {
                throw KeyError(.invalidKey, "the ECDSA signature has the wrong length")
            }
            nativeSignature = der
        } else {
            nativeSignature = jwsSignature
        }
    }

    /// Runs one verification; `true` if the signature verifies.
    public func run() -> Bool {
        nativeSignature.withUnsafeBytes { signature in
            message.withUnsafeBytes { message in
                switch key.material {
                case .symmetric(let hmac):
                    return hmac.verify(tag: signature, message: message)
                case .asymmetric(let pkey):
                    return pkey.verify(
                        signature: signature, message: message, digest: FetchedDigests.shared.digest(for: key.algorithm),
                        pssSaltLength: key.algorithm.family == .rsaPSS ? key.algorithm.hashLength : nil)
                }
            }
        }
    }
}
