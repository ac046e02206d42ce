import EdgeHTTP
import HTTPTypes
import Observability
import TrafficCop

/// The Traffic Cop as the routes use it: rate limits by rule and key, and
/// admission of session intents, each refusal counted and answered as HTTP.
package struct Admission: Sendable {
    package let validator: SessionIntentValidator
    let rateLimits: AdmissionRateLimits
    package let clientAddresses: ClientAddressResolver
    let metrics: GatewayMetrics

    package init(validator: SessionIntentValidator, rateLimits: AdmissionRateLimits, clientAddresses: ClientAddressResolver, metrics: GatewayMetrics) {
        self.validator = validator
        self.rateLimits = rateLimits
        self.clientAddresses = clientAddresses
        self.metrics = metrics
    }

    /// Puts reloaded rate limits in force; the buckets are kept.
    package func apply(rateLimits settings: AdmissionRateLimits.Settings) {
        rateLimits.apply(settings)
    }

    /// Takes a token from `rule`'s bucket for `key`, or throws 429.
    package func limit(_ rule: AdmissionRateLimits.Rule, key: String) throws {
        let decision = rateLimits.admit(rule, key: key)
        guard decision.allowed else {
            metrics.rateLimited(rule: rule.rawValue)
            throw GatewayError.rateLimited(retryAfter: decision.retryAfter)
        }
    }

    /// Admits `intent`, or throws the Traffic Cop's refusal as an HTTP error.
    package func admit(_ intent: SessionIntent) throws -> AdmittedSessionIntent {
        do {
            return try validator.admit(intent)
        } catch {
            throw GatewayError(error)
        }
    }
}
