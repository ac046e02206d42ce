import DataPlane
import EdgeHTTP
import Logging
import Observability
import Resilience
import RuntimeAPI
import RuntimeAccess
import ServiceLifecycle
import StateSurface
import Synchronization

/// Checks the gateway's dependencies in the background, each with its own
/// timeout, so that readiness answers from the last results at once and never
/// waits on a dependency that is down.
///
/// Every `interval` it pings the store and asks the Runtime's health, both at
/// once. A store check while the store's circuit is open is the probe that
/// closes it; a Runtime that answers anything closes the Runtime's circuit, one
/// that cannot be reached opens it. Trusted issuers report their own key state
/// (fetched in the background already). A change of state is logged once, with
/// the dependency's own words (its address); `/readyz` on the public listener
/// names only the dependency.
public final class DependencyMonitor: Service, Sendable {
    /// One dependency's last check.
    public struct Check: Sendable, Equatable {
        public var ok: Bool
        /// The public word for its state: `ok`, `unavailable`, or the Runtime's code.
        public var state: String
        /// What failed, in the dependency's words (may name its address): admin listener and log only.
        public var detail: String?
        /// When the current state began.
        public var since: ContinuousClock.Instant
    }

    /// The results of the last round; empty until the first round has finished.
    public struct Results: Sendable {
        public var store: Check?
        public var runtime: Check?
        public var checkedAt: ContinuousClock.Instant?
    }

    let store: any CredentialRepository
    /// The store's name in the log and on the admin listener (its address).
    let storeName: String
    let storeCircuit: DependencyCircuit?
    let runtime: RuntimeClient
    let metrics: GatewayMetrics
    let logger: Logger
    /// Time between two rounds of checks while every dependency passes; a quarter of it while one fails,
    /// so a dependency that returns is seen soon.
    let interval: Duration
    /// How long one check may take before it counts as failed.
    let timeout: Duration
    private let state = Mutex(Results())
    /// Callers refused fast, by dependency, as last reported to the metrics.
    private let reportedRefusals = Mutex<[String: Int]>([:])

    init(
        store: any CredentialRepository, storeCircuit: DependencyCircuit?, runtime: RuntimeClient, metrics: GatewayMetrics, logger: Logger,
        interval: Duration = .seconds(2), timeout: Duration = .milliseconds(1_500)
    ) {
        self.store = store
        storeName = (store as? any StateStore)?.name ?? "the store"
        self.storeCircuit = storeCircuit
        self.runtime = runtime
        self.metrics = metrics
        self.logger = logger
        self.interval = interval
        self.timeout = timeout
    }

    public var results: Results { state.withLock { $0 } }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let allPassed = await self.checkOnce()
                try? await Task.sleep(for: allPassed ? self.interval : self.interval / 4)
            }
        }
    }

    /// One round: every dependency at once, each within `timeout`. Returns whether all passed.
    @discardableResult
    func checkOnce() async -> Bool {
        // The embedded Runtime has not said where it listens yet: its check stays pending.
        let runtimeKnown = runtime.baseURL != nil
        async let storeCheck = bounded { [store] in try await store.ping() }
        async let runtimeCheck = runtimeKnown ? bounded { [runtime] in try await runtime.probeHealth() } : nil
        let (storeResult, runtimeResult) = await (storeCheck, runtimeCheck)
        let now = ContinuousClock.now
        let storeOutcome: Outcome =
            switch storeResult {
            case nil: Outcome(ok: true, state: "ok", detail: nil)
            case let error?: Outcome(ok: false, state: "unavailable", detail: Self.detail(of: error, dependency: "store", name: storeName))
            }
        let runtimeOutcome: Outcome? =
            switch runtimeResult {
            case _ where !runtimeKnown: nil
            case nil: Outcome(ok: true, state: "ok", detail: nil)
            case let refusal as RuntimeRefusal: Outcome(ok: false, state: refusal.code.rawValue, detail: refusal.message)
            case let error?:
                Outcome(ok: false, state: (error as? GatewayError)?.code ?? "unavailable", detail: Self.detail(of: error, dependency: "runtime", name: nil))
            }
        let changes = state.withLock { results -> [(String, Check)] in
            var changes: [(String, Check)] = []
            func update(_ current: inout Check?, _ outcome: Outcome?, name: String) {
                guard let outcome else { return }
                if let previous = current, previous.state == outcome.state {
                    current?.detail = outcome.detail
                    return
                }
                let check = Check(ok: outcome.ok, state: outcome.state, detail: outcome.detail, since: now)
                // The first round reports only what is wrong; later rounds every change.
                if current != nil || !outcome.ok { changes.append((name, check)) }
                current = check
            }
            update(&results.store, storeOutcome, name: "store")
            update(&results.runtime, runtimeOutcome, name: "runtime")
            results.checkedAt = now
            return changes
        }
        for (name, check) in changes {
            if check.ok {
                logger.notice("dependency answers again", metadata: ["dependency": "\(name)"])
            } else {
                logger.warning("dependency down", metadata: ["dependency": "\(name)", "state": "\(check.state)", "error": "\(check.detail ?? "-")"])
            }
        }
        report(store: storeOutcome.ok, runtime: runtimeOutcome?.ok ?? false)
        return storeOutcome.ok && runtimeOutcome?.ok == true
    }

    /// What one check found.
    struct Outcome {
        var ok: Bool
        var state: String
        var detail: String?
    }

    /// Runs `check` within `timeout`; the error it threw (or a timeout), `nil` when it passed.
    private func bounded(_ check: @escaping @Sendable () async throws -> Void) async -> (any Error)? {
        let timeout = self.timeout
        return await withTaskGroup(of: (any Error)??.self) { group in
            group.addTask {
                do {
                    try await check()
                    return .some(nil)
                } catch {
                    return .some(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = await group.next(), let outcome = first else {
                return CheckTimeout(seconds: Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
            }
            return outcome
        }
    }

    struct CheckTimeout: Error, CustomStringConvertible {
        let seconds: Double
        var description: String { "did not answer within \(seconds) s" }
    }

    static func detail(of error: any Error, dependency: String, name: String?) -> String {
        switch error {
        case let error as StateSurfaceError: error.message
        case let error as GatewayError: error.message
        case let timeout as CheckTimeout: "the \(dependency)\(name.map { " (\($0))" } ?? "") \(timeout.description)"
        default: "the \(dependency) does not answer (\(type(of: error)))"
        }
    }

    /// Circuit state and fast refusals per dependency, for `/metrics`.
    private func report(store storeUp: Bool, runtime runtimeUp: Bool) {
        var circuits: [DependencyCircuit] = [runtime.circuit]
        if let storeCircuit { circuits.append(storeCircuit) }
        metrics.dependencyUp("store", storeUp)
        metrics.dependencyUp("runtime", runtimeUp)
        for circuit in circuits {
            let snapshot = circuit.snapshot
            metrics.circuitOpen(circuit.name, snapshot.isOpen)
            let delta = reportedRefusals.withLock { reported -> Int in
                let delta = snapshot.refusedFast - reported[circuit.name, default: 0]
                reported[circuit.name] = snapshot.refusedFast
                return delta
            }
            if delta > 0 { metrics.refusedFast(circuit.name, count: delta) }
        }
    }
}
