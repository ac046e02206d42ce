import Metrics
import NIOHTTP1
import Observability

/// The metric handles of proxied requests, found without a lock or a string hash: one table per
/// event loop (only its loop touches it), keyed by route, method and status as one number.
///
/// A miss takes the handles from `GatewayMetrics`' shared table (made there once per label set),
/// so every loop records into the same series.
final class ProxyMetricHandles {
    private struct Handles {
        let requests: Counter
        /// `nil` for an exchange that never asked the upstream (refused at the gateway).
        let proxied: Counter?
    }

    private let metrics: GatewayMetrics
    private var byKey: [Int: Handles] = [:]
    private var timers: [Int: (request: Metrics.Timer, upstream: Metrics.Timer)] = [:]
    /// MCP calls' counters by route and labels (each label bounded: see `GatewayMetrics.mcpCallCounter`).
    private struct MCPCallKey: Hashable {
        let route: Int
        let method: String
        let name: String?
        let decision: String
    }
    private var mcpCalls: [MCPCallKey: Metrics.Counter] = [:]
    /// The route table the handles are kept for: a reload's new table starts them afresh.
    private var generation = 0

    init(metrics: GatewayMetrics) {
        self.metrics = metrics
    }

    /// Records one finished exchange: its request (by route, method, status) and, when the
    /// upstream was reached or found down (`upstreamStatus`), the proxied request.
    func record(
        route: DataPlane.Route, method: HTTPMethod, status: Int, nanoseconds: Int64, upstreamStatus: Int?, upstreamNanoseconds: Int64
    ) {
        if route.generation != generation {
            guard route.generation > generation else {
                // A request that started under the table before a reload: recorded, not kept.
                return Self.recordUncached(metrics, route: route, method: method, status: status, nanoseconds: nanoseconds, upstreamStatus: upstreamStatus, upstreamNanoseconds: upstreamNanoseconds)
            }
            byKey.removeAll()
            timers.removeAll()
            mcpCalls.removeAll()
            generation = route.generation
        }
        let methodIndex = ProxyExchange.methods.firstIndex(of: method) ?? ProxyExchange.methods.count
        let timerKey = route.index &* 64 &+ methodIndex
        let timer =
            timers[timerKey]
            ?? {
                let made = (
                    request: metrics.requestTimer(route: route.template, method: Self.label(method)),
                    upstream: metrics.upstreamTimer(upstream: route.name)
                )
                timers[timerKey] = made
                return made
            }()
        let key = (timerKey &* 1_024 &+ status) &* 1_024 &+ (upstreamStatus ?? 0)
        let handles =
            byKey[key]
            ?? {
                let made = Handles(
                    requests: metrics.requestCounter(route: route.template, method: Self.label(method), status: status),
                    proxied: upstreamStatus.map { metrics.proxiedCounter(upstream: route.name, status: $0) })
                byKey[key] = made
                return made
            }()
        handles.requests.increment()
        timer.request.recordNanoseconds(nanoseconds)
        if let proxied = handles.proxied {
            proxied.increment()
            timer.upstream.recordNanoseconds(upstreamNanoseconds)
        }
    }

    /// Records one MCP call (after `record` for its exchange, which follows the route table's generation).
    func recordMCPCall(route: DataPlane.Route, method: String, name: String?, decision: String) {
        guard route.generation == generation else {
            return metrics.mcpCall(route: route.template, method: method, name: name, decision: decision)
        }
        let key = MCPCallKey(route: route.index, method: method, name: name, decision: decision)
        if let counter = mcpCalls[key] { return counter.increment() }
        let (counter, keepable) = metrics.mcpCallCounter(route: route.template, method: method, name: name, decision: decision)
        if keepable { mcpCalls[key] = counter }
        counter.increment()
    }

    /// A method's metric label: its name when some route may forward it, else `OTHER` (a client
    /// chooses the method; its label may not grow the metrics without bound).
    static func label(_ method: HTTPMethod) -> String {
        ProxyExchange.methods.contains(method) ? method.rawValue : "OTHER"
    }

    private static func recordUncached(
        _ metrics: GatewayMetrics, route: DataPlane.Route, method: HTTPMethod, status: Int, nanoseconds: Int64, upstreamStatus: Int?, upstreamNanoseconds: Int64
    ) {
        metrics.requestCounter(route: route.template, method: label(method), status: status).increment()
        metrics.requestTimer(route: route.template, method: label(method)).recordNanoseconds(nanoseconds)
        if let upstreamStatus {
            metrics.proxiedCounter(upstream: route.name, status: upstreamStatus).increment()
            metrics.upstreamTimer(upstream: route.name).recordNanoseconds(upstreamNanoseconds)
        }
    }
}
