import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// HTTP/2 connections to the upstreams of `protocol: h2c` and `protocol: h2` routes, one per
/// upstream per event loop, each carrying every stream its loop's requests open.
///
/// Only its own event loop touches it, as `UpstreamPool`. A connection is made on the first
/// stream asked for; streams asked for meanwhile wait for it. A connection that closes, or whose
/// upstream sent `GOAWAY`, takes no new stream: the next one asked for makes another.
final class UpstreamHTTP2Pool: @unchecked Sendable {  // loop-bound: every method runs on `eventLoop`
    let eventLoop: any EventLoop
    let connectTimeout: TimeAmount
    /// For `protocol: h2` upstreams: the upstream TLS context, offering `h2` by ALPN.
    let tls: NIOSSLContext?
    private var connections: [UpstreamOrigin: Connection] = [:]

    /// One connection: being made (with the streams waiting for it), or ready.
    final class Connection: @unchecked Sendable {  // loop-bound, as the pool
        var multiplexer: NIOHTTP2Handler.StreamMultiplexer?
        var channel: (any Channel)?
        var waiting: [(Result<Connection, any Error>) -> Void] = []
        /// The upstream sent `GOAWAY`, or the connection closed: no new stream goes on it.
        var draining = false
    }

    init(eventLoop: any EventLoop, tls: NIOSSLContext?, connectTimeout: TimeAmount = .seconds(2)) {
        self.eventLoop = eventLoop
        self.tls = tls
        self.connectTimeout = connectTimeout
    }

    /// A new stream to `origin`, with an `UpstreamStreamHandler` reading its answer; `done` runs on the loop.
    func openStream(to origin: UpstreamOrigin, _ done: @escaping (Result<UpstreamStream, any Error>) -> Void) {
        eventLoop.preconditionInEventLoop()
        connection(to: origin) { result in
            switch result {
            case .failure(let error):
                done(.failure(error))
            case .success(let connection):
                guard let multiplexer = connection.multiplexer else { return done(.failure(ChannelError.ioOnClosedChannel)) }
                let promise = connection.channel?.eventLoop.makePromise(of: (any Channel).self) ?? self.eventLoop.makePromise()
                multiplexer.createStreamChannel(promise: promise) { stream in
                    stream.eventLoop.makeCompletedFuture {
                        try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: origin.usesTLS ? .https : .http))
                        try stream.pipeline.syncOperations.addHandler(UpstreamStreamHandler())
                    }
                }
                promise.futureResult.assumeIsolated().whenComplete { result in
                    done(result.flatMap { stream in
                        Result { UpstreamStream(channel: stream, handler: try stream.pipeline.syncOperations.handler(type: UpstreamStreamHandler.self)) }
                    })
                }
            }
        }
    }

    private func connection(to origin: UpstreamOrigin, _ done: @escaping (Result<Connection, any Error>) -> Void) {
        if let connection = connections[origin], !connection.draining {
            if connection.multiplexer != nil { return done(.success(connection)) }
            connection.waiting.append(done)
            return
        }
        if origin.usesTLS && tls == nil { return done(.failure(ChannelError.inappropriateOperationForState)) }
        let connection = Connection()
        connection.waiting.append(done)
        connections[origin] = connection
        let tls = origin.usesTLS ? self.tls : nil
        ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: origin.serverHostname))
                    }
                    var settings = NIOHTTP2Handler.ConnectionConfiguration()
                    settings.initialSettings = [
                        HTTP2Setting(parameter: .enablePush, value: 0),
                        HTTP2Setting(parameter: .maxHeaderListSize, value: 64 * 1024),
                    ]
                    let multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .client, connectionConfiguration: settings, streamConfiguration: .init()
                    ) { stream in
                        // The upstream opens no stream of its own (push is off): refused.
                        stream.close()
                    }
                    try channel.pipeline.syncOperations.addHandler(UpstreamHTTP2GoawayWatch(connection: connection))
                    connection.multiplexer = multiplexer
                }
            }
            .connect(origin)
            .assumeIsolated()
            .whenComplete { [self] result in
                let waiting = connection.waiting
                connection.waiting = []
                switch result {
                case .success(let channel):
                    connection.channel = channel
                    channel.closeFuture.assumeIsolated().whenComplete { [self] _ in
                        connection.draining = true
                        if connections[origin] === connection { connections[origin] = nil }
                    }
                    for wait in waiting { wait(.success(connection)) }
                case .failure(let error):
                    connection.draining = true
                    if connections[origin] === connection { connections[origin] = nil }
                    for wait in waiting { wait(.failure(error)) }
                }
            }
    }
}

/// Marks an upstream HTTP/2 connection draining when the upstream sends `GOAWAY`, and closes it
/// on a connection error: its streams end, and the pool opens the next one on a new connection.
final class UpstreamHTTP2GoawayWatch: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    private let connection: UpstreamHTTP2Pool.Connection

    init(connection: UpstreamHTTP2Pool.Connection) {
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .goAway = unwrapInboundIn(data).payload { connection.draining = true }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is NIOHTTP2Errors.StreamError { return }
        connection.draining = true
        context.close(promise: nil)
    }
}
