import Metrics
import Prometheus
import Synchronization

/// The gateway's metrics, through swift-metrics into a Prometheus registry.
///
/// An explicit factory rather than the global `MetricsSystem`, so each
/// gateway (and each test) has its own registry, exposed at `/metrics` on the
/// admin listener. Labels are bounded: route templates, never raw paths.
public struct GatewayMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    package let factory: PrometheusMetricsFactory
    /// Handles made once per label set: the request path must not re-create (and re-validate) metrics.
    package let handles = MetricHandles()
    /// Sockets open now: changed twice per socket, so made once (20,000 sockets closing at once would otherwise make 20,000).
    package let openSocketsMeter: Meter
    /// WebSocket tunnels to routes open now.
    package let openTunnelsMeter: Meter
    /// MCP answers streaming now (SSE: a GET stream, a POST answered as events).
    package let openMCPStreamsMeter: Meter
    /// Connections the front handed on, by reason (`ConnectionHandOnReason`), made at start so both read 0 until then.
    private let handedOnForHead: Metrics.Counter
    private let handedOnForTarget: Metrics.Counter
    /// Beyond this many distinct names, calls are counted under `_other`.
    package static let maximumMCPNames = 256

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5),
        ]
        self.factory = factory
        openSocketsMeter = Meter(label: "portcullis_ws_open_sockets", dimensions: [], factory: factory)
        openTunnelsMeter = Meter(label: "portcullis_ws_open_tunnels", dimensions: [], factory: factory)
        openMCPStreamsMeter = Meter(label: "portcullis_mcp_open_streams", dimensions: [], factory: factory)
        handedOnForHead = Metrics.Counter(
            label: "portcullis_connections_handed_on_total", dimensions: [("reason", ConnectionHandOnReason.head.rawValue)], factory: factory)
        handedOnForTarget = Metrics.Counter(
            label: "portcullis_connections_handed_on_total", dimensions: [("reason", ConnectionHandOnReason.target.rawValue)], factory: factory)
    }

    /// An HTTP/1 connection the data plane's front handed on to NIO's pipeline (once a connection).
    package func connectionHandedOn(_ reason: ConnectionHandOnReason) {
        switch reason {
        case .head: handedOnForHead.increment()
        case .target: handedOnForTarget.increment()
        }
    }

    /// One answered request.
    package func request(route: String, method: String, status: Int, nanoseconds: Int64) {
        requestCounter(route: route, method: method, status: status).increment()
        requestTimer(route: route, method: method).recordNanoseconds(nanoseconds)
    }

    /// The counter of answered requests with these labels (made once).
    package func requestCounter(route: String, method: String, status: Int) -> Metrics.Counter {
        let factory = self.factory
        return handles.counter(MetricHandles.Key(route, method, status)) {
            Metrics.Counter(label: "portcullis_http_requests_total", dimensions: [("route", route), ("method", method), ("status", String(status))], factory: factory)
        }
    }

    /// The timer of answered requests with these labels (made once).
    package func requestTimer(route: String, method: String) -> Metrics.Timer {
        let factory = self.factory
        return handles.timer(MetricHandles.Key(route, method, 0)) {
            Metrics.Timer(label: "portcullis_http_request_duration_seconds", dimensions: [("route", route), ("method", method)], factory: factory)
        }
    }

    /// An access token refused, by the verifier's reason (or `missing`, `revoked`).
    package func tokenRejected(reason: String) {
        Counter(label: "portcullis_token_rejections_total", dimensions: [("reason", reason)], factory: factory).increment()
    }

    /// One MCP request decided: by route, JSON-RPC method, tool (or prompt or resource) and decision.
    ///
    /// The name label is bounded: the first `maximumMCPNames` distinct names, then `_other`.
    package func mcpCall(route: String, method: String, name: String?, decision: String) {
        mcpCallCounter(route: route, method: method, name: name, decision: decision).counter.increment()
    }

    /// The counter of one MCP label set (see `mcpCall`), and whether a caller may keep it under
    /// these labels: not when the name was counted as `_other`, or its table would grow with
    /// every name a client makes up.
    package func mcpCallCounter(route: String, method: String, name: String?, decision: String) -> (counter: Metrics.Counter, keepable: Bool) {
        let label: String
        if let name {
            label = handles.mcpNames.withLock { names in
                if names.contains(name) { return name }
                guard names.count < Self.maximumMCPNames else { return "_other" }
                names.insert(name)
                return name
            }
        } else {
            label = ""
        }
        let factory = self.factory
        // Made once per label set (the labels are bounded), as the request metrics are.
        let counter = handles.counter(MetricHandles.Key(route + "\u{0}" + method, label + "\u{0}" + decision, -1)) {
            Metrics.Counter(
                label: "portcullis_mcp_calls_total", dimensions: [("route", route), ("method", method), ("name", label), ("decision", decision)], factory: factory)
        }
        return (counter, name == nil || label == name)
    }

    /// A request refused by a rate limit.
    package func rateLimited(rule: String) {
        Counter(label: "portcullis_rate_limited_total", dimensions: [("rule", rule)], factory: factory).increment()
    }

    /// A proxied request refused by its route's policy (403 `insufficient_scope`).
    package func policyRefused() {
        Counter(label: "portcullis_policy_refusals_total", dimensions: [], factory: factory).increment()
    }

    /// A configuration reload's end: counted by result, and whether the last one was applied (1) or refused (0).
    package func reloaded(applied: Bool) {
        Counter(label: "portcullis_config_reloads_total", dimensions: [("result", applied ? "applied" : "refused")], factory: factory).increment()
        Gauge(label: "portcullis_config_last_reload_successful", dimensions: [], factory: factory).record(applied ? 1 : 0)
    }

    /// A login refused for its credentials.
    package func loginFailed() {
        Counter(label: "portcullis_login_failures_total", dimensions: [], factory: factory).increment()
    }

    /// A provider re-check of a session, by its provider and outcome: `accepted`, `refused`,
    /// `unavailable` (asked again later) or `gave_up` (unanswered for the limit: the session ended).
    package func providerRecheck(provider: String, outcome: String) {
        Counter(label: "portcullis_provider_rechecks_total", dimensions: [("provider", provider), ("outcome", outcome)], factory: factory).increment()
    }

    /// A refresh answered from the ownership view because the Runtime was down.
    package func refreshedDuringRuntimeOutage() {
        Counter(label: "portcullis_refreshes_during_runtime_outage_total", dimensions: [], factory: factory).increment()
    }

    /// A WebSocket upgrade refused before the 101, by error code or token reason.
    package func upgradeRefused(reason: String) {
        Counter(label: "portcullis_ws_upgrades_refused_total", dimensions: [("reason", reason)], factory: factory).increment()
    }

    /// Sockets open now (+1 on open, -1 on close).
    package func openSockets(_ delta: Int) {
        openSocketsMeter.increment(by: Double(delta))
    }

    /// A WebSocket tunnel to a route opened (its upstream answered 101).
    package func webSocketTunnelOpened() { openTunnelsMeter.increment(by: 1) }

    /// A WebSocket tunnel to a route closed.
    package func webSocketTunnelClosed() { openTunnelsMeter.decrement(by: 1) }

    /// An MCP answer began streaming (SSE).
    package func mcpStreamOpened() { openMCPStreamsMeter.increment(by: 1) }

    /// An MCP stream ended.
    package func mcpStreamClosed() { openMCPStreamsMeter.decrement(by: 1) }

    /// A relay failure (the Runtime went away, a frame could not be passed on).
    package func relayError(kind: String) {
        Counter(label: "portcullis_ws_relay_errors_total", dimensions: [("kind", kind)], factory: factory).increment()
    }

    /// A proxied request: its upstream, the status the client got, and the upstream's latency.
    package func proxied(upstream: String, status: Int, since started: ContinuousClock.Instant) {
        proxiedCounter(upstream: upstream, status: status).increment()
        upstreamTimer(upstream: upstream).recordNanoseconds((ContinuousClock.now - started).nanoseconds)
    }

    /// The counter of proxied requests to `upstream` answered `status` (made once).
    package func proxiedCounter(upstream: String, status: Int) -> Metrics.Counter {
        let factory = self.factory
        return handles.counter(MetricHandles.Key("proxy", upstream, status)) {
            Metrics.Counter(label: "portcullis_proxy_requests_total", dimensions: [("upstream", upstream), ("status", String(status))], factory: factory)
        }
    }

    /// The timer of `upstream`'s answers (made once).
    package func upstreamTimer(upstream: String) -> Metrics.Timer {
        let factory = self.factory
        return handles.timer(MetricHandles.Key("proxy", upstream, 0)) {
            Metrics.Timer(label: "portcullis_proxy_upstream_duration_seconds", dimensions: [("upstream", upstream)], factory: factory)
        }
    }

    /// Whether a dependency passed its last background check (1) or not (0).
    package func dependencyUp(_ dependency: String, _ up: Bool) {
        Gauge(label: "portcullis_dependency_up", dimensions: [("dependency", dependency)], factory: factory).record(up ? 1 : 0)
    }

    /// Whether a dependency's circuit is open (1: requests that need it are refused at once).
    package func circuitOpen(_ dependency: String, _ open: Bool) {
        Gauge(label: "portcullis_circuit_open", dimensions: [("dependency", dependency)], factory: factory).record(open ? 1 : 0)
    }

    /// Requests refused at once because a dependency's circuit was open or full.
    package func refusedFast(_ dependency: String, count: Int) {
        Counter(label: "portcullis_requests_refused_fast_total", dimensions: [("dependency", dependency)], factory: factory).increment(by: count)
    }

    /// The Prometheus text exposition.
    public func exposition() -> String { registry.emitToString() }
}

/// Metric handles by label set, made on first use.
package final class MetricHandles: Sendable {
    /// A label set: two strings and a number (route, method, status; or "proxy", upstream, status).
    package struct Key: Hashable, Sendable {
        let first: String
        let second: String
        let number: Int
        init(_ first: String, _ second: String, _ number: Int) {
            self.first = first
            self.second = second
            self.number = number
        }
    }

    private let counters = Mutex<[Key: Metrics.Counter]>([:])
    /// The MCP names seen as metric labels, at most `GatewayMetrics.maximumMCPNames` (a client chooses them).
    package let mcpNames = Mutex<Set<String>>([])
    private let timers = Mutex<[Key: Metrics.Timer]>([:])

    package func counter(_ key: Key, make: () -> Metrics.Counter) -> Metrics.Counter {
        if let counter = counters.withLock({ $0[key] }) { return counter }
        let counter = make()
        counters.withLock { $0[key] = counter }
        return counter
    }

    package func timer(_ key: Key, make: () -> Metrics.Timer) -> Metrics.Timer {
        if let timer = timers.withLock({ $0[key] }) { return timer }
        let timer = make()
        timers.withLock { $0[key] = timer }
        return timer
    }
}

extension Duration {
    /// The duration in whole nanoseconds.
    package var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
