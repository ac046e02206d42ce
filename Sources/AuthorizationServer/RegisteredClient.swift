/// A client the authorization server knows: its id, the name a person reads at consent, and the
/// redirect URIs it may be sent back to.
public struct RegisteredClient: Sendable, Equatable {
    /// How the server came to know it.
    public enum Source: String, Sendable, Equatable {
        /// `authorization_server.clients` in the configuration.
        case configured
        /// Registered by the client itself (RFC 7591): its name is its own claim, unverified.
        case dynamic
        /// Described by a Client ID Metadata Document: its `client_id` is the document's URL.
        case metadataDocument
    }

    public let clientID: String
    public let name: String
    public let redirectURIs: [String]
    public let source: Source
    /// For a metadata document's client: the host it was fetched from (the name is that host's claim).
    public let metadataHost: String?
    /// A confidential client's secret (`client_secret_file`, configured clients only): it must
    /// authenticate at the token and revocation endpoints. `nil`: a public client (PKCE alone).
    public let secret: ClientSecret?

    public init(clientID: String, name: String, redirectURIs: [String], source: Source, metadataHost: String? = nil, secret: ClientSecret? = nil) {
        self.secret = secret
        self.clientID = clientID
        self.name = name
        self.redirectURIs = redirectURIs
        self.source = source
        self.metadataHost = metadataHost
    }
}

extension Optional {
    /// The wrapped value mapped by an async `transform`.
    package func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
