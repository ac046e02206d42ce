import HTTPTypes
import Hummingbird
import Observability
import TrafficCop

/// The Traffic Cop as the routes use it: rate limits by rule and key, and
/// admission of session intents, each refusal counted and answered as HTTP.
struct Admission: Sendable {
    let validator: SessionIntentValidator
    let rateLimits: AdmissionRateLimits
    let clientAddresses: ClientAddressResolver
    let metrics: GatewayMetrics

    /// The client's address for rate limits (peer, or `X-Forwarded-For` from a trusted proxy).
    func clientAddress(_ request: Request, _ context: GatewayRequestContext) -> String {
        clientAddresses.clientAddress(peer: context.peerAddress, forwardedFor: request.headers[values: HTTPField.Name("X-Forwarded-For")!])
    }

    /// Takes a token from `rule`'s bucket for `key`, or throws 429.
    func limit(_ rule: AdmissionRateLimits.Rule, key: String) throws {
        let decision = rateLimits.admit(rule, key: key)
        guard decision.allowed else {
            metrics.rateLimited(rule: rule.rawValue)
            throw GatewayError.rateLimited(retryAfter: decision.retryAfter)
        }
    }

    /// Admits `intent`, or throws the Traffic Cop's refusal as an HTTP error.
    func admit(_ intent: SessionIntent) throws -> AdmittedSessionIntent {
        do {
            return try validator.admit(intent)
        } catch {
            throw GatewayError(error)
        }
    }
}
