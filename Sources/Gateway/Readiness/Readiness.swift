import DataPlane
import EdgeHTTP
import Hummingbird
import JOSE
import RuntimeAPI
import RuntimeAccess
import TrustedIssuers

/// `/readyz`: the background checks' last results, answered at once.
///
/// 200 when the store and the Runtime passed their last check, else 503
/// `unavailable` naming what is down by name (`store`, `runtime`). A trusted
/// issuer whose keys are missing is named under `checks.issuers` but leaves the
/// gateway ready: only its own users are refused. The public listener never
/// says where a dependency is; the admin listener (`detailed`) adds each
/// failure in the dependency's own words (the database's address, say) and how
/// long it has lasted, each trusted issuer's last fetch error (`issuer_errors`), and each
/// provider's last re-check of a session (`provider_rechecks`: its outcome, and since when it
/// could not be asked).
struct Readiness: Sendable {
    let monitor: DependencyMonitor
    let trustedIssuers: TrustedIssuers?
    /// The admin listener's answer says how the last reload ended (`nil`: not said).
    var reloads: ReloadStatus? = nil
    /// The admin listener's answer shows each provider's last re-check here (`nil`: not said).
    var providerRechecks: ProviderRecheckStatus? = nil

    func response(detailed: Bool) -> Response {
        let results = monitor.results
        let now = ContinuousClock.now
        var checks = JSONObject()
        var down: [String] = []
        for (name, check) in [("store", results.store), ("runtime", results.runtime)] {
            guard let check else {
                checks[name] = "pending"
                down.append(name)
                continue
            }
            checks[name] = .string(check.state)
            if !check.ok { down.append(name) }
            if detailed, !check.ok {
                checks[name + "_error"] = .string(check.detail ?? check.state)
                checks[name + "_down_seconds"] = .number(Double(Int((now - check.since).components.seconds)))
            }
        }
        if let trustedIssuers, !trustedIssuers.isEmpty {
            var issuers = JSONObject()
            var errors = JSONObject()
            for status in trustedIssuers.statuses {
                issuers[status.issuer] = .string(status.usable ? "ok" : "unavailable")
                // Why a provider's keys cannot be fetched (its URL, the error) is the operator's to read, here only.
                if detailed, let error = status.lastError { errors[status.issuer] = .string(error) }
            }
            checks["issuers"] = .object(issuers)
            if detailed, !errors.members.isEmpty { checks["issuer_errors"] = .object(errors) }
        }
        // A provider that cannot be asked keeps its sessions standing until recheck_unavailable_limit_minutes:
        // ready (the gateway serves everyone else), but the operator sees since when.
        if detailed, let rechecks = providerRechecks?.byProvider, !rechecks.isEmpty {
            var providers = JSONObject()
            for (name, entry) in rechecks.sorted(by: { $0.key < $1.key }) {
                var shown: JSONObject = ["last_outcome": .string(entry.outcome), "at": .string(RFC3339.format(entry.at))]
                if let since = entry.failingSince { shown["failing_since"] = .string(RFC3339.format(since)) }
                providers[name] = .object(shown)
            }
            checks["provider_rechecks"] = .object(providers)
        }
        // A reload the gateway refused leaves it serving the configuration before: ready, but the operator must know.
        if detailed, let last = reloads?.last {
            var reload: JSONObject = ["status": .string(last.succeeded ? "applied" : "failed"), "at": .string(RFC3339.format(last.at))]
            if let error = last.error { reload["error"] = .string(error) }
            if !last.restartKeys.isEmpty { reload["restart_needed_for"] = .array(last.restartKeys.map { .string($0) }) }
            checks["last_reload"] = .object(reload)
        }
        if down.isEmpty { return JSONBody.response(["status": "ready", "checks": .object(checks)]) }
        let message =
            results.checkedAt == nil
            ? "not ready: the first checks of the store and the Runtime have not finished; try again in a moment"
            : "not ready: the \(down.joined(separator: " and the ")) \(down.count == 1 ? "is" : "are") unavailable; see checks"
        var body = GatewayError(.serviceUnavailable, "unavailable", message).json
        if case .object(var object) = body {
            object["checks"] = .object(checks)
            body = .object(object)
        }
        return JSONBody.response(body, status: .serviceUnavailable)
    }
}
