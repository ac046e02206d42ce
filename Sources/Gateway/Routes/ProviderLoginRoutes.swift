import EdgeHTTP
import Hummingbird
import JOSE
import Logging
import ProviderLogin
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import StateSurface
import TrafficCop
import TrustedIssuers

/// `/api/auth/providers` and `/api/auth/oidc/*`: signing the browser in through a trusted
/// provider (the OpenID Connect code flow; issue 37, being built: the callback and the
/// completion come next).
struct ProviderLoginRoutes: Sendable {
    let directory: ProviderDirectory
    let trustedIssuers: TrustedIssuers?
    let flows: any LoginFlowRepository
    let admission: Admission
    let runtime: RuntimeClient
    let body: JSONBody
    let clock: any TokenClock
    let logger: Logger
    /// `{public_url}/api/auth/oidc/callback`.
    let redirectURI: String
    /// The origins a sign-in may return to.
    let returnOrigins: [String]

    func register(on router: Router<GatewayRequestContext>) {
        router.get("/api/auth/providers") { _, _ in providers() }
        router.post("/api/auth/oidc/:name/start") { request, context in try await start(request, context) }
    }

    /// The providers users may sign in through, in configuration order (an empty list when none).
    func providers() -> Response {
        let list: [JSONValue] = directory.providers.map { provider in
            ["name": .string(provider.name), "display_name": .string(provider.displayName), "issuer": .string(provider.issuer)]
        }
        return JSONBody.response(["providers": .array(list)])
    }

    /// Starts a sign-in: checks the anonymous session, keeps the flow, answers the provider's authorization URL.
    func start(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try admission.limit(.loginPerClient, key: admission.clientAddress(request, context))
        let name = context.parameters.get("name") ?? ""
        guard let provider = directory.provider(named: name) else {
            throw GatewayError(.notFound, "provider_not_found", "no provider named \(JSONValue.clip(name)) is configured for sign-in; GET /api/auth/providers lists them")
        }
        let body = try await body.object(request)
        let sessionID = try GatewayError.checkedSessionID(try body.optionalString("session_id"))
        let returnTo = try body.requiredString("return_to")
        let challenge = try body.requiredString("login_challenge")
        guard let endpoints = trustedIssuers?.endpoints(issuer: provider.issuer) else {
            var error = GatewayError(
                .serviceUnavailable, "issuer_unavailable", "the provider's discovery document has not been read yet, or names no sign-in endpoints; try again shortly")
            error.retryAfter = 5
            throw error
        }
        // The session is upgraded at the end of the flow: it must be anonymous now (an owned one cannot change hands).
        let signedIn = GatewayError(.conflict, "session_conflict", "the session is signed in already; start a sign-in from an anonymous session")
        do {
            let session = try await runtime.session(admission.admit(SessionIntent(.read, principal: nil, sessionID: sessionID)))
            guard session.state == .anonymous else { throw signedIn }
        } catch let refusal as RuntimeRefusal where refusal.code == .sessionForbidden {
            // Read without an owner, an owned session is forbidden: it is signed in.
            throw signedIn
        }
        let start: LoginStart
        do {
            start = try LoginStart(
                provider: provider, endpoints: endpoints, redirectURI: redirectURI, sessionID: sessionID, returnTo: returnTo,
                loginChallenge: challenge, returnOrigins: returnOrigins, now: clock.now())
        } catch let refusal as LoginStart.Refusal {
            throw GatewayError(.badRequest, refusal.code, refusal.message)
        }
        try await flows.insertLoginFlow(start.flow)
        logger.info("provider sign-in started", metadata: ["provider": "\(provider.name)"])
        return JSONBody.response(["authorization_url": .string(start.authorizationURL)], noStore: true)
    }
}
