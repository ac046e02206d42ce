import ConfigurationReading
import JOSE
import ProviderLogin

/// Seals the tokens people's connected accounts hold, AES-256-GCM under
/// `keys/connection-tokens.key` (made on first start, shared by every instance, as
/// `provider-tokens.key` is).
///
/// Each sealed value is bound to its person, tenant, connection and kind: a token copied to
/// another person's row, or from the refresh column to the access column, does not open.
public struct ConnectionTokenVault: Sendable {
    /// The file under the keys directory.
    public static let fileName = "connection-tokens.key"
    private let key: SealingKey

    public init(key: SealingKey) {
        self.key = key
    }

    /// What a sealed value is.
    public enum Kind: String, Sendable {
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
    }

    /// Whose account at which connection a value belongs to.
    public struct Owner: Sendable, Hashable {
        public let userID: String
        public let tenantID: String
        public let connection: String

        public init(userID: String, tenantID: String, connection: String) {
            self.userID = userID
            self.tenantID = tenantID
            self.connection = connection
        }
    }

    /// Reads the key in `directory`, making it when there is none.
    ///
    /// - Throws: `ConfigurationError` naming the file when it cannot be read, is readable by
    ///   others, or does not hold 32 bytes.
    public static func load(keysDirectory directory: String) throws(ConfigurationError) -> ConnectionTokenVault {
        ConnectionTokenVault(key: try SealingKeyFile.load(directory + "/" + fileName, consequence: "people then connect their accounts again"))
    }

    public func seal(_ token: String, kind: Kind, for owner: Owner) throws -> String {
        try key.seal(Array(token.utf8), context: Self.context(kind, owner))
    }

    /// The token, or `nil` when `sealed` was not sealed by this key for this owner and kind.
    public func open(_ sealed: String, kind: Kind, for owner: Owner) -> String? {
        key.open(sealed, context: Self.context(kind, owner)).map { String(decoding: $0, as: UTF8.self) }
    }

    // The parts are joined by a newline, which none of them holds (ids, a tenant, a checked name).
    static func context(_ kind: Kind, _ owner: Owner) -> String {
        "portcullis connection \(kind.rawValue)\n\(owner.tenantID)\n\(owner.userID)\n\(owner.connection)"
    }
}
