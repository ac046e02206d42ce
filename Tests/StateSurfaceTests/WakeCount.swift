import Synchronization

/// Counts the wakes of a store's change signals in the background, so a test can wait
/// for the Nth with a deadline (cancelling a wait on the stream itself would end it).
final class WakeCount: Sendable {
    private let count = Mutex(0)
    private let reader = Mutex<Task<Void, Never>?>(nil)

    init(_ signals: AsyncStream<Void>) {
        let task = Task { [weak self] in
            for await _ in signals { self?.count.withLock { $0 += 1 } }
        }
        reader.withLock { $0 = task }
    }

    deinit { reader.withLock { $0?.cancel() } }

    /// Whether `wakes` wakes have been counted within `seconds`.
    func reach(_ wakes: Int, within seconds: Double) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if count.withLock({ $0 }) >= wakes { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return count.withLock { $0 } >= wakes
    }
}
