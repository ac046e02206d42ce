// Runtime: owns sessions, executes intents and serves the agent channel on its own internal listener.
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
        guard text.utf8.count == 26, text.hasPrefix(prefix) else { return false }
        return Base64URL.decode(String(text.dropFirst(4)))?.count == 16
    }
}
