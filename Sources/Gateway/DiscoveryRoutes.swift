import Hummingbird
import JOSE
import RuntimeAPI
import StateSurface
import TrustedIssuers

/// `/.well-known/*` and the health probes.
struct DiscoveryRoutes: Sendable {
    let keys: LiveKeyRing
    let issuer: String
    let jwksURL: String
    /// The gateway's own store (accounts and credentials), for readiness.
    let store: any CredentialRepository
    let runtime: RuntimeClient
    /// The trusted identity providers, named in readiness (a provider down leaves the gateway ready).
    let trustedIssuers: TrustedIssuers?

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
                body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.yaml)))
        }
        router.get("/healthz") { _, _ -> Response in JSONBody.response(["status": "ok"]) }
        router.get("/readyz") { _, _ -> Response in try await readiness() }
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

    /// 200 when the store and the Runtime answer, else 503 naming what is down.
    func readiness() async throws -> Response {
        var checks = JSONObject()
        var ready = true
        var storeProblem: String? = nil
        do {
            try await store.ping()
            checks["store"] = "ok"
        } catch {
            checks["store"] = "unavailable"
            // The store's own message names it (`PostgreSQL at postgresql://host:port/db ...`), never a credential.
            storeProblem = (error as? StateSurfaceError)?.message ?? "the gateway's store does not answer"
            checks["store_error"] = .string(storeProblem!)
            ready = false
        }
        do {
            try await runtime.checkHealth()
            checks["runtime"] = "ok"
        } catch let refusal as RuntimeRefusal {
            checks["runtime"] = .string(refusal.code.rawValue)
            checks["runtime_error"] = .string(refusal.message)  // the Runtime's store, named
            ready = false
        } catch {
            checks["runtime"] = .string((error as? GatewayError)?.code ?? "unavailable")
            ready = false
        }
        // Each trusted issuer's keys, by issuer: its users get 503 while its keys are missing or stale,
        // but every other user is served, so the gateway stays ready.
        if let trustedIssuers {
            var issuers = JSONObject()
            for status in trustedIssuers.statuses {
                issuers[status.issuer] = .string(status.usable ? "ok" : "unavailable")
            }
            checks["issuers"] = .object(issuers)
        }
        if ready { return JSONBody.response(["status": "ready", "checks": .object(checks)]) }
        let message = storeProblem.map { "not ready: \($0)" } ?? "not ready: a dependency does not answer; see checks"
        var body = GatewayError(.serviceUnavailable, "unavailable", message).json
        if case .object(var object) = body {
            object["checks"] = .object(checks)
            body = .object(object)
        }
        return JSONBody.response(body, status: .serviceUnavailable)
    }
}
