import DataPlane
import GRPCCore
import GRPCNIOTransportHTTP2
import Logging
import ServiceLifecycle

/// The listener of Envoy's gRPC ext_authz (`ext_authz.grpc_port`): grpc-swift 2's server over
/// HTTP/2 (h2c, or TLS with a client certificate required under `ext_authz.tls`), serving
/// `ExtAuthzService`, until a graceful shutdown ends it.
package struct ExtAuthzGRPCServer: Service {
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
        let address: GRPCNIOTransportCore.SocketAddress =
            configuration.host.contains(":") ? .ipv6(host: configuration.host, port: port) : .ipv4(host: configuration.host, port: port)
        var config = HTTP2ServerTransport.Posix.Config.defaults
        // A check is a few KiB (a buffered body at most 1 MiB, as over HTTP); an Envoy keeps few
        // connections, each with calls of its own in flight, and an idle one is closed.
        config.rpc.maxRequestPayloadSize = 1 << 20
        config.http2.maxConcurrentStreams = 1024
        config.connection.maxIdleTime = .seconds(300)
        // Under mutual TLS, a connection is closed (gracefully) after an hour, so its caller's
        // certificate is presented again: a check admitted it at each call, but the handshake's
        // chain check is made once a connection.
        if configuration.tls != nil { config.connection.maxAge = .seconds(3600) }
        var security = HTTP2ServerTransport.Posix.TransportSecurity.plaintext
        if let tls = configuration.tls { security = try ExtAuthzTLSCredentials(loading: tls).grpcTransportSecurity() }
        let transport = HTTP2ServerTransport.Posix(address: address, transportSecurity: security, config: config)
        let server = GRPCServer(transport: transport, services: [ExtAuthzService(plane: plane, configuration: configuration)])
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await server.serve() }
            let bound = try await transport.listeningAddress
            let boundPort = bound.ipv4?.port ?? bound.ipv6?.port ?? port
            logger.info("ext_authz (gRPC) listening", metadata: ["host": "\(configuration.host)", "port": "\(boundPort)", "tls": "\(configuration.tls != nil)"])
            await onListening(boundPort)
            await withGracefulShutdownHandler {
                try? await gracefulShutdown()
            } onGracefulShutdown: {
                server.beginGracefulShutdown()
            }
            server.beginGracefulShutdown()
        }
    }
}
