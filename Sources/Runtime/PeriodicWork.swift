import Logging
import ServiceLifecycle

/// Runs `body` every `interval` seconds until graceful shutdown or cancellation;
/// with `immediately`, once at the start as well.
///
/// A background service must stop at graceful shutdown, or the process keeps
/// running after SIGTERM; this is the one place that loop is written.
public func runPeriodically(every interval: Double, immediately: Bool = false, _ body: @escaping @Sendable () async -> Void) async {
    await cancelWhenGracefulShutdown {
        if immediately { await body() }
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .seconds(interval))
            } catch {
                return  // cancelled: shutting down
            }
            await body()
        }
    }
}
