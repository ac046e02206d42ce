import ConfigurationReading
import ProviderLogin

/// The connections in force, each with the gateway's client credential at its service (read at
/// start from an owner-only file), and the vault that seals people's tokens.
public struct ConnectionDirectory: Sendable {
    /// One connection, ready to use.
    public struct Connection: Sendable {
        public let settings: ConnectionSettings
        /// The gateway as the service's client.
        public let client: TokenEndpointClient
    }

    /// No connection configured.
    public static let none = ConnectionDirectory()

    /// In configuration order.
    public let connections: [Connection]
    /// Seals the tokens; `nil` when no connection is configured (no key file is made for nothing).
    public let vault: ConnectionTokenVault?

    private init() {
        connections = []
        vault = nil
    }

    /// Reads every connection's client secret and, when there is any connection and a keys
    /// directory is given, the sealing key there (made on first start; `config check` gives none,
    /// so it makes nothing).
    ///
    /// - Throws: `ConfigurationError` naming `connections[N].client_secret_file` or `keys.directory`.
    public init(_ configuration: ConnectionsConfiguration, keysDirectory: String?) throws(ConfigurationError) {
        var connections: [Connection] = []
        for (index, settings) in configuration.connections.enumerated() {
            let credential = try ClientCredential.secret(file: settings.clientSecretFile, key: "connections[\(index)].client_secret_file")
            connections.append(Connection(settings: settings, client: TokenEndpointClient(clientID: settings.clientID, credential: credential, caFile: settings.caFile)))
        }
        self.connections = connections
        vault = try keysDirectory.flatMap { directory throws(ConfigurationError) in
            connections.isEmpty ? nil : try ConnectionTokenVault.load(keysDirectory: directory)
        }
    }

    /// The connection named `name`.
    public func connection(named name: String) -> Connection? {
        connections.first { $0.settings.name == name }
    }

    public var isEmpty: Bool { connections.isEmpty }
}
