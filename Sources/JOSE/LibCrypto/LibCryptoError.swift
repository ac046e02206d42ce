// JOSE: JSON Web Signature, keys and access-token policy on OpenSSL libcrypto.
import CLibCrypto

/// A failure reported by libcrypto, with the drained contents of its error queue.
///
/// Every failure path in this module drains the thread's error queue into one of
/// these (or clears it), so a later, unrelated call never sees a stale error.
public struct LibCryptoError: Error, Sendable, CustomStringConvertible {
    /// The libcrypto operation that failed, such as `EVP_DigestSign`.
    public let operation: String
    /// The queued libcrypto reasons, oldest first (may be empty).
    public let reasons: [String]

    public var description: String {
        reasons.isEmpty ? "libcrypto \(operation) failed" : "libcrypto \(operation) failed: \(reasons.joined(separator: "; "))"
    }

    /// Drains the calling thread's libcrypto error queue into an error for `operation`.
    static func drain(_ operation: String) -> LibCryptoError {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if reasons.count < 8, let reason = ERR_reason_error_string(code) {
                reasons.append(String(cString: reason))
            }
        }
        return LibCryptoError(operation: operation, reasons: reasons)
    }

    /// Empties the error queue after an expected failure (a bad signature, say).
    static func clearQueue() {
        ERR_clear_error()
    }
}
