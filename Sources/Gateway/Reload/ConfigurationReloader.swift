import ConfigurationReading
import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads the configuration on `SIGHUP`: the file is read again whole and, when every key reads,
/// what can change live is put in force (`GatewayServices.apply`); otherwise nothing changes.
///
/// Open connections and sockets stay; requests in flight finish under the configuration they
/// started with. Each outcome is logged (a refusal with the key it names) and kept for the admin
/// listener's `/readyz`.
public struct ConfigurationReloader: Service {
    let services: GatewayServices
    /// Reads the configuration as start-up did; throws `ConfigurationError` (or another error) to refuse it.
    let read: @Sendable () async throws -> ReloadedConfiguration
    let logger: Logger

    public init(services: GatewayServices, logger: Logger, read: @escaping @Sendable () async throws -> ReloadedConfiguration) {
        self.services = services
        self.read = read
        self.logger = logger
    }

    public func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            await reload()
        }
    }

    /// Reads and applies the configuration once.
    ///
    /// - Returns: `false` when it was refused (the configuration before stays in force).
    @discardableResult
    public func reload() async -> Bool {
        let restartKeys: [String]
        do {
            restartKeys = try services.apply(try await read())
        } catch {
            let message = (error as? ConfigurationError)?.message ?? String(describing: error)
            logger.error("configuration reload refused; the configuration in force is unchanged", metadata: ["error": "\(message)"])
            services.reloads.record(succeeded: false, error: message)
            services.metrics.reloaded(applied: false)
            return false
        }
        services.reloads.record(succeeded: true, restartKeys: restartKeys)
        services.metrics.reloaded(applied: true)
        let table = services.routeTable.current
        logger.notice(
            "configuration reloaded: routes, their policies, CORS origins, trusted issuers and rate limits in force",
            metadata: ["routes": "\(table.routes.count)", "trusted_issuers": "\(services.trustedIssuers?.configuration.issuers.count ?? 0)"])
        if !restartKeys.isEmpty {
            logger.warning(
                "configuration keys changed that take effect only on a restart; the running values stay",
                metadata: ["keys": "\(restartKeys.joined(separator: ", "))"])
        }
        return true
    }
}
