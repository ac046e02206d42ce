import ConfigurationReading
import Foundation
import JOSE

/// Seals the provider's tokens kept at rest (a refresh token, the ID token), AES-256-GCM under
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
    }

    /// Reads the key in `directory`, making it when there is none.
    ///
    /// - Throws: `ConfigurationError` naming the file when it cannot be read, is readable by
    ///   others, or does not hold 32 bytes.
    public static func load(keysDirectory directory: String) throws(ConfigurationError) -> ProviderTokenVault {
        let path = directory + "/" + fileName
        if !FileManager.default.fileExists(atPath: path) {
            // On a first start the keys directory may not exist yet (the signing key is made after the configuration is read).
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            do {
                let made = try SealingKey.generate()
                try KeyDirectory.writeNewFile(path, Array((try made.exportedText() + "\n").utf8), mode: 0o600)
            } catch {
                // Another instance starting at the same moment made it first (O_EXCL): read that one.
                guard FileManager.default.fileExists(atPath: path) else {
                    throw ConfigurationError(fileKey: "keys.directory", "names a directory where \(path) cannot be made: \(error)")
                }
            }
        }
        let text = String(decoding: try OwnerOnlyFile.read(path, key: "keys.directory"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let bytes = Base64URL.decode(text), let key = try? SealingKey(bytes: bytes) else {
            throw ConfigurationError(fileKey: "keys.directory", "holds \(path), which must hold 32 bytes, base64url; remove it to have a new one made (sessions signed in through a provider then sign in again)")
        }
        return ProviderTokenVault(key: key)
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
