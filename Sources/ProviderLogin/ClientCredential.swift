import ConfigurationReading
import JOSE
import TrustedIssuers

/// How the gateway proves itself at one provider's token endpoint, read from the file the
/// configuration names (owner-only, as every credential file).
public enum ClientCredential: Sendable {
    /// `client_secret_basic`: the secret's bytes (a trailing newline left out).
    case secret([UInt8])
    /// `private_key_jwt`: the key that signs the client assertion.
    case privateKey(JWSKey)

    /// The algorithms a `private_key_file` is tried as, in order: the first its key type fits.
    static let privateKeyAlgorithms: [JWSAlgorithm] = [.rs256, .es256, .es384, .es512, .eddsa]

    /// A `client_secret_basic` secret read from `file` (owner-only), its trailing newline left out.
    ///
    /// - Parameter key: the configuration key that names the file, for messages.
    public static func secret(file: String, key: String) throws(ConfigurationError) -> ClientCredential {
        var bytes = try OwnerOnlyFile.read(file, key: key)
        // A secret pasted with `echo` ends in a newline that was never part of it.
        while bytes.last == UInt8(ascii: "\n") || bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard !bytes.isEmpty else { throw ConfigurationError(fileKey: key, "names \(file), which holds only a newline") }
        return .secret(bytes)
    }

    /// Reads the credential of `settings`.
    ///
    /// - Parameter key: the configuration key of the provider's `login` map, for messages.
    /// - Throws: `ConfigurationError` naming `KEY.client_secret_file` or `KEY.private_key_file`.
    public static func load(_ settings: ProviderLoginSettings, key: String) throws(ConfigurationError) -> ClientCredential {
        switch settings.authentication {
        case .secretBasic(let file):
            return try secret(file: file, key: key + ".client_secret_file")
        case .privateKeyJWT(let file):
            let bytes = try OwnerOnlyFile.read(file, key: key + ".private_key_file")
            let pem = String(decoding: bytes, as: UTF8.self)
            for algorithm in privateKeyAlgorithms {
                if let key = try? JWSKey(pem: pem, algorithm: algorithm), key.canSign {
                    return .privateKey(key)
                }
            }
            throw ConfigurationError(
                fileKey: key + ".private_key_file", "names \(file), which holds no PEM private key the gateway can sign with (RSA, EC P-256/384/521 or Ed25519)")
        }
    }
}
