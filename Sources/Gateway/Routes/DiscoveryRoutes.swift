import DataPlane
import EdgeHTTP
import EmbeddedAssets
import Hummingbird
import JOSE
import RuntimeAPI

/// `/.well-known/*` and the health probes.
struct DiscoveryRoutes: Sendable {
    let keys: LiveKeyRing
    let issuer: String
    let jwksURL: String
    /// Answers `/readyz` from the background checks' last results.
    let readiness: Readiness

    func register(on router: Router<GatewayRequestContext>) {
        router.get("/.well-known/jwks.json") { _, _ -> Response in
            var response = JSONBody.response(.object(keys.keySet.publicJWKS()))
            response.headers[.cacheControl] = "public, max-age=300"
            return response
        }
        router.get("/.well-known/oauth-authorization-server") { _, _ -> Response in
            JSONBody.response(metadata())
        }
        let document = Self.openAPIDocument
        router.get("/.well-known/openapi.yaml") { request, _ -> Response in
            guard let document else { throw GatewayError(.internalServerError, "internal_error", "the OpenAPI document could not be prepared; see the gateway's log") }
            return document.response(for: request)
        }
        router.get("/healthz") { _, _ -> Response in JSONBody.response(["status": "ok"]) }
        router.get("/readyz") { _, _ -> Response in readiness.response(detailed: false) }
    }

    /// The embedded document, its bytes and ETag made once (`nil` only if libcrypto cannot hash).
    static let openAPIDocument = StaticAsset(text: OpenAPIDocument.text, contentType: "application/yaml; charset=utf-8", cacheControl: "public, max-age=300")

    /// RFC 8414 subset. The endpoints take JSON bodies, not OAuth form posts;
    /// the `portcullis_*` members name them plainly.
    func metadata() -> JSONValue {
        let base = issuer.trimmingTrailingSlash
        let algorithms = Array(Set(keys.keySet.entries.map(\.key.algorithm.rawValue))).sorted()
        return [
            "issuer": .string(issuer),
            "jwks_uri": .string(jwksURL),
            "token_endpoint": .string(base + "/api/auth/login"),
            "portcullis_refresh_endpoint": .string(base + "/api/auth/refresh"),
            "portcullis_logout_endpoint": .string(base + "/api/auth/logout"),
            "grant_types_supported": ["password", "refresh_token"],
            "response_types_supported": [],
            "token_endpoint_auth_methods_supported": ["none"],
            "access_token_signing_alg_values_supported": .array(algorithms.map(JSONValue.string)),
        ]
    }
}
