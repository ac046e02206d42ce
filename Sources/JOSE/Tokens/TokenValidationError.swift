/// Why a token was refused. `reason` is a stable code; `message` is one
/// sentence for a person and never contains the token or any key material.
public struct TokenValidationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable reason codes, documented in docs/TOKENS.md.
    public enum Reason: String, Sendable, CaseIterable {
        /// Not a JWS compact serialisation, non-canonical base64url, or not strict JSON.
        case malformed
        /// Larger than the policy's size cap; refused before any other work.
        case tooLarge = "too_large"
        /// `alg` is `none` (in any case) or not an algorithm Portcullis implements.
        case unsupportedAlgorithm = "unsupported_algorithm"
        /// The header's `alg` differs from the algorithm bound to the key named by `kid`.
        case algorithmMismatch = "algorithm_mismatch"
        /// No `kid`, or a `kid` that names no known key.
        case unknownKey = "unknown_key"
        /// A header that would let the token choose its own key or encoding
        /// (`jwk`, `jku`, `x5u`, `x5c`, `b64`, `zip`, `cty`).
        case forbiddenHeader = "forbidden_header"
        /// A `crit` header: Portcullis understands no extensions.
        case unsupportedCriticalHeader = "unsupported_critical_header"
        /// `typ` is absent or not an accepted access-token type.
        case wrongType = "wrong_type"
        /// The signature does not verify (including wrong length or DER-encoded ECDSA).
        case badSignature = "bad_signature"
        /// `exp` is at or before the checking instant minus the leeway.
        case expired
        /// `nbf` is after the checking instant plus the leeway.
        case notYetValid = "not_yet_valid"
        /// `iat` is after the checking instant plus the leeway.
        case issuedInFuture = "issued_in_future"
        /// `exp` is further away than the policy's maximum lifetime.
        case lifetimeTooLong = "lifetime_too_long"
        /// `iss` is not the expected issuer (exact comparison).
        case wrongIssuer = "wrong_issuer"
        /// `aud` does not contain the expected audience (exact comparison).
        case wrongAudience = "wrong_audience"
        /// A required claim is absent.
        case missingClaim = "missing_claim"
        /// A claim is present but of the wrong type or out of range, or is one an
        /// access token must never carry (`session_id`).
        case invalidClaim = "invalid_claim"
    }

    public let reason: Reason
    public let message: String

    public init(_ reason: Reason, _ message: String) {
        self.reason = reason
        self.message = message
    }

    public var description: String { "\(reason.rawValue): \(message)" }
}
