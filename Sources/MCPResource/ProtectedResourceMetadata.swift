import JOSE

/// A resource's RFC 9728 metadata: what a client reads after a 401 to find where to sign in.
public enum ProtectedResourceMetadata {
    /// The well-known path the metadata lies under (RFC 9728 §3).
    public static let wellKnownPath = "/.well-known/oauth-protected-resource"

    /// The document for `resource`, naming `authorizationServer` (the gateway's issuer) as the one
    /// server its tokens come from.
    public static func document(for resource: MCPResource, authorizationServer: String) -> JSONValue {
        [
            "resource": .string(resource.identifier),
            "authorization_servers": [.string(authorizationServer)],
            "scopes_supported": .array(resource.supportedScopes.map(JSONValue.string)),
            "bearer_methods_supported": ["header"],
            "resource_name": .string(resource.name),
        ]
    }
}
