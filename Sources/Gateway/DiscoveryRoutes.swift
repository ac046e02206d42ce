import Hummingbird
import JOSE

/// `/.well-known/*` and the health probes.
struct DiscoveryRoutes: Sendable {
    let services: GatewayServices

    func register(on router: Router<GatewayRequestContext>) {
        router.get("/.well-known/jwks.json") { _, _ -> Response in
            var response = GatewayServices.json(.object(services.keys.keySet.publicJWKS()))
            response.headers[.cacheControl] = "public, max-age=300"
            return response
        }
        router.get("/.well-known/oauth-authorization-server") { _, _ -> Response in
            GatewayServices.json(metadata())
        }
        router.get("/healthz") { _, _ -> Response in GatewayServices.json(["status": "ok"]) }
        router.get("/readyz") { _, _ -> Response in try await readiness() }
    }

    /// RFC 8414 subset. The endpoints take JSON bodies, not OAuth form posts;
    /// the `portcullis_*` members name them plainly.
    func metadata() -> JSONValue {
        let base = services.configuration.issuer.trimmingTrailingSlash
        let algorithms = Array(Set(services.keys.keySet.entries.map(\.key.algorithm.rawValue))).sorted()
        return [
            "issuer": .string(services.configuration.issuer),
            "jwks_uri": .string(services.configuration.jwksURL),
            "token_endpoint": .string(base + "/api/auth/login"),
            "portcullis_refresh_endpoint": .string(base + "/api/auth/refresh"),
            "portcullis_logout_endpoint": .string(base + "/api/auth/logout"),
            "grant_types_supported": ["password", "refresh_token"],
            "response_types_supported": [],
            "token_endpoint_auth_methods_supported": ["none"],
            "access_token_signing_alg_values_supported": .array(algorithms.map(JSONValue.string)),
        ]
    }

    /// 200 when the store and the Runtime answer, else 503 naming what is down.
    func readiness() async throws -> Response {
        var checks = JSONObject()
        var ready = true
        do {
            try await services.state.ping()
            checks["store"] = "ok"
        } catch {
            checks["store"] = "unavailable"
            ready = false
        }
        do {
            try await services.runtime.checkHealth()
            checks["runtime"] = "ok"
        } catch let error as GatewayError {
            checks["runtime"] = .string(error.code)
            ready = false
        }
        if ready { return GatewayServices.json(["status": "ready", "checks": .object(checks)]) }
        var body = GatewayError(.serviceUnavailable, "unavailable", "not ready: a dependency does not answer; see checks").json
        if case .object(var object) = body {
            object["checks"] = .object(checks)
            body = .object(object)
        }
        return GatewayServices.json(body, status: .serviceUnavailable)
    }
}
