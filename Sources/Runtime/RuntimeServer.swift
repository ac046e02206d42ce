// Runtime: owns sessions, executes intents and serves the agent channel on its own internal listener.
import AgentLink
import Hummingbird
import HummingbirdCore
import NIOCore
import HummingbirdWebSocket
import JOSE
import RuntimeAPI
import Logging
import Resilience
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
        router.add(middleware: StorageFailureMiddleware(logger: logger))
        routes.register(on: router)
        return Application(
            router: router,
            server: Self.listener(router: router, configuration: configuration),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            services: [
                Sweeper("ended sessions", every: configuration.sweepInterval, logger: logger) {
                    try await state.deleteSessions(endedBefore: clock.now())
                }
            ] + extraServices,
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
    }
}

extension RuntimeServer {
    /// HTTP/1 with the agent link's WebSocket upgrade, each connection behind a `QuiesceRelay`.
    static func listener(router: Router<BasicWebSocketRequestContext>, configuration: RuntimeConfiguration) -> HTTPServerBuilder {
        let webSocketResponder = router.buildResponder()
        let shutdownTimeout = TimeAmount.milliseconds(Int64(configuration.shutdownTimeout * 1000))
        let channelConfiguration = HTTP1WebSocketUpgradeChannel.Configuration(
            ws: .init(maxFrameSize: configuration.maximumMessageBytes + AgentLinkFrame.overhead))
        return HTTPServerBuilder { responder in
            RuntimeChildChannel(
                upgradeChannel: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder, configuration: channelConfiguration),
                shutdownTimeout: shutdownTimeout)
        }
    }
}

/// Deletes what has ended from storage every `interval` seconds: one sweep,
/// logged when it removed something, retried at the next tick when it failed.
public struct Sweeper: Service {
    let name: String
    let interval: Double
    let logger: Logger
    let sweep: @Sendable () async throws -> Int

    /// - Parameters:
    ///   - name: what is swept, for the log ("ended sessions").
    ///   - sweep: removes what has ended; returns how many rows.
    public init(_ name: String, every interval: Double, logger: Logger, sweep: @escaping @Sendable () async throws -> Int) {
        self.name = name
        self.interval = interval
        self.logger = logger
        self.sweep = sweep
    }

    /// What is swept, as the log names it.
    public var what: String { name }

    /// One sweep now, as `run` does each interval; returns how many rows went.
    public func sweepOnce() async throws -> Int { try await sweep() }

    public func run() async throws {
        await runPeriodically(every: interval) {
            do {
                let removed = try await sweep()
                if removed > 0 { logger.info("swept \(name)", metadata: ["count": "\(removed)"]) }
            } catch {
                // Only the type: a storage error may quote stored values.
                logger.warning("sweep of \(name) failed; will retry", metadata: ["error_type": "\(type(of: error))"])
            }
        }
    }
}

/// Storage and other unexpected failures are 503 `unavailable` (retry later),
/// never a bare 500; only the error's type is logged (a database error may quote values).
struct StorageFailureMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            throw error
        } catch let refusal as DependencyCircuit.Refusal {
            // The store is known down (its circuit logged that once): refused at once, not logged per request.
            throw RuntimeError(.serviceUnavailable, .unavailable, refusal.message)
        } catch {
            logger.error("runtime request failed", metadata: ["error_type": "\(String(reflecting: type(of: error)))"])
            throw RuntimeError(.serviceUnavailable, .unavailable, "the Runtime's store did not answer in time; try again shortly")
        }
    }
}
