import JOSE

/// The authorization server's RFC 8414 metadata: what a client reads to find its endpoints.
public enum AuthorizationServerMetadata {
    /// The endpoints' paths, under the issuer.
    public static let authorizationPath = "/api/auth/oauth/authorize"
    public static let tokenPath = "/api/auth/oauth/token"
    public static let revocationPath = "/api/auth/oauth/revoke"
    public static let consentPath = "/api/auth/oauth/consent"
    public static let registrationPath = "/api/auth/oauth/register"

    /// The document for `issuer` (no trailing `/`).
    ///
    /// - Parameters:
    ///   - scopes: every scope some MCP route offers.
    ///   - signingAlgorithms: the algorithms of the gateway's keys.
    ///   - confidentialClients: some configured client has a secret (`client_secret_basic` and `_post` are offered).
    ///   - identityAssertionGrants: some trusted issuer has `enterprise_authorization` (the jwt-bearer grant is offered).
    public static func document(issuer: String, jwksURI: String, scopes: [String], signingAlgorithms: [String], registration: Bool, clientMetadataDocuments: Bool, confidentialClients: Bool = false,
        identityAssertionGrants: Bool = false
    ) -> JSONObject {
        let authMethods: JSONValue = confidentialClients ? ["none", "client_secret_basic", "client_secret_post"] : ["none"]
        var document: JSONObject = [
            "issuer": .string(issuer),
            "authorization_endpoint": .string(issuer + authorizationPath),
            "token_endpoint": .string(issuer + tokenPath),
            "revocation_endpoint": .string(issuer + revocationPath),
            "jwks_uri": .string(jwksURI),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": authMethods,
            "revocation_endpoint_auth_methods_supported": authMethods,
            "authorization_response_iss_parameter_supported": true,
            "client_id_metadata_document_supported": .bool(clientMetadataDocuments),
            "scopes_supported": .array(scopes.map(JSONValue.string)),
            "access_token_signing_alg_values_supported": .array(signingAlgorithms.map(JSONValue.string)),
        ]
        if registration { document["registration_endpoint"] = .string(issuer + registrationPath) }
        if identityAssertionGrants {
            // The Enterprise-Managed Authorization extension: the grant, and its ID-JAG profile.
            document["grant_types_supported"] = ["authorization_code", "refresh_token", .string(OAuthTokenService.jwtBearerGrantType)]
            document["authorization_grant_profiles_supported"] = ["urn:ietf:params:oauth:grant-profile:id-jag"]
        }
        return document
    }
}
