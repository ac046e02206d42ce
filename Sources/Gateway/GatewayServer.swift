import ExtAuthz
import ConfigurationReading
import ConnectedAccounts
import DataPlane
import EdgeHTTP
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import JOSE
import Logging
import NIOSSL
import Observability
import Traces
import ProviderLogin
import Runtime
import RuntimeAccess
import SecurityGuard
import ServiceLifecycle
import SocketGuard
import StateSurface
import TrustedIssuers

/// Builds the gateway's applications: the public one and the admin one.
public enum GatewayServer {
    /// The public router: every route of the API table, behind the origin
    /// policy and the observation middleware (request id, JSON errors, logs, metrics).
    public static func makeRouter(services: GatewayServices) -> Router<GatewayRequestContext> {
        // HEAD on every GET route answers as GET without the body (RFC 9110 §9.3.2): load balancers health-check with HEAD.
        let router = Router(context: GatewayRequestContext.self, options: .autoGenerateHeadEndpoints)
        // Outermost: a route's span holds the answer as the client gets it.
        if let tracer = services.tracer { router.add(middleware: RouteTracingMiddleware(tracer: tracer, admission: services.admission)) }
        router.add(middleware: OriginPolicyMiddleware(table: services.routeTable))
        let knownRoutes = KnownRoutes()
        router.add(middleware: RequestObservationMiddleware(logger: services.logger, accessLog: services.accessLog, metrics: services.metrics, knownRoutes: knownRoutes))
        router.add(middleware: RouteHostMiddleware(table: services.routeTable))
        services.authRoutes.register(on: router)
        services.providerLoginRoutes.register(on: router)
        services.browserSessionRoutes.register(on: router)
        services.authorizationServerRoutes.register(on: router)
        services.connectRoutes.register(on: router)
        services.forwardAuthRoutes.register(on: router)
        services.sessionRoutes.register(on: router)
        services.intentRoutes.register(on: router)
        services.discoveryRoutes.register(on: router)
        BrowserClientRoutes(directory: services.configuration.clientDirectory, servesDemo: services.configuration.servesDemo, logger: services.logger)
            .register(on: router)
        // Plain HTTP on the socket path: the guard's refusal, 503 while no link to the Runtime
        // can open (as the upgrade would get), or 426 when only the upgrade is missing. Clients
        // ask this after an unexplained close: 426 must mean a socket opened now would work.
        let socketGuard = services.socketGuard
        let links = services.agentLinks
        router.get(RouterPath(WebSocketGuard.path)) { request, context -> Response in
            let headers = request.headers.map { ($0.name.rawName, $0.value) }
            let uri = request.uri.query.map { request.uri.path + "?" + $0 } ?? request.uri.path
            if case .failure(let error) = await socketGuard.preview(UpgradeRequest(uri: uri, headers: headers)) {
                throw error
            }
            guard try await links.whenOpen(on: context.eventLoop).get() else { throw RuntimeAgentLinks.unavailable }
            let error = GatewayError(.upgradeRequired, "upgrade_required", "open this path as a WebSocket, as the first request on a new connection")
            var response = error.response()
            response.headers[.upgrade] = "websocket"
            return response
        }
        knownRoutes.record(router.routes.map { (method: $0.method.rawValue, path: $0.path.description) })
        return router
    }

    /// The public listener (HTTPS when `tls` is configured).
    public static func makeApplication(
        services: GatewayServices, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> some ApplicationProtocol {
        let configuration = services.configuration
        for route in configuration.routes {
            if let problem = route.problem { throw GatewayStartupError("gateway.routes \(problem)") }
        }
        let guardian = services.socketGuard
        let sockets = services.agentSockets
        let dataPlane = try services.makeDataPlane()
        let base = HTTPServerBuilder.http1WithAgentSocket(
            guardian: guardian, sockets: sockets, dataPlane: dataPlane,
            maximumMessageBytes: configuration.maximumMessageBytes, limits: configuration.limits, http2: configuration.http2,
            tracing: services.tracer.map { AgentUpgradeTracing(tracer: $0, clientAddresses: services.admission.clientAddresses) })
        let server: HTTPServerBuilder
        if let tls = configuration.tls {
            var tlsConfiguration = try Self.tlsConfiguration(tls)
            // ALPN: h2 first when HTTP/2 is on (browsers then use it), http/1.1 always.
            tlsConfiguration.applicationProtocols = configuration.http2 ? ["h2", "http/1.1"] : ["http/1.1"]
            server = try .tls(base, tlsConfiguration: tlsConfiguration)
        } else {
            server = base
        }
        return Application(
            router: makeRouter(services: services), server: server,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: services.logger)
    }

    /// Reads the certificate chain and key (at start-up, before anything listens).
    ///
    /// - Throws: `GatewayStartupError` naming the configuration key of the unreadable file.
    public static func tlsConfiguration(_ files: TLSFiles) throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMFile(files.certificatePath)
        } catch {
            throw GatewayStartupError("gateway.tls.certificate_path: cannot read a PEM certificate chain from \(files.certificatePath)")
        }
        // A private key others can read is refused, as `keys import` and a trusted issuer's secret_file refuse one.
        if let mode = OwnerOnlyFile.modeOthersCanRead(files.privateKeyPath) {
            throw GatewayStartupError(
                "gateway.tls.private_key_path: \(files.privateKeyPath) can be read by other users (mode \(mode)); run chmod 600 \(files.privateKeyPath)")
        }
        do {
            key = try NIOSSLPrivateKey(file: files.privateKeyPath, format: .pem)
        } catch {
            throw GatewayStartupError("gateway.tls.private_key_path: cannot read a PEM private key from \(files.privateKeyPath)")
        }
        return TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
    }

    /// Reads `gateway.upstream_ca_file` as the data plane will, so a bad file stops start-up
    /// before anything is created.
    public static func checkUpstreamTLS(_ configuration: GatewayConfiguration) throws {
        if configuration.upstreamCAFile != nil { _ = try DataPlane.upstreamTLSContext(caFile: configuration.upstreamCAFile) }
    }

    /// Reads `ext_authz.tls`'s certificate, key and client CA as its listeners will, so a bad
    /// file stops start-up before anything listens.
    public static func checkExtAuthzTLS(_ configuration: GatewayConfiguration) throws {
        if let tls = configuration.extAuthz?.tls { _ = try ExtAuthzTLSCredentials(loading: tls) }
    }

    /// The admin listener: `GET /metrics` (Prometheus text format) and `GET /readyz` with each
    /// failure's detail (the database's address, say), loopback by default.
    public static func makeAdminApplication(
        metrics: GatewayMetrics, services: GatewayServices? = nil, host: String, port: Int, logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router(options: .autoGenerateHeadEndpoints)
        if let services {
            let readiness = Readiness(
                monitor: services.monitor, trustedIssuers: services.trustedIssuers, reloads: services.reloads, providerRechecks: services.providerRechecks)
            router.get("/readyz") { _, _ -> Response in readiness.response(detailed: true) }
        }
        router.get("/metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: metrics.exposition())))
        }
        return Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) }, logger: logger)
    }
}

/// The whole of `portcullis serve`: the gateway, its admin listener, the
/// embedded Runtime (unless `runtime_url` points elsewhere) and the
/// background work, as services for one `ServiceGroup`.
public struct PortcullisServer: Sendable {
    public enum Listener: String, Sendable {
        case gateway, admin, runtime
        /// Envoy's HTTP ext_authz (`ext_authz.http_port`).
        case extAuthzHTTP = "ext_authz_http"
        /// Envoy's gRPC ext_authz (`ext_authz.grpc_port`).
        case extAuthzGRPC = "ext_authz_grpc"
    }

    public let gateway: GatewayConfiguration
    public let runtime: RuntimeConfiguration
    public let state: any StateStore
    public let keys: LiveKeyRing
    public let metrics: GatewayMetrics
    public let clock: any TokenClock
    public let logger: Logger
    public let services: GatewayServices
    /// The buffered access log, flushed by a service of its own (`nil`: lines are written as they come).
    public let accessLog: BufferedLogSink?
    /// The trace exporter (`tracing`), run as a service that stops after the listeners; `nil`: off.
    public let traces: TraceExport?

    /// - Parameter runtime: the embedded Runtime's settings; its issuer and name
    ///   are taken from `gateway` so the two always agree.
    public init(
        gateway: GatewayConfiguration, runtime: RuntimeConfiguration, state: any StateStore, keys: LiveKeyRing,
        metrics: GatewayMetrics = GatewayMetrics(), passwordHasher: PasswordHasher = PasswordHasher(), clock: any TokenClock = SystemClock(),
        trustedIssuers: TrustedIssuers? = nil, providers: ProviderDirectory = .none, connections: ConnectionDirectory = .none, logger: Logger,
        accessLog: (sink: BufferedLogSink, format: LogFormat)? = nil, traces: TraceExport? = nil
    ) {
        self.traces = traces
        self.gateway = gateway
        self.accessLog = accessLog?.sink
        var runtime = runtime
        runtime.assertionIssuer = gateway.issuer
        runtime.name = gateway.runtimeName
        self.runtime = runtime
        self.state = state
        self.keys = keys
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
        services = GatewayServices(
            configuration: gateway, store: state, keys: keys, runtimeBaseURL: nil, metrics: metrics, passwordHasher: passwordHasher, clock: clock,
            trustedIssuers: trustedIssuers, providers: providers, connections: connections, logger: logger,
            accessLog: accessLog.map { AccessLog(sink: $0.sink, format: $0.format) }, tracer: traces?.tracer)
    }

    /// The listeners `makeServices` starts: the gateway's, the embedded Runtime's (without
    /// `runtime.url`) and the metrics' (with `admin.enabled`).
    public var listeners: Set<Listener> {
        var set: Set<Listener> = [.gateway]
        if gateway.runtimeURL == nil { set.insert(.runtime) }
        if gateway.adminPort != nil { set.insert(.admin) }
        if gateway.extAuthz?.httpPort != nil { set.insert(.extAuthzHTTP) }
        if gateway.extAuthz?.grpcPort != nil { set.insert(.extAuthzGRPC) }
        return set
    }

    /// The services, in start order; a `ServiceGroup` stops them in reverse,
    /// so the public listener stops first and the Runtime last.
    public func makeServices(onListening: @escaping @Sendable (Listener, Int) async -> Void = { _, _ in }) throws -> [any Service] {
        var list: [any Service] = []
        // First, so it stops last: its final flush comes after the listeners have stopped.
        if let accessLog { list.append(AccessLogFlusher(sink: accessLog)) }
        // As early: the spans of the last requests are sent after the listeners stop.
        if let traces { list.append(traces.service) }
        list.append(KeyRingReloader(ring: keys, signals: state.accessChangeSignals(), logger: logger))
        // Trusted issuers' keys are fetched in the background from the start; nothing waits for them.
        if let trusted = services.trustedIssuers { list.append(trusted) }
        let (state, clock) = (self.state, self.clock)
        list.append(Sweeper("expired refresh tokens and revoked token ids", every: 300, logger: logger) {
            try await state.deleteExpiredCredentials(before: clock.now())
        })
        list.append(Sweeper("expired provider sign-ins", every: 300, logger: logger) {
            try await state.deleteExpiredSignIns(before: clock.now())
        })
        let browserSessions = services.browserSessions
        list.append(Sweeper("ended browser sessions", every: 300, logger: logger) {
            try await browserSessions.sweep(now: clock.now())
        })
        if let recheck = services.providerRecheck {
            list.append(Sweeper("browser sessions re-checked at their provider", every: 60, logger: logger) { try await recheck.runOnce() })
        }
        if gateway.runtimeURL == nil {
            let (client, monitor) = (services.runtime, services.monitor)
            let host = runtime.host.contains(":") ? "[\(runtime.host)]" : runtime.host
            list.append(
                RuntimeServer.makeApplication(
                    configuration: runtime, state: state, keys: keys, clock: clock, logger: logger,
                    onServerRunning: { port in
                        client.setBaseURL("http://\(host):\(port)")
                        // Readiness learns at once that the Runtime is there (not awaited: the server
                        // serves only once this closure returns).
                        Task { await monitor.checkOnce() }
                        await onListening(.runtime, port)
                    }))
        }
        // The gateway's HTTP client to the Runtime stops before the Runtime does: the Runtime's
        // graceful shutdown waits for every connection, and an idle pooled one would hold it.
        list.append(HTTPClientLifecycle(client: services.runtime.http))
        if let adminPort = gateway.adminPort {
            list.append(
                GatewayServer.makeAdminApplication(
                    metrics: metrics, services: services, host: gateway.adminHost, port: adminPort, logger: logger, onServerRunning: { await onListening(.admin, $0) }))
        }
        // Before the listeners: readiness answers from its results.
        list.append(services.monitor)
        list.append(
            AccessChangeWatcher(
                revocations: services.revocations, runtime: services.runtime, sockets: services.sockets, sessionOwners: services.sessionOwners,
                connectedTokens: services.connectedTokens, exchangedTokens: services.exchangedTokens, feed: state, clock: clock, logger: logger))
        if let extAuthz = gateway.extAuthz, extAuthz.httpPort != nil {
            list.append(
                ExtAuthzHTTPServer(
                    configuration: extAuthz, plane: try services.makeDataPlane(), logger: logger,
                    onListening: { await onListening(.extAuthzHTTP, $0) }))
        }
        if let extAuthz = gateway.extAuthz, extAuthz.grpcPort != nil {
            list.append(
                ExtAuthzGRPCServer(
                    configuration: extAuthz, plane: try services.makeDataPlane(), logger: logger,
                    onListening: { await onListening(.extAuthzGRPC, $0) }))
        }
        list.append(try GatewayServer.makeApplication(services: services, onServerRunning: { await onListening(.gateway, $0) }))
        return list
    }
}
