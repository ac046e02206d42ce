import Synchronization

/// A circuit breaker for one dependency (the store, the Runtime): once the
/// dependency is known down, callers are refused at once instead of each
/// waiting out its own timeout.
///
/// A failed connect or a timeout opens it (`recordOutage`); while it is open,
/// `enter()` refuses every caller. Only a probe closes it: `recordRecovery` is
/// called by whoever checks the dependency in the background (no caller gets
/// through to find out). Callers in flight are bounded as well: past
/// `maximumWaiters` a caller is refused rather than queued behind the others.
/// As Envoy's circuit breakers and outlier detection, and HAProxy's `observe`.
public final class DependencyCircuit: Sendable {
    /// What the dependency is called in answers, readiness and metrics (`store`, `runtime`).
    public let name: String
    /// How many callers may be in flight at once before the next is refused.
    public let maximumWaiters: Int

    /// Why a caller was refused without trying.
    public struct Refusal: Error, Sendable, Equatable {
        public enum Reason: String, Sendable {
            /// The dependency is known down: its circuit is open.
            case open
            /// More callers wait on the dependency than `maximumWaiters`.
            case busy
        }

        public let dependency: String
        public let reason: Reason
        /// Seconds a client should wait before trying again.
        public let retryAfter: Int

        public init(dependency: String, reason: Reason, retryAfter: Int) {
            self.dependency = dependency
            self.reason = reason
            self.retryAfter = retryAfter
        }

        /// One sentence a person can act on; names the dependency, never its address.
        public var message: String {
            switch reason {
            case .open: "the \(dependency) is down; the gateway will serve this again once it answers, try again in \(retryAfter) s"
            case .busy: "too many requests are waiting on the \(dependency); try again in \(retryAfter) s"
            }
        }
    }

    /// The circuit's state as readiness and metrics report it.
    public struct Snapshot: Sendable, Equatable {
        public var isOpen: Bool
        /// What the last failure was, with the dependency's own words (its address: admin and log only).
        public var detail: String?
        /// When the circuit last opened (`ContinuousClock`), while it is open.
        public var openedAt: ContinuousClock.Instant?
        /// Callers in flight now.
        public var waiters: Int
        /// Callers refused without trying, since start.
        public var refusedFast: Int
    }

    private let state: Mutex<Snapshot>
    /// Callers in `untilOpen()`, by ticket: `nil` until the caller waits (issued, not yet waiting).
    private let watchers = Mutex<(tickets: [Int: CheckedContinuation<String?, Never>?], next: Int)>(([:], 0))

    public init(name: String, maximumWaiters: Int = 1_000) {
        self.name = name
        self.maximumWaiters = max(1, maximumWaiters)
        state = Mutex(Snapshot(isOpen: false, detail: nil, openedAt: nil, waiters: 0, refusedFast: 0))
    }

    /// Returns when the circuit opens, with the failure's detail (at once if it is open), or `nil`
    /// when the waiting task is cancelled.
    ///
    /// A call in flight races its own work against this, so that when any call (or a check) finds
    /// the dependency down, every call still waiting on it is answered then, not at its own timeout.
    public func untilOpen() async -> String? {
        if let detail = openDetail { return detail }
        let ticket = watchers.withLock { watchers in
            watchers.next += 1
            watchers.tickets[watchers.next] = .some(nil)
            return watchers.next
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
                let early: String?? = watchers.withLock { watchers in
                    // Cancelled before it waited: its ticket is gone.
                    guard watchers.tickets[ticket] != nil else { return .some(nil) }
                    // Opened between the check above and now: answered at once.
                    if let detail = openDetail {
                        watchers.tickets[ticket] = nil
                        return .some(detail)
                    }
                    watchers.tickets[ticket] = .some(continuation)
                    return nil
                }
                if let early { continuation.resume(returning: early) }
            }
        } onCancel: {
            let waiting = watchers.withLock { $0.tickets.removeValue(forKey: ticket) }
            waiting??.resume(returning: nil)
        }
    }

    /// The failure's detail while the circuit is open.
    private var openDetail: String? { state.withLock { $0.isOpen ? ($0.detail ?? "") : nil } }

    public var snapshot: Snapshot { state.withLock { $0 } }

    public var isOpen: Bool { state.withLock { $0.isOpen } }

    /// Admits one caller, or refuses it at once; a caller admitted must call `leave()`.
    public func enter() throws(Refusal) {
        let refusal: Refusal.Reason? = state.withLock { state in
            if state.isOpen {
                state.refusedFast += 1
                return .open
            }
            if state.waiters >= maximumWaiters {
                state.refusedFast += 1
                return .busy
            }
            state.waiters += 1
            return nil
        }
        if let refusal { throw Refusal(dependency: name, reason: refusal, retryAfter: refusal == .open ? 5 : 1) }
    }

    public func leave() {
        state.withLock { $0.waiters = max(0, $0.waiters - 1) }
    }

    /// The dependency did not answer (a refused connect, a timeout): the circuit opens.
    /// Returns whether it was closed before (the moment to log the outage once).
    @discardableResult
    public func recordOutage(_ detail: String) -> Bool {
        // The waiters are taken under the same lock order as `untilOpen` (watchers, then state).
        let (wasClosed, waiting) = watchers.withLock { watchers in
            let wasClosed = state.withLock { state in
                let wasClosed = !state.isOpen
                state.isOpen = true
                state.detail = detail
                if wasClosed { state.openedAt = .now }
                return wasClosed
            }
            // Those waiting are answered; those issued but not yet waiting find the circuit open when they do.
            var waiting: [CheckedContinuation<String?, Never>] = []
            for (ticket, continuation) in watchers.tickets {
                guard let continuation else { continue }
                waiting.append(continuation)
                watchers.tickets[ticket] = nil
            }
            return (wasClosed, waiting)
        }
        for continuation in waiting { continuation.resume(returning: detail) }
        return wasClosed
    }

    /// The dependency answered: the circuit closes. Returns whether it was open before.
    @discardableResult
    public func recordRecovery() -> Bool {
        state.withLock { state in
            let wasOpen = state.isOpen
            state.isOpen = false
            state.detail = nil
            state.openedAt = nil
            return wasOpen
        }
    }

    /// Runs `body` as an admitted caller: refused at once while the circuit is open or full,
    /// and an error `isOutage` recognises opens it.
    public func call<T>(isOutage: (any Error) -> String?, _ body: () async throws -> T) async throws -> T {
        try enter()
        defer { leave() }
        do {
            return try await body()
        } catch {
            if let detail = isOutage(error) { recordOutage(detail) }
            throw error
        }
    }
}
