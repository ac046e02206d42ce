import DataPlane
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import ServiceLifecycle

/// The listener of Envoy's HTTP ext_authz (`ext_authz.http_port`): NIO's HTTP/1 server with
/// `ExtAuthzHTTPHandler` on each connection (behind TLS and `ExtAuthzCallerCertificateGate` under
/// `ext_authz.tls`), until a graceful shutdown closes it.
public struct ExtAuthzHTTPServer: Service {
    /// An idle connection (Envoy pools them) is closed after this long without a request.
    static let idleTimeout = TimeAmount.seconds(300)

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

    public func run() async throws {
        guard let port = configuration.httpPort else { return }
        let (plane, configuration, removalLists, logger) = (plane, configuration, ExtAuthzRemovalLists(), logger)
        let tls = try configuration.tls.map { tls in try NIOSSLContext(configuration: try ExtAuthzTLSCredentials(loading: tls).httpServerConfiguration) }
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
                return channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(IdleStateHandler(allTimeout: Self.idleTimeout))
                    try pipeline.addHandler(ExtAuthzIdleCloser())
                    if let tls {
                        try pipeline.addHandler(NIOSSLServerHandler(context: tls))
                        try pipeline.addHandler(ExtAuthzCallerCertificateGate(configuration: configuration, logger: logger))
                    }
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(ExtAuthzHTTPHandler(plane: plane, configuration: configuration, removalLists: removalLists))
                }
            }
            .bind(host: configuration.host, port: port).get()
        let bound = channel.localAddress?.port ?? port
        logger.info("ext_authz (HTTP) listening", metadata: ["host": "\(configuration.host)", "port": "\(bound)", "tls": "\(configuration.tls != nil)"])
        await onListening(bound)
        try await withGracefulShutdownHandler {
            try await channel.closeFuture.get()
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
    }
}

/// Closes a connection that has been idle for `ExtAuthzHTTPServer.idleTimeout`.
final class ExtAuthzIdleCloser: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
