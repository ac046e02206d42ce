import Logging
import ServiceLifecycle
import Synchronization

/// Runs a test's service group and waits for its listeners' ports, never forever.
///
/// A listener that cannot bind (a port another socket took meanwhile, when a test restarts
/// a server on the port it had) ends the group with an error before any port is reported.
/// Waiting on the ports alone then waited forever, and a whole CI run with it: here the
/// reports end when the group does, and after `seconds` in any case, and the group's error
/// (or the wait's) is thrown.
struct ServiceGroupStart<Listener: Hashable & Sendable> {
    /// The callback the services call with each listener's bound port.
    let report: @Sendable (Listener, Int) -> Void
    private let reports: AsyncStream<(Listener, Int)>
    private let continuation: AsyncStream<(Listener, Int)>.Continuation

    init() {
        let (stream, continuation) = AsyncStream<(Listener, Int)>.makeStream()
        reports = stream
        self.continuation = continuation
        report = { continuation.yield(($0, $1)) }
    }

    /// Runs `group` in a task and returns it with the ports of `expected` listeners.
    func run(_ group: ServiceGroup, expected: Int, within seconds: Int = 60) async throws -> (task: Task<Void, any Error>, ports: [Listener: Int]) {
        let failure = Mutex<String?>(nil)
        let continuation = continuation
        let task = Task {
            defer { continuation.finish() }
            do {
                try await group.run()
            } catch {
                failure.withLock { $0 = "\(error)" }
                throw error
            }
        }
        let timer = Task {
            try? await Task.sleep(for: .seconds(seconds))
            continuation.finish()
        }
        defer { timer.cancel() }
        var ports: [Listener: Int] = [:]
        for await (listener, port) in reports {
            ports[listener] = port
            if ports.count == expected { return (task, ports) }
        }
        await group.triggerGracefulShutdown()
        if let failure = failure.withLock({ $0 }) {
            throw FixtureError("the servers stopped before listening: \(failure)")
        }
        throw FixtureError("only \(ports.count) of \(expected) listeners reported a port within \(seconds) s")
    }
}
