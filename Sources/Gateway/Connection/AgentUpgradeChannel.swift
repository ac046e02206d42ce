import DataPlane
import EdgeHTTP
import HTTPTypes
import Hummingbird
import HummingbirdCore
import JOSE
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import SocketGuard
import Traces

/// The gateway's child channel: HTTP/1 with a guarded WebSocket upgrade, or HTTP/2 (`+HTTP2`).
///
/// hummingbird-websocket answers every refused upgrade with an empty 400; an
/// auth edge must say why (401, 400, 404, 403, 429, with the JSON error). So
/// this channel owns the upgrade: NIO's typed upgrader asks `WebSocketGuard`
/// before any 101; a refusal is written as an ordinary HTTP response with its
/// real status and body, and the connection is closed. Requests that are not
/// upgrades go to the Hummingbird router as usual.
struct AgentUpgradeChannel: ServerChildChannel, HTTPChannelHandler {
    enum Outcome: Sendable {
        /// An ordinary HTTP connection.
        case http(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        /// An upgrade the guard refused: answer with this error.
        case refused(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, GatewayError)
        /// An upgraded socket, admitted: served by its `AgentSocketHandler` on the event loop.
        case websocket
        /// An HTTP/2 connection: each stream is served on the event loop, and the router's in a task of its own.
        case http2
    }

    struct Value: ServerChildChannelValue {
        let outcome: EventLoopFuture<Outcome>
        let channel: any Channel
    }

    /// The guard's decision for one connection's upgrade request.
    private enum Decision: Sendable {
        case notAgentPath
        case admitted(AdmittedSocket)
        case refused(GatewayError)
    }

    /// The size of a connection's first read, and so of the receive buffer NIO keeps for it: 1 KiB
    /// holds an agent's upgrade or an API request with a bearer token whole, and halves what an idle
    /// socket keeps against NIO's 2 KiB. A longer head (a browser's cookies) takes a second read,
    /// which the adaptive allocator then sizes up to, and the data plane's front waits for it.
    static let firstReadBytes = 1_024

    let responder: HTTPChannelHandler.Responder
    let guardian: WebSocketGuard
    let sockets: AgentSockets
    /// `gateway.routes` served on the event loop; `nil` without fast routes.
    let dataPlane: DataPlane?
    let maximumMessageBytes: Int
    let limits: EdgeLimits
    let connections: ConnectionCounter
    /// `gateway.http2`: HTTP/2 beside HTTP/1.1, told apart by the connection's first bytes.
    let http2: Bool
    /// `tracing` on: a span for each agent socket's upgrade.
    let tracing: AgentUpgradeTracing?

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        // Over the connection limit: a JSON 503 straight to the socket, then close.
        guard connections.acquire() else {
            let answer = RawResponse.bytes(GatewayError.unavailable("the gateway has too many open connections; try again shortly"))
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(AnswerAndCloseHandler(answer: answer))
                return Value(outcome: channel.eventLoop.makeFailedFuture(ChannelError.inappropriateOperationForState), channel: channel)
            }
        }
        let connections = self.connections
        channel.closeFuture.whenComplete { _ in connections.release() }
        return channel.eventLoop.makeCompletedFuture {
            // NIO keeps a connection's first receive buffer for its later reads, so its first guess is
            // what an idle connection holds for good (see `firstReadBytes`).
            try channel.syncOptions?.setOption(
                ChannelOptions.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: Self.firstReadBytes, maximum: 65_536))
            try channel.pipeline.syncOperations.addHandler(RequestHeadTimeoutHandler(timeout: .milliseconds(Int64(limits.requestHeadTimeout * 1000))))
            guard http2 else { return Value(outcome: try configureHTTP1(channel: channel, logger: logger), channel: channel) }
            // HTTP/2 or HTTP/1, by the first bytes (the preface); the pipeline for it is built then.
            let outcome = channel.eventLoop.makePromise(of: Outcome.self)
            let sniffer = HTTP2PrefaceSniffer(
                timeout: .milliseconds(Int64(limits.requestHeadTimeout * 1000)),
                configure: { isHTTP2 in
                    if isHTTP2 {
                        try configureHTTP2(channel: channel, logger: logger)
                        outcome.succeed(.http2)
                    } else {
                        outcome.completeWith(try configureHTTP1(channel: channel, logger: logger))
                    }
                },
                abandoned: { outcome.fail(ChannelError.eof) })
            do {
                try channel.pipeline.syncOperations.addHandler(sniffer)
            } catch {
                // Never added, the sniffer cannot tell the task: told here, as for the front (`configureHTTP1`).
                outcome.fail(error)
                throw error
            }
            return Value(outcome: outcome.futureResult, channel: channel)
        }
    }

    /// The HTTP/1 pipeline after the head timeout: with routes, the data plane's front, and
    /// behind it, once the front hands the connection on, NIO's codec, the guarded upgrade and
    /// what serves the requests that are not upgrades; without routes, those from the start.
    func configureHTTP1(channel: any Channel, logger: Logger) throws -> EventLoopFuture<Outcome> {
        // Without routes, nothing to serve from the bytes: NIO's pipeline from the start.
        guard let dataPlane, !dataPlane.table.current.routes.isEmpty else {
            return try configureDecodingPipeline(channel: channel, logger: logger)
        }
        // Plain route requests are served from the bytes, ahead of NIO's decoder; the first other
        // request hands the connection on, and only then is NIO's pipeline built behind the front
        // (a connection of plain requests, idle or busy, never holds it). Ended before, the
        // connection's task learns it from the front.
        let outcome = channel.eventLoop.makePromise(of: Outcome.self)
        let front = ProxyFrontHandler(
            plane: dataPlane,
            limits: .init(
                maximumHeadBytes: limits.maximumHeaderBytes, maximumFieldCount: limits.maximumHeaderCount,
                maximumFieldBytes: limits.maximumHeaderFieldBytes),
            idleTimeout: .milliseconds(Int64(limits.idleTimeout * 1000)), headTimeout: .milliseconds(Int64(limits.requestHeadTimeout * 1000)),
            requestTimeout: .milliseconds(Int64(limits.requestTimeout * 1000)),
            buildPipelineBehind: { outcome.completeWith(try configureDecodingPipeline(channel: channel, logger: logger)) },
            endedBeforeHandOn: { outcome.fail(ChannelError.eof) })
        do {
            try channel.pipeline.syncOperations.addHandler(front)
        } catch {
            // Never added, the front cannot tell the task: told here (a promise left open would hold it for good).
            outcome.fail(error)
            throw error
        }
        return outcome.futureResult
    }

    /// NIO's codec, the guarded upgrade, and what serves the requests that are not upgrades.
    private func configureDecodingPipeline(channel: any Channel, logger: Logger) throws -> EventLoopFuture<Outcome> {
        // Set by shouldUpgrade, read when the pipeline is rebuilt; one upgrade per connection.
        let decision = NIOLockedValueBox<Decision?>(nil)
        // Whether the first request asked for a WebSocket on a route (the screen says, the data plane reads).
        let routeUpgrades = RouteUpgradeOffer()
        let guardian = self.guardian
        let links = sockets.links
        let tracing = self.tracing
        let handshake = NIOTypedWebSocketServerUpgrader<Outcome>(
            maxFrameSize: maximumMessageBytes,
            shouldUpgrade: { channel, head in
                let request = UpgradeRequest(uri: head.uri, headers: head.headers.map { ($0.name, $0.value) })
                // The agent path is the gateway's on the public host; on a route host it is the route's (or nobody's).
                guard request.path == WebSocketGuard.path, Self.isGatewayPath(request.path, host: head.headers.first(name: "host"), dataPlane: dataPlane) else {
                    decision.withLockedValue { $0 = .notAgentPath }
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                // Traced: the span ends with the 101 or the refusal, as the decision left it.
                let span = tracing?.start(head, peer: channel.remoteAddress)
                let traced = { @Sendable (answer: EventLoopFuture<HTTPHeaders?>) -> EventLoopFuture<HTTPHeaders?> in
                    guard let span else { return answer }
                    answer.whenComplete { _ in
                        switch decision.withLockedValue({ $0 }) {
                        case .admitted(let socket): AgentUpgradeTracing.end(span, admitted: socket.caller, refusal: nil)
                        case .refused(let error): AgentUpgradeTracing.end(span, admitted: nil, refusal: error)
                        case .notAgentPath, nil: AgentUpgradeTracing.end(span, admitted: nil, refusal: nil)
                        }
                    }
                    return answer
                }
                // The opening handshake has no body (RFC 6455 §4.1); NIO's upgrader would wait for the end of
                // one that never comes, with no deadline: refused before anything else.
                if head.headers.contains(name: "transfer-encoding") || head.headers["content-length"].contains(where: { $0 != "0" }) {
                    decision.withLockedValue {
                        $0 = .refused(.invalidRequest("a WebSocket upgrade request has no body; send it without Content-Length or Transfer-Encoding"))
                    }
                    return traced(channel.eventLoop.makeSucceededFuture(nil))
                }
                let registry = guardian.registry
                let decide = { @Sendable (result: Result<AdmittedSocket, GatewayError>) -> HTTPHeaders? in
                    switch result {
                    case .success(let socket):
                        // The socket holds a slot in its session's limit from here; whatever
                        // happens to the upgrade, the connection's end gives it back.
                        // (The registration alone is kept: the callback lives as long as the socket.)
                        let registration = socket.registration
                        channel.closeFuture.whenComplete { _ in registry.unregister(registration) }
                        decision.withLockedValue { $0 = .admitted(socket) }
                        // The agent subprotocol when offered; never a credential offered beside it.
                        return request.offersAgentProtocol ? HTTPHeaders([("Sec-WebSocket-Protocol", UpgradeRequest.agentProtocol)]) : HTTPHeaders()
                    case .failure(let error):
                        decision.withLockedValue { $0 = .refused(error) }
                        return nil
                    }
                }
                // Admitted, it answers 101 only with this loop's link to the Runtime open (at once
                // when it is); while the Runtime is away, 503 rather than a 101 and then 1011.
                let withLink = { @Sendable (headers: HTTPHeaders?) -> EventLoopFuture<HTTPHeaders?> in
                    guard let headers else { return channel.eventLoop.makeSucceededFuture(nil) }
                    let link = links.link(for: channel.eventLoop)
                    if link.isOpen { return channel.eventLoop.makeSucceededFuture(headers) }
                    return link.whenOpen().map { open in
                        guard open else {
                            decision.withLockedValue { $0 = .refused(RuntimeAgentLinks.unavailable) }
                            return nil
                        }
                        return headers
                    }
                }
                // On the event loop when the caches can answer; otherwise the store and the Runtime are asked.
                if let result = guardian.admitUpgradeWithoutSuspending(request) {
                    return traced(withLink(decide(result)))
                }
                let promise = channel.eventLoop.makePromise(of: HTTPHeaders?.self)
                let calls = span.flatMap { span in tracing.map { CallSpans(tracer: $0.tracer, parent: span) } }
                // The store's and the Runtime's answers, traced as the upgrade's calls.
                promise.completeWithTask { decide(await CallSpans.$current.withValue(calls) { await guardian.admitUpgrade(request) }) }
                return traced(promise.futureResult.flatMap(withLink))
            },
            // Never called: `AgentSocketUpgrader` builds the socket's pipeline itself.
            upgradePipelineHandler: { channel, _ in channel.eventLoop.makeFailedFuture(ChannelError.inappropriateOperationForState) }
        )
        let maximumMessageBytes = self.maximumMessageBytes
        let upgrader = AgentSocketUpgrader(handshake: handshake) { channel, _ in
            channel.eventLoop.makeCompletedFuture {
                guard case .admitted(let socket) = decision.withLockedValue({ $0 }) else {
                    throw ChannelError.inappropriateOperationForState
                }
                // An HTTP parse error can no longer happen here: the responder goes, and its memory with it.
                _ = channel.pipeline.syncOperations.removeHandler(name: HTTPParseErrorResponder.name)
                // Whole messages, at most the configured size (1009 beyond).
                try channel.pipeline.syncOperations.addHandler(AgentFrameCodec(maximumMessageBytes: maximumMessageBytes))
                try channel.pipeline.syncOperations.addHandler(AgentSocketHandler(sockets: sockets, admitted: socket))
                return Outcome.websocket
            }
        }
        let configuration = NIOTypedHTTPServerUpgradeConfiguration(
            upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in
                channel.eventLoop.makeCompletedFuture {
                    let idleMilliseconds = Int64(limits.idleTimeout * 1000)
                    // From here RequestTargetHandler answers parse errors, in turn after the answers owed.
                    _ = channel.pipeline.syncOperations.removeHandler(name: HTTPParseErrorResponder.name)
                    // First: every request's path in its one spelling, or a 400 (the router, the data plane
                    // and every upstream see the same path).
                    try channel.pipeline.syncOperations.addHandler(RequestTargetHandler(logger: logger))
                    // The data plane takes its requests in NIO's HTTP/1 types, before any conversion; it keeps
                    // the connection's idle timeout and graceful close, since the handlers after it see only
                    // the requests it passes on.
                    if let dataPlane {
                        try channel.pipeline.syncOperations.addHandler(ProxyChannelHandler(
                                plane: dataPlane, idleTimeout: .milliseconds(idleMilliseconds),
                                requestTimeout: .milliseconds(Int64(limits.requestTimeout * 1000)), upgradeOffer: routeUpgrades))
                    }
                    try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                    try channel.pipeline.syncOperations.addHandler(
                        HTTPConnectionStateHandler(idleTimeout: dataPlane == nil ? .milliseconds(idleMilliseconds) : nil, logger: logger))
                    let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                        wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                    if case .refused(let error) = decision.withLockedValue({ $0 }) {
                        return Outcome.refused(asyncChannel, error)
                    }
                    return Outcome.http(asyncChannel)
                }
            }
        )
        let outcome = try Self.configureHTTPPipeline(on: channel, limits: limits, upgrades: configuration, dataPlane: dataPlane, routeUpgrades: routeUpgrades)
        // Parse errors of the first head (before the upgrade is decided); RequestTargetHandler answers them after.
        try channel.pipeline.syncOperations.addHandler(HTTPParseErrorResponder(), name: HTTPParseErrorResponder.name)
        return outcome
    }

    /// Whether the gateway itself serves `path` on `host` (no route, and not a route host's).
    static func isGatewayPath(_ path: String, host: String?, dataPlane: DataPlane?) -> Bool {
        guard let dataPlane, case .gateway = dataPlane.table.current.match(host: host, path: path[...]) else { return dataPlane == nil }
        return true
    }

    /// NIO's HTTP/1 server codec and the upgrade handler, as `configureUpgradableHTTPServerPipeline`
    /// assembles them but with the request decoder unpaired from the response encoder.
    ///
    /// Paired, the encoder takes one decoded request's method back for every answer head it
    /// writes, to frame answers to `HEAD` without a body; relayed answers are written past it
    /// (`ProxyChannelHandler.writeBytesToClient`), so from the first one on, every answer it wrote
    /// was framed for an earlier request. Unpaired, it frames by status alone, and
    /// `RequestTargetHandler` frames answers to `HEAD` from its own books, which every answer settles.
    /// No pipelining handler (the data plane queues pipelined requests itself), no NIO error
    /// handler (`HTTPParseErrorResponder` and `RequestTargetHandler` answer in JSON), no outbound
    /// header validation (every answer's fields are the gateway's or screened).
    static func configureHTTPPipeline(
        on channel: any Channel, limits: EdgeLimits, upgrades: NIOTypedHTTPServerUpgradeConfiguration<Outcome>, dataPlane: DataPlane?,
        routeUpgrades: RouteUpgradeOffer? = nil
    ) throws -> EventLoopFuture<Outcome> {
        var decoderLimits = NIOHTTPDecoderLimitConfiguration()
        decoderLimits.maxHeaderListSize = limits.maximumHeaderBytes
        decoderLimits.maxHeaderFieldCount = limits.maximumHeaderCount
        decoderLimits.maxHeaderFieldSize = limits.maximumHeaderFieldBytes
        let encoder = HTTPResponseEncoder(configuration: .init())
        let decoder = ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, limitConfiguration: decoderLimits))
        try channel.pipeline.syncOperations.addHandler(encoder)
        try channel.pipeline.syncOperations.addHandler(decoder)
        // An upgrade other than the agent socket's is served as plain HTTP/1.1, never dropped unanswered.
        let screen = UpgradeOfferScreen(dataPlane: dataPlane, routeUpgrades: routeUpgrades)
        try channel.pipeline.syncOperations.addHandler(screen)
        let upgrader = NIOTypedHTTPServerUpgradeHandler(httpEncoder: encoder, extraHTTPHandlers: [decoder, screen], upgradeConfiguration: upgrades)
        try channel.pipeline.syncOperations.addHandler(upgrader)
        return upgrader.upgradeResultFuture
    }

    /// Waits for the connection's outcome, then serves it when it is Hummingbird's to serve.
    ///
    /// This task lives as long as the connection, plain requests served on the event loop
    /// included, so what it holds while it waits is held by every idle connection. An async
    /// function's frame is sized for all it does, so the wait and the serving are functions of
    /// their own, never inlined: waiting holds only the wait's small frame.
    func handle(value: Value, logger: Logger) async {
        await serve(Self.wait(for: value.outcome), logger: logger)
    }

    /// The outcome, once the pipeline has decided it (see `handle`).
    @inline(never)
    private static func wait(for outcome: EventLoopFuture<Outcome>) async -> Result<Outcome, any Error> {
        do {
            return .success(try await outcome.get())
        } catch {
            return .failure(error)
        }
    }

    /// Serves the outcome: Hummingbird's request loop, or the upgrade's refusal (see `handle`).
    @inline(never)
    private func serve(_ outcome: Result<Outcome, any Error>, logger: Logger) async {
        switch outcome {
        case .success(.http(let http)):
            await handleHTTP(asyncChannel: http, logger: logger)
        case .success(.refused(let http, let error)):
            await Self.writeRefusal(error, on: http, logger: logger)
        case .success(.websocket), .success(.http2):
            return
        case .failure(let error):
            // Also every connection of plain requests only (served by the front; nothing was handed on).
            logger.debug("connection ended before NIO's pipeline decided a request", metadata: ["error_type": "\(type(of: error))"])
        }
    }

    /// The refusal as an HTTP response with its status and JSON body; then the connection closes.
    static func writeRefusal(_ error: GatewayError, on channel: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, logger: Logger) async {
        do {
            try await channel.executeThenClose { _, outbound in
                var headers = error.headers
                let body = ByteBuffer(bytes: JSONWriter.bytes(error.json))
                headers[.connection] = "close"
                headers[.contentLength] = String(body.readableBytes)
                try await outbound.write(contentsOf: [.head(HTTPResponse(status: error.status, headerFields: headers)), .body(body), .end(nil)])
            }
        } catch {
            logger.trace("could not write an upgrade refusal", metadata: ["error_type": "\(type(of: error))"])
        }
        logger.info(
            "request", metadata: ["route": "\(WebSocketGuard.path)", "status": "\(error.status.code)", "error": "\(error.code)", "upgrade": "refused"])
    }
}

extension HTTPServerBuilder {
    /// HTTP/1 with the guarded agent-socket upgrade.
    static func http1WithAgentSocket(
        guardian: WebSocketGuard, sockets: AgentSockets, dataPlane: DataPlane?, maximumMessageBytes: Int, limits: EdgeLimits, http2: Bool = false,
        tracing: AgentUpgradeTracing? = nil
    ) -> HTTPServerBuilder {
        let connections = ConnectionCounter(limit: limits.maximumConnections)
        return .init { responder in
            AgentUpgradeChannel(
                responder: responder, guardian: guardian, sockets: sockets, dataPlane: dataPlane, maximumMessageBytes: maximumMessageBytes, limits: limits,
                connections: connections, http2: http2, tracing: tracing)
        }
    }
}
