import DataPlane
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import ServiceLifecycle

/// The listener of Envoy's gRPC ext_authz (`ext_authz.grpc_port`): HTTP/2 (h2c, or TLS with a
/// client certificate required under `ext_authz.tls`), each connection's calls served on its
/// event loop by `ExtAuthzGRPCConnection`, until a graceful shutdown ends it.
///
/// Not grpc-swift's server: its call machinery (a stream channel, a task and their generics per
/// call) cost about seven times the decision itself (PERFORMANCE.md, issue 67). A check is one
/// unary call with one small message, which the connection reads from its frames.
package struct ExtAuthzGRPCServer: Service {
    /// An idle connection (Envoy keeps them) is closed gracefully after this long without a call.
    static let idleTimeout = TimeAmount.seconds(300)
    /// Under mutual TLS, a connection is closed gracefully after this long, so that its caller's
    /// certificate is presented again: each call checks its dates, but the chain is checked once
    /// a connection.
    static let maximumAgeUnderTLS = TimeAmount.seconds(3600)
    /// Calls one connection may have open at once.
    static let maximumConcurrentCalls = 1024
    /// A graceful stop waits this long for the connections' open calls.
    static let shutdownGrace = TimeAmount.seconds(10)

    let configuration: ExtAuthzConfiguration
    let plane: DataPlane
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void

    package init(configuration: ExtAuthzConfiguration, plane: DataPlane, logger: Logger, onListening: @escaping @Sendable (Int) async -> Void = { _ in }) {
        self.configuration = configuration
        self.plane = plane
        self.logger = logger
        self.onListening = onListening
    }

    package func run() async throws {
        guard let port = configuration.grpcPort else { return }
        let (configuration, logger) = (configuration, logger)
        let checks = ExtAuthzGRPCChecks(plane: plane, configuration: configuration)
        let tls = try configuration.tls.map { tls in try NIOSSLContext(configuration: try ExtAuthzTLSCredentials(loading: tls).grpcServerConfiguration) }
        let connections = NIOLockedValueBox(OpenConnections())
        let slots = ExtAuthzConnectionSlots(configuration: configuration)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                // Over its limit: closed before a byte is read (Envoy counts it a failed check).
                guard slots.admit(channel) else {
                    channel.close(promise: nil)
                    return channel.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
                }
                let key = ObjectIdentifier(channel)
                // A connection accepted as the listener stops is not served.
                let stopping = connections.withLockedValue { open in
                    if !open.stopping { open.channels[key] = channel }
                    return open.stopping
                }
                guard !stopping else {
                    channel.close(promise: nil)
                    return channel.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
                }
                channel.closeFuture.whenComplete { _ in _ = connections.withLockedValue { $0.channels.removeValue(forKey: key) } }
                return channel.eventLoop.makeCompletedFuture {
                    try Self.configure(channel, tls: tls, checks: checks, configuration: configuration, logger: logger)
                }
            }
            .bind(host: configuration.host, port: port).get()
        let bound = channel.localAddress?.port ?? port
        logger.info("ext_authz (gRPC) listening", metadata: ["host": "\(configuration.host)", "port": "\(bound)", "tls": "\(configuration.tls != nil)"])
        await onListening(bound)
        // Until a graceful stop, or the task's cancellation (another service failed): then the listener closes.
        await withTaskCancellationOrGracefulShutdownHandler {
            try? await channel.closeFuture.get()
        } onCancelOrGracefulShutdown: {
            channel.close(promise: nil)
        }
        // Each connection is told to stop (GOAWAY), its open calls answered; any still open after the grace is closed.
        let open = connections.withLockedValue { open in
            open.stopping = true
            return Array(open.channels.values)
        }
        let timeouts = open.map { connection in
            connection.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
            return connection.eventLoop.scheduleTask(in: Self.shutdownGrace) { connection.close(promise: nil) }
        }
        for connection in open { try? await connection.closeFuture.get() }
        for timeout in timeouts { timeout.cancel() }
    }

    /// One connection's pipeline: TLS and the caller's certificate (under `ext_authz.tls`),
    /// swift-nio-http2's connection handler, the connection's window, its management, the calls.
    static func configure(
        _ channel: any Channel, tls: NIOSSLContext?, checks: ExtAuthzGRPCChecks, configuration: ExtAuthzConfiguration, logger: Logger
    ) throws {
        let sync = channel.pipeline.syncOperations
        if let tls {
            try sync.addHandler(NIOSSLServerHandler(context: tls))
            try sync.addHandler(ExtAuthzCallerCertificateGate(configuration: configuration, logger: logger, refusal: .perCall))
        }
        // A connection error (a flood, a header list past the limit, too many resets) closes the
        // connection after swift-nio-http2's GOAWAY, which leaves the close to the pipeline.
        try sync.addHandler(HTTP2ConnectionErrorHandler())
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: maximumConcurrentCalls),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
        ]
        try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: connection, streamConfiguration: .init()))
        // The connection's window lets one message of the largest size (1 MiB) flow without a stop.
        try sync.addHandler(HTTP2ConnectionWindow(target: ExtAuthzGRPCCall.maximumMessageBytes + 64 * 1024))
        // A stream's close passed on only after its opening (swift-nio-http2 reports the close of a
        // stream a malformed HEADERS never opened), for the handlers that count open streams.
        try sync.addHandler(HTTP2StreamEventPairing())
        // A caller that never answers the management handler's PING after its GOAWAY is closed anyway.
        try sync.addHandler(HTTP2GoAwayCloser(grace: .seconds(5)))
        try sync.addHandler(
            NIOHTTP2ServerConnectionManagementHandler(
                eventLoop: channel.eventLoop,
                configuration: .init(
                    maxIdleTime: idleTimeout, maxAge: configuration.tls != nil ? maximumAgeUnderTLS : nil, maxGraceTime: shutdownGrace,
                    // A caller gone without a word (its calls open) is found, as grpc-swift's server found it.
                    keepalive: .init(pingInterval: .hours(2), ackTimeout: .seconds(20)))))
        try sync.addHandler(ExtAuthzGRPCConnection(checks: checks))
    }
}

/// The gRPC listener's open connections, and whether it is stopping (a connection accepted then is closed).
struct OpenConnections {
    var channels: [ObjectIdentifier: any Channel] = [:]
    var stopping = false
}
