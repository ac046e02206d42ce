import Hummingbird
import JOSE
import ProviderLogin

/// `/api/auth/providers` and (as the sign-in flow is built) `/api/auth/oidc/*`: signing the
/// browser in through a trusted provider.
struct ProviderLoginRoutes: Sendable {
    let directory: ProviderDirectory

    func register(on router: Router<GatewayRequestContext>) {
        router.get("/api/auth/providers") { _, _ in providers() }
    }

    /// The providers users may sign in through, in configuration order (an empty list when none).
    func providers() -> Response {
        let list: [JSONValue] = directory.providers.map { provider in
            ["name": .string(provider.name), "display_name": .string(provider.displayName), "issuer": .string(provider.issuer)]
        }
        return JSONBody.response(["providers": .array(list)])
    }
}
