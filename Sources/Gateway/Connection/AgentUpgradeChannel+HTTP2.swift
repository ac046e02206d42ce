import DataPlane
import EdgeHTTP
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

extension AgentUpgradeChannel {
    /// The HTTP/2 pipeline after the head timeout: swift-nio-http2's connection handler, bounded
    /// by `limits.*`; the data plane's route streams served on the connection (`HTTP2RouteStreams`);
    /// and a stream channel for every other request, built as an HTTP/1 connection's requests are
    /// served: the same target screen, the same data plane, the same router.
    ///
    /// A stream channel is converted to NIO's HTTP/1 types (`HTTP2FramePayloadToHTTP1ServerCodec`:
    /// `:authority` becomes `Host`, the pseudo-header and connection-specific field rules are
    /// swift-nio-http2's), so no decision exists twice. A stream under a route is answered by the
    /// data plane on the event loop; any other goes to the router, in a task of its own started
    /// only then (`HTTP2StreamHandoff`). A route request with no body skips the stream channel
    /// (`HTTP2RouteStreams`), and reaches the same exchange.
    func configureHTTP2(channel: any Channel, logger: Logger) throws {
        let sync = channel.pipeline.syncOperations
        // Idle connections close, a graceful stop sends GOAWAY and closes once the streams are done.
        let management = NIOHTTP2ServerConnectionManagementHandler(
            eventLoop: channel.eventLoop,
            configuration: .init(maxIdleTime: .milliseconds(Int64(limits.idleTimeout * 1000)), maxAge: nil, maxGraceTime: nil, keepalive: nil))
        // Between the socket and the HTTP/2 handler: the connection's flushes gathered per tick, and
        // the close that follows a connection error's GOAWAY.
        try sync.addHandler(HTTP2FlushCoalescer())
        try sync.addHandler(HTTP2ConnectionErrorHandler())
        let connection = Self.http2Connection(limits)
        let streams = Self.http2Stream(limits)
        try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: connection, streamConfiguration: streams))
        try sync.addHandler(HTTP2ConnectionWindow(target: connection.targetWindowSize))
        // Route streams first: their frames and window events end there, and only their opening and
        // close go on (each event a handler passes on is paid for by every request).
        let requestIDs = SharedRequestIDs()
        if let dataPlane { try sync.addHandler(HTTP2RouteStreams(plane: dataPlane, requestIDs: requestIDs)) }
        // Sees every stream open and close (their events, paired), whichever way it is served.
        try sync.addHandler(HTTP2StreamEventPairing())
        // A client that never acknowledges the management handler's PING is closed anyway.
        try sync.addHandler(HTTP2GoAwayCloser(grace: .milliseconds(Int64(min(limits.idleTimeout, 5) * 1000))))
        try sync.addHandler(management)
        let boundIDs = NIOLoopBound(requestIDs, eventLoop: channel.eventLoop)
        try sync.addHandler(
            HTTP2StreamMultiplexer(
                mode: .server, channel: channel, targetWindowSize: streams.targetWindowSize,
                outboundBufferSizeHighWatermark: streams.outboundBufferSizeHighWatermark,
                outboundBufferSizeLowWatermark: streams.outboundBufferSizeLowWatermark
            ) { stream in
                stream.eventLoop.makeCompletedFuture { try configureStream(stream, requestIDs: boundIDs.value, logger: logger) }
            })
        // The channel was active before these handlers came: the management handler's idle timer starts now.
        try sync.addHandler(ChannelActiveReplay(), position: .before(management))
    }

    /// One stream's pipeline: the HTTP/1 types, the target screen, the data plane, and the router's hand-off.
    private func configureStream(_ stream: any Channel, requestIDs: SharedRequestIDs, logger: Logger) throws {
        let sync = stream.pipeline.syncOperations
        try sync.addHandler(HTTP2StreamEarlyAnswer())
        try sync.addHandler(HTTP2RequestHeadCheck())
        try sync.addHandler(GRPCTrailersOnly())
        try sync.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
        try sync.addHandler(RequestTargetHandler(logger: logger))
        if let dataPlane {
            try sync.addHandler(
                ProxyChannelHandler(
                    plane: dataPlane, idleTimeout: .milliseconds(Int64(limits.idleTimeout * 1000)),
                    requestTimeout: .milliseconds(Int64(limits.requestTimeout * 1000)), requestIDs: requestIDs, watchesIdle: false))
        }
        try sync.addHandler(
            HTTP2StreamHandoff { stream in
                try stream.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(wrappingChannelSynchronously: stream)
                Task { await handleHTTP(asyncChannel: asyncChannel, logger: logger) }
            })
    }

    /// The connection's settings and its defences: `limits.h2_max_concurrent_streams`, the header
    /// list bounded by `limits.max_header_bytes` (HPACK's decoded size: a decompression bomb stops
    /// there), and swift-nio-http2's bounds on CONTINUATION frames, control frames (SETTINGS and PING
    /// floods) and the outbound control frames a client that never reads makes the gateway hold.
    static func http2Connection(_ limits: EdgeLimits) -> NIOHTTP2Handler.ConnectionConfiguration {
        var configuration = NIOHTTP2Handler.ConnectionConfiguration()
        configuration.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: limits.http2MaximumConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: limits.maximumHeaderBytes),
        ]
        // Streams keep HTTP/2's 64 KiB window; the connection's is larger, so several streams' bodies
        // flow at once, and bounds what one connection may have sent that was not read yet.
        configuration.targetWindowSize = 256 * 1024
        return configuration
    }

    /// The reset limit (Rapid Reset): `limits.h2_max_resets_per_second`, counted over 10 s.
    static func http2Stream(_ limits: EdgeLimits) -> NIOHTTP2Handler.StreamConfiguration {
        var configuration = NIOHTTP2Handler.StreamConfiguration()
        configuration.streamResetFrameRateLimit.maximumCount = limits.http2MaximumResetsPerSecond * 10
        configuration.streamResetFrameRateLimit.windowLength = .seconds(10)
        return configuration
    }
}
