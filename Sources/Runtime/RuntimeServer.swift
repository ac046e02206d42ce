import Hummingbird
import HummingbirdWebSocket
import JOSE
import Logging
import ServiceLifecycle
import StateSurface

/// Builds the Runtime's Hummingbird application on its own listener.
///
/// Used by `portcullis runtime` on its own and by the gateway, which starts it
/// in-process on a loopback port and talks to it over HTTP and WebSocket
/// exactly as it would to a remote Runtime.
public enum RuntimeServer {
    /// - Parameters:
    ///   - state: the State Surface (sessions and executions).
    ///   - keys: the gateway's public keys, to verify assertions.
    ///   - onServerRunning: called with the bound port once listening.
    public static func makeApplication(
        configuration: RuntimeConfiguration,
        state: any SessionRepository & ExecutionRepository,
        keys: any VerificationKeyProvider,
        registry: IntentRegistry = .builtIn,
        clock: any TokenClock = SystemClock(),
        logger: Logger = Logger(label: "portcullis.runtime"),
        services extraServices: [any Service] = [],
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let sessions = SessionService(repository: state, configuration: configuration, clock: clock)
        let routes = RuntimeRoutes(
            sessions: sessions, executions: ExecutionService(sessions: sessions, executions: state, registry: registry),
            assertions: AssertionVerifier(keys: keys, configuration: configuration, clock: clock))
        let router = Router(context: BasicWebSocketRequestContext.self)
        routes.register(on: router)
        return Application(
            router: router,
            server: .http1WebSocketUpgrade(
                webSocketRouter: router,
                configuration: .init(ws: .init(maxFrameSize: configuration.maximumMessageBytes))),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            services: [SessionSweeper(repository: state, interval: configuration.sweepInterval, clock: clock, logger: logger)] + extraServices,
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }
}

/// Deletes ended (expired or revoked) sessions every `interval` seconds.
public struct SessionSweeper: Service {
    let repository: any SessionRepository
    let interval: Double
    let clock: any TokenClock
    let logger: Logger

    public func run() async throws {
        await runPeriodically(every: interval) {
            do {
                let removed = try await repository.deleteSessions(endedBefore: clock.now())
                if removed > 0 { logger.info("swept ended sessions", metadata: ["count": "\(removed)"]) }
            } catch {
                logger.warning("session sweep failed; will retry", metadata: ["error": "\(error)"])
            }
        }
    }
}
