import JOSE
import Logging
import NIOPosix
import ServiceLifecycle

/// Picks up key changes without a restart: checks the key directory every
/// `interval` seconds on NIO's blocking thread pool (file reads never run on
/// the cooperative pool or an event loop). A failed reload keeps the old keys.
public struct KeyRingReloader: Service {
    let ring: LiveKeyRing
    let interval: Double
    let logger: Logger

    public init(ring: LiveKeyRing, interval: Double = 5, logger: Logger) {
        self.ring = ring
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        let ring = self.ring
        await runPeriodically(every: interval) {
            do {
                if try await NIOThreadPool.singleton.runIfActive({ try ring.reloadIfChanged() }) {
                    logger.info("key ring reloaded")
                }
            } catch {
                logger.warning("key ring reload failed; keeping the previous keys", metadata: ["error": "\(error)"])
            }
        }
    }
}
