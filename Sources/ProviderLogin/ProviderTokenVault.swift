import ConfigurationReading
import Foundation
import JOSE

/// Seals the provider's tokens kept at rest (a refresh token, the ID token, the access token), AES-256-GCM under
/// `keys/provider-tokens.key`.
///
/// The key is made on first start (32 bytes from the CSPRNG, base64url, mode 0600; created
/// with `O_EXCL`, so two instances starting at once read the one that won) and shared by every
/// instance through the keys directory, as the signing keys are. Each sealed value is bound
/// to its session and its kind: a refresh token copied to another session's row does not open.
public struct ProviderTokenVault: Sendable {
    /// The file under the keys directory.
    public static let fileName = "provider-tokens.key"
    private let key: SealingKey

    public init(key: SealingKey) {
        self.key = key
    }

    /// What a sealed value is.
    public enum Kind: String, Sendable {
        case refreshToken = "refresh_token"
        case idToken = "id_token"
        case accessToken = "access_token"
    }

    /// Reads the key in `directory`, making it when there is none.
    ///
    /// - Throws: `ConfigurationError` naming the file when it cannot be read, is readable by
    ///   others, or does not hold 32 bytes.
    public static func load(keysDirectory directory: String) throws(ConfigurationError) -> ProviderTokenVault {
        ProviderTokenVault(
            key: try SealingKeyFile.load(
                directory + "/" + fileName, consequence: "sessions signed in through a provider then sign in again"))
    }

    public func seal(_ token: String, kind: Kind, sessionID: String) throws -> String {
        try key.seal(Array(token.utf8), context: Self.context(kind, sessionID))
    }

    /// The token, or `nil` when `sealed` was not sealed by this key for this session and kind.
    public func open(_ sealed: String, kind: Kind, sessionID: String) -> String? {
        key.open(sealed, context: Self.context(kind, sessionID)).map { String(decoding: $0, as: UTF8.self) }
    }

    static func context(_ kind: Kind, _ sessionID: String) -> String { "portcullis provider \(kind.rawValue)\n\(sessionID)" }
}
