import HTTPTypes
import Hummingbird
import Observability
import RuntimeAPI
import SecurityGuard

/// The Bearer token of a request, checked, with every refusal counted by reason.
struct CallerAuthentication: Sendable {
    let authenticator: AccessTokenAuthenticator
    let metrics: GatewayMetrics

    /// The caller a required Bearer token proves.
    func requireCaller(_ request: Request) async throws -> AuthenticatedCaller {
        guard let caller = try await optionalCaller(request) else {
            metrics.tokenRejected(reason: "missing")
            throw GatewayError(AuthenticationFailure.missing)
        }
        return caller
    }

    /// The caller if a Bearer token was sent (it must then be valid); `nil` if none was.
    func optionalCaller(_ request: Request) async throws -> AuthenticatedCaller? {
        do {
            guard let token = try AccessTokenAuthenticator.bearerToken(fromAuthorization: request.headers[.authorization]) else { return nil }
            return try await authenticator.authenticate(token)
        } catch let failure as AuthenticationFailure {
            Self.record(failure, in: metrics)
            throw GatewayError(failure)
        }
    }

    /// Counts a refused token by its reason.
    static func record(_ failure: AuthenticationFailure, in metrics: GatewayMetrics) {
        switch failure {
        case .invalid(let error): metrics.tokenRejected(reason: error.reason.rawValue)
        case .missing: metrics.tokenRejected(reason: "missing")
        case .revoked: metrics.tokenRejected(reason: "revoked")
        case .sessionIDGiven: metrics.tokenRejected(reason: "session_id_given")
        case .refreshTokenGiven: metrics.tokenRejected(reason: "refresh_token_given")
        case .issuerUnavailable: metrics.tokenRejected(reason: "issuer_unavailable")
        case .tenantNotAllowed: metrics.tokenRejected(reason: "tenant_forbidden")
        }
    }
}

extension RuntimeCaller {
    /// The caller as an assertion names it: user, tenant, the session vouched for, and the identity provider's pair.
    init(_ caller: AuthenticatedCaller, sessionID: String?) {
        self.init(
            userID: caller.userID, tenantID: caller.tenantID, sessionID: sessionID,
            identityProvider: caller.external.map { ($0.issuer, $0.subject) })
    }
}
