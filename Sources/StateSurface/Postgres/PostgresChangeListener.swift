import Foundation
import Logging
import PostgresNIO
import Synchronization

/// One LISTEN per store, on a connection of its own, fanned out to every subscriber.
///
/// Not a pooled connection: a LISTEN holds its connection for as long as it runs, so
/// each subscriber listening through the pool (the gateway's change watcher, its key-ring
/// reloader, an embedded Runtime's) took one away from queries, and a pool of one or two
/// had none left. Here `storage.postgres_pool_size` is all for queries, and each instance
/// opens exactly one more connection for notifications.
final class PostgresChangeListener: Sendable {
    private struct State {
        var subscribers: [UUID: AsyncStream<Void>.Continuation] = [:]
        var task: Task<Void, Never>?
        var closed = false
    }

    private let configuration: PostgresConnection.Configuration
    private let channel: String
    private let logger: Logger
    private let state = Mutex(State())

    init(configuration: PostgresConnection.Configuration, channel: String, logger: Logger) {
        self.configuration = configuration
        self.channel = channel
        self.logger = logger
    }

    /// A stream that yields once per notification and once after every (re)connection
    /// (the subscriber reads what it may have missed); it ends when the store shuts down.
    func subscribe() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let accepted = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.subscribers[id] = continuation
            if state.task == nil { state.task = Task { await self.listen() } }
            return true
        }
        guard accepted else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            // The last subscriber gone: stop listening (a new one starts it again).
            let idle = self?.state.withLock { state -> Task<Void, Never>? in
                state.subscribers.removeValue(forKey: id)
                guard state.subscribers.isEmpty else { return nil }
                defer { state.task = nil }
                return state.task
            }
            idle?.cancel()
        }
        return stream
    }

    /// Stops listening and ends every subscriber's stream.
    func shutdown() async {
        let (task, subscribers) = state.withLock { state in
            state.closed = true
            defer { state.subscribers = [:] }
            return (state.task, Array(state.subscribers.values))
        }
        task?.cancel()
        await task?.value
        for subscriber in subscribers { subscriber.finish() }
    }

    private func signalAll() {
        for subscriber in state.withLock({ Array($0.subscribers.values) }) { subscriber.yield() }
    }

    /// Connects, LISTENs and relays until cancelled; while the database is away, retries
    /// with a backoff from 0.25 s doubling to 5 s (subscribers poll meanwhile).
    private func listen() async {
        var delay = 0.25
        var connectionID = 0
        while !Task.isCancelled {
            do {
                connectionID += 1
                let connection = try await PostgresConnection.connect(configuration: configuration, id: connectionID, logger: logger)
                do {
                    try await withTaskCancellationHandler {
                        try await connection.listen(on: channel) { notifications in
                            delay = 0.25
                            signalAll()  // caught up after a (re)connection
                            for try await _ in notifications { signalAll() }
                        }
                    } onCancel: {
                        let _: EventLoopFuture<Void> = connection.close()  // ends the notification sequence
                    }
                } catch {
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
            } catch {
                if Task.isCancelled { break }
                logger.warning("access-change LISTEN lost; polling until it is back", metadata: ["error_type": "\(type(of: error))"])
            }
            try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
            delay = min(delay * 2, 5)
        }
    }
}
