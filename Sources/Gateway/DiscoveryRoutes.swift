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
        router.get("/.well-known/openapi.yaml") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "application/yaml; charset=utf-8", .cacheControl: "public, max-age=300"],
                body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.text)))
        }
        router.get("/healthz") { _, _ -> Response in JSONBody.response(["status": "ok"]) }
        router.get("/readyz") { _, _ -> Response in readiness.response(detailed: false) }
    }

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
