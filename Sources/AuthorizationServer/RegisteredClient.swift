/// A client the authorization server knows: its id, the name a person reads at consent, and the
/// redirect URIs it may be sent back to.
public struct RegisteredClient: Sendable, Equatable {
    /// How the server came to know it.
    public enum Source: String, Sendable, Equatable {
        /// `authorization_server.clients` in the configuration.
        case configured
    }

    public let clientID: String
    public let name: String
    public let redirectURIs: [String]
    public let source: Source

    public init(clientID: String, name: String, redirectURIs: [String], source: Source) {
        self.clientID = clientID
        self.name = name
        self.redirectURIs = redirectURIs
        self.source = source
    }
}
