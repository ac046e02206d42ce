import Synchronization
import Traces

/// The span `RouteTracingMiddleware` started for the request this task answers, for a route
/// that says more about it: forward-auth makes it its decision's (`isDecision`).
final class CurrentRouteSpan: Sendable {
    /// This task's request's span; `nil` when tracing is off or the request is not recorded.
    @TaskLocal static var current: CurrentRouteSpan?

    let span: RequestSpan
    private let decision = Atomic<Bool>(false)

    init(_ span: RequestSpan) {
        self.span = span
    }

    /// Whether a route named the span as a decision (`forward_auth GET`, the original route).
    var isDecision: Bool { decision.load(ordering: .relaxed) }

    /// Marks the span a decision's: its name and route are the original request's.
    func markDecision() {
        decision.store(true, ordering: .relaxed)
    }
}
