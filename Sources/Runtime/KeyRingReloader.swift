import JOSE
import Logging
import NIOPosix
import ServiceLifecycle

/// Picks up key changes without a restart: checks the key directory every
/// `interval` seconds, and at once when the store signals a change (on
/// PostgreSQL, `portcullis keys` announces every change it makes), on NIO's
/// blocking thread pool (file reads never run on the cooperative pool or an
/// event loop). A failed reload keeps the old keys.
public struct KeyRingReloader: Service {
    let ring: LiveKeyRing
    let interval: Double
    let signals: AsyncStream<Void>?
    let logger: Logger

    /// - Parameter signals: the store's change signals (`AccessChangeFeed.accessChangeSignals()`), if any.
    public init(ring: LiveKeyRing, interval: Double = 5, signals: AsyncStream<Void>? = nil, logger: Logger) {
        self.ring = ring
        self.interval = interval
        self.signals = signals
        self.logger = logger
    }

    func reload() async {
        let ring = self.ring
        do {
            if try await NIOThreadPool.singleton.runIfActive({ try ring.reloadIfChanged() }) {
                // An operator's `keys` command (or a hand edit): which keys now sign and verify.
                let keys = ring.keySet.entries.map { "\($0.key.kid)=\($0.status.rawValue)" }.joined(separator: " ")
                logger.notice("administrative action applied", metadata: ["action": "key ring changed", "keys": "\(keys)"])
            }
        } catch {
            logger.warning("key ring reload failed; keeping the previous keys", metadata: ["error": "\(error)"])
        }
    }

    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            if let signals {
                group.addTask {
                    await cancelWhenGracefulShutdown {
                        for await _ in signals { await reload() }
                    }
                }
            }
            group.addTask { await runPeriodically(every: interval) { await reload() } }
        }
    }
}
