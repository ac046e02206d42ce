import HTTPTypes
import Observability
import RuntimeAPI
import SecurityGuard

/// The Bearer token of a request, checked, with every refusal counted by reason.
package struct CallerAuthentication: Sendable {
    package let authenticator: AccessTokenAuthenticator
    package let metrics: GatewayMetrics

    package init(authenticator: AccessTokenAuthenticator, metrics: GatewayMetrics) {
        self.authenticator = authenticator
        self.metrics = metrics
    }

    /// Counts a refused token by its reason.
    package static func record(_ failure: AuthenticationFailure, in metrics: GatewayMetrics) {
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
    ///
    /// - Parameter namingClient: whether the assertion names the token's client (an MCP route's do).
    package init(_ caller: AuthenticatedCaller, sessionID: String?, namingClient: Bool = false) {
        self.init(
            userID: caller.userID, tenantID: caller.tenantID, sessionID: sessionID,
            identityProvider: caller.external.map { ($0.issuer, $0.subject) }, clientID: namingClient ? caller.clientID : nil)
    }
}
