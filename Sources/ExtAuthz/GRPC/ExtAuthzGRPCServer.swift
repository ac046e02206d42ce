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
        let connections = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let key = ObjectIdentifier(channel)
                connections.withLockedValue { $0[key] = channel }
                channel.closeFuture.whenComplete { _ in _ = connections.withLockedValue { $0.removeValue(forKey: key) } }
                return channel.eventLoop.makeCompletedFuture {
                    try Self.configure(channel, tls: tls, checks: checks, configuration: configuration, logger: logger)
                }
            }
            .bind(host: configuration.host, port: port).get()
        let bound = channel.localAddress?.port ?? port
        logger.info("ext_authz (gRPC) listening", metadata: ["host": "\(configuration.host)", "port": "\(bound)", "tls": "\(configuration.tls != nil)"])
        await onListening(bound)
        await withGracefulShutdownHandler {
            try? await channel.closeFuture.get()
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
        // Each connection is told to stop (GOAWAY), its open calls answered; any still open after the grace is closed.
        let open = connections.withLockedValue { Array($0.values) }
        for connection in open { connection.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
        for connection in open {
            let closed = connection.closeFuture
            let timeout = connection.eventLoop.scheduleTask(in: Self.shutdownGrace) { connection.close(promise: nil) }
            try? await closed.get()
            timeout.cancel()
        }
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
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: maximumConcurrentCalls),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
        ]
        try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: connection, streamConfiguration: .init()))
        // The connection's window lets one message of the largest size (1 MiB) flow without a stop.
        try sync.addHandler(HTTP2ConnectionWindow(target: ExtAuthzGRPCCall.maximumMessageBytes + 64 * 1024))
        // A caller that never answers the management handler's PING after its GOAWAY is closed anyway.
        try sync.addHandler(HTTP2GoAwayCloser(grace: .seconds(5)))
        try sync.addHandler(
            NIOHTTP2ServerConnectionManagementHandler(
                eventLoop: channel.eventLoop,
                configuration: .init(
                    maxIdleTime: idleTimeout, maxAge: configuration.tls != nil ? maximumAgeUnderTLS : nil, maxGraceTime: shutdownGrace, keepalive: nil)))
        try sync.addHandler(ExtAuthzGRPCConnection(checks: checks))
    }
}
