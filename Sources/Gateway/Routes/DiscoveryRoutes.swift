import AuthorizationServer
import DataPlane
import EdgeHTTP
import EmbeddedAssets
import Hummingbird
import JOSE
import TrustedIssuers
import MCPResource
import Observability
import RuntimeAPI

/// `/.well-known/*` and the health probes.
struct DiscoveryRoutes: Sendable {
    let keys: LiveKeyRing
    let issuer: String
    let jwksURL: String
    /// Answers `/readyz` from the background checks' last results.
    let readiness: Readiness
    /// The routes in force, for the MCP servers' protected resource metadata.
    let routes: LiveRouteTable
    /// `authorization_server.dynamic_registration`: the metadata names the registration endpoint.
    let dynamicRegistration: Bool
    /// `authorization_server.client_metadata_hosts` is not empty: Client ID Metadata Documents are fetched.
    let clientMetadataDocuments: Bool
    /// Some configured client has a secret: the metadata offers `client_secret_basic` and `client_secret_post`.
    let confidentialClients: Bool
    /// The trusted issuers: with one marked `enterprise_authorization`, the metadata offers the identity assertion grant.
    let trusted: TrustedIssuers?

    func register(on router: Router<GatewayRequestContext>) {
        router.get("/.well-known/jwks.json") { _, _ -> Response in
            var response = JSONBody.response(.object(keys.keySet.publicJWKS()))
            response.headers[.cacheControl] = "public, max-age=300"
            return response
        }
        // RFC 8414. Not at /.well-known/openid-configuration: the gateway is no OpenID Provider
        // (it issues no ID token), and OpenID Discovery's required members would claim it is. An
        // MCP client looks at oauth-authorization-server first, and finds it.
        router.get("/.well-known/oauth-authorization-server") { _, _ -> Response in
            var response = JSONBody.response(metadata())
            response.headers[.accessControlAllowOrigin] = "*"
            return response
        }
        // RFC 9728 §3.1: the metadata of the resource whose path follows the well-known one, on its own host.
        router.get(RouterPath(ProtectedResourceMetadata.wellKnownPath)) { request, _ -> Response in
            try protectedResourceMetadata(host: request.head.authority, resourcePath: "")
        }
        router.get(RouterPath(ProtectedResourceMetadata.wellKnownPath + "/**")) { request, _ -> Response in
            let path = request.uri.path
            return try protectedResourceMetadata(host: request.head.authority, resourcePath: path.dropFirst(ProtectedResourceMetadata.wellKnownPath.utf8.count))
        }
        let document = Self.openAPIDocument
        router.get("/.well-known/openapi.yaml") { request, _ -> Response in
            guard let document else { throw GatewayError(.internalServerError, "internal_error", "the OpenAPI document could not be prepared; see the gateway's log") }
            return document.response(for: request)
        }
        router.get("/healthz") { _, _ -> Response in JSONBody.response(["status": "ok"]) }
        router.get("/readyz") { _, _ -> Response in readiness.response(detailed: false) }
    }

    /// The protected resource metadata of the MCP route whose canonical URL has `resourcePath` on `host`.
    ///
    /// Found as a request for that path would find its route, and only when the route is an MCP
    /// server and the path is its prefix exactly: a path below an MCP server is no resource of its own.
    func protectedResourceMetadata(host: String?, resourcePath: Substring) throws -> Response {
        let table = routes.current
        let asked = resourcePath.isEmpty ? "/" : resourcePath
        guard let (route, _) = table.route(host: host, path: asked), let resource = route.mcp, route.prefix[...] == resourcePath else {
            throw GatewayError(
                .notFound, "not_found",
                "no MCP server is served at \(PathRedaction.redactedPath(String(asked))) on this host; the metadata's path is /.well-known/oauth-protected-resource followed by the MCP route's path")
        }
        var response = JSONBody.response(ProtectedResourceMetadata.document(for: resource, authorizationServer: issuer))
        response.headers[.cacheControl] = "public, max-age=60"
        // A public document: browser-based MCP clients read it from their own origin.
        response.headers[.accessControlAllowOrigin] = "*"
        return response
    }

    /// The embedded document, its bytes and ETag made once (`nil` only if libcrypto cannot hash).
    static let openAPIDocument = StaticAsset(text: OpenAPIDocument.text, contentType: "application/yaml; charset=utf-8", cacheControl: "public, max-age=300")

    /// The authorization server's RFC 8414 metadata (`AuthorizationServerMetadata`), with the
    /// gateway's own JSON endpoints beside it as `portcullis_*` members.
    func metadata() -> JSONValue {
        let base = issuer.trimmingTrailingSlash
        let algorithms = Array(Set(keys.keySet.entries.map(\.key.algorithm.rawValue))).sorted()
        var scopes: [String] = []
        for resource in routes.current.routes.compactMap(\.mcp) { for scope in resource.supportedScopes where !scopes.contains(scope) { scopes.append(scope) } }
        var document = AuthorizationServerMetadata.document(issuer: base, jwksURI: jwksURL, scopes: scopes, signingAlgorithms: algorithms, registration: dynamicRegistration, clientMetadataDocuments: clientMetadataDocuments,
            confidentialClients: confidentialClients,             // Offered only when it can be used: an issuer marked, and a confidential client to present it.
            identityAssertionGrants: confidentialClients && !(trusted?.enterpriseAuthorizationIssuers.isEmpty ?? true))
        document["portcullis_login_endpoint"] = .string(base + "/api/auth/login")
        document["portcullis_refresh_endpoint"] = .string(base + "/api/auth/refresh")
        document["portcullis_logout_endpoint"] = .string(base + "/api/auth/logout")
        return .object(document)
    }
}
