// RuntimeAPI: the typed contract between the gateway and the Runtime: views, requests, error codes, the assertion.
import JOSE

/// Session identifiers: `ses_` + 22 base64url characters of 16 bytes from the
/// libcrypto CSPRNG. Opaque: they say nothing about the user.
public enum SessionID {
    public static let prefix = "ses_"

    /// A fresh session id.
    public static func generate() throws -> String {
        prefix + Base64URL.encode(try SecureRandom.bytes(16))
    }

    /// True if `text` is exactly the form `generate()` produces (canonical base64url of 16 bytes).
    public static func isWellFormed(_ text: String) -> Bool {
        let bytes = text.utf8
        // 22 characters after the prefix: 16 bytes once decoded (over the bytes; checked on every proxied request naming a session).
        guard bytes.count == 26, bytes.starts(with: prefix.utf8) else { return false }
        return Base64URL.isCanonical(bytes.dropFirst(4))
    }

    /// Why a value is not a session id, naming the mix-up when it is a credential of the other kind.
    public enum Problem: Sendable, Equatable {
        /// Nothing was sent.
        case missing
        /// A JWT (an access token) was sent where a session_id belongs.
        case accessTokenGiven
        /// A refresh token was sent where a session_id belongs.
        case refreshTokenGiven
        /// Anything else that is not `ses_` + 22 base64url characters.
        case malformed

        /// One sentence a person can act on; never repeats the value.
        public var message: String {
            switch self {
            case .missing: return "a session_id is required"
            case .accessTokenGiven: return "an access token was sent where a session_id is expected; send the session_id the server created"
            case .refreshTokenGiven: return "a refresh token was sent where a session_id is expected; send the session_id the server created"
            case .malformed: return "the session_id is not of the form ses_ followed by 22 base64url characters"
            }
        }
    }

    /// Checks a presented session id; `nil` when it is well formed.
    public static func problem(with value: String?) -> Problem? {
        guard let value, !value.isEmpty else { return .missing }
        if isWellFormed(value) { return nil }
        if value.hasPrefix("eyJ"), value.split(separator: ".", omittingEmptySubsequences: false).count >= 3 { return .accessTokenGiven }
        if value.hasPrefix("rt_") { return .refreshTokenGiven }
        return .malformed
    }
}
