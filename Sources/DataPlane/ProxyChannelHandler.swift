import EdgeHTTP
import JOSE
import Logging
import NIOCore
import NIOHTTP1
import TrafficCop

/// Serves `gateway.routes` requests on the client connection's event loop,
/// from request head to response end, with no hop to the Swift concurrency
/// pool on the common path.
///
/// Serves what the front (`ProxyFrontHandler`) hands on: from the first request that is not plain
/// to the end of the connection. Sits right after NIO's HTTP/1 codec and the request-target screen, before
/// the conversion to HTTPTypes and Hummingbird's channel: a request whose path
/// is under a fast route is answered here (`ProxyExchange`), in NIO's own
/// HTTP/1 types, with no conversion; any other request passes through
/// untouched. Since Hummingbird's connection-state handler sees only the
/// requests passed on, this handler keeps the connection's idle timeout and
/// its graceful close (quiesce) for all of them. One request is in flight per connection:
/// parts of a later request that arrive early (pipelining) wait in a queue
/// until the current answer has ended, whoever gave it. While anything waits,
/// the connection is not read (so a client that pipelines without reading the
/// answers holds at most one read's worth here), and a queue past
/// `maximumQueuedBytes` closes the connection.
///
/// Every request, proxied or not, must arrive whole within `requestTimeout` of
/// its head (`limits.request_timeout_seconds`): a body that trickles in is
/// answered 408 `request_timeout` (or the connection closed, if its answer has
/// begun) however often its bytes come, which the idle timeout alone cannot do.
/// The rest of a request refused before its body ended is read and dropped up
/// to `maximumDrainBytes`, then the connection is closed.
package final class ProxyChannelHandler: ChannelDuplexHandler, RemovableChannelHandler, SerialProxyExchangeHost {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = HTTPServerRequestPart
    package typealias OutboundIn = HTTPServerResponsePart
    package typealias OutboundOut = HTTPServerResponsePart

    enum State {
        case idle
        /// A request Hummingbird answers; the next starts when both halves have ended.
        case passthrough(requestDone: Bool, responseDone: Bool)
        case proxying(ProxyExchange)
        /// Answered already: the rest of the request is read and dropped (up to `maximumDrainBytes`).
        case draining(bytes: Int)
    }

    let plane: DataPlane
    private(set) var state = State.idle
    private var queued = CircularBuffer<HTTPServerRequestPart>()
    private(set) var context: ChannelHandlerContext?
    /// The context of NIO's response encoder: a write through it goes past the encoder, straight
    /// toward the socket, so a relayed answer is written as the bytes `ProxyExchange` framed.
    private var byteOutlet: ChannelHandlerContext?
    private(set) var pool: UpstreamPool?
    private(set) var metricHandles: ProxyMetricHandles?
    /// This connection's copy of the routes in force (`LiveRouteTable.refresh` before each request).
    private var routeTable: RouteTable
    private(set) var headBuffers: HeadBuffers?
    /// Bytes of queued body parts.
    private var queuedBytes = 0
    /// Reads held back while the upstream cannot take more of the request body.
    private var holdingReads = false
    /// Reads held back while a pipelined request waits in the queue.
    private var queueHoldsReads = false
    private var readPending = false
    /// The checks scheduled on the event loop (idle, request deadline; the upstream deadline's is
    /// `upstreamDeadlineCheck`), cancelled when the connection goes: a closed connection's check would
    /// otherwise stay in the loop's timer heap until it fired (up to `idleTimeout` later), a cost per connection opened.
    private var scheduledChecks: (idle: Scheduled<Void>?, request: Scheduled<Void>?) = (nil, nil)
    var upstreamDeadlineCheck: UpstreamDeadlineCheck?
    var currentExchange: ProxyExchange? {
        guard case .proxying(let exchange) = state else { return nil }
        return exchange
    }
    /// How long the client may send nothing, between requests or within one (`limits.idle_timeout_seconds`).
    let idleTimeout: TimeAmount
    /// Whether this handler closes its channel after `idleTimeout` (not on an HTTP/2 stream, whose connection does).
    let watchesIdle: Bool
    /// When the client last sent a part of a request, or the last answer ended; the idle check measures from here.
    private var lastActive = NIODeadline.now()
    /// Whether the idle check is scheduled (one per connection, re-armed only when it fires).
    private var idleCheckScheduled = false
    /// A graceful shutdown asked this connection to close once its current request is answered.
    private var closeWhenIdle = false
    /// How long a whole request may take to arrive, from its head (`limits.request_timeout_seconds`).
    let requestTimeout: TimeAmount
    /// When the request being read began; `nil` once its end has been read.
    private var requestStartedAt: NIODeadline?
    /// Whether the request-deadline check is scheduled (one per connection, re-armed only when it fires).
    private var requestCheckScheduled = false
    /// A passthrough answer has begun (its head was written).
    private var passthroughAnswerStarted = false
    /// Hummingbird's writes are dropped: the gateway answered the request itself (a request timeout).
    private var droppingWrites = false
    /// Request ids: a prefix from the CSPRNG once per connection, then a counter.
    private lazy var requestIDs = ConnectionRequestIDs()
    /// An HTTP/2 stream's: its connection's request ids.
    private let sharedRequestIDs: SharedRequestIDs?
    /// Something was passed on to Hummingbird's handlers since the last end of a read cycle.
    private var passedOn = false
    /// The client's address as text, made once per connection (for `X-Forwarded-For`).
    private(set) lazy var peerAddress: String? = context?.channel.remoteAddress?.ipAddress

    /// The most a connection's queue may hold before the connection is closed: more than
    /// one read can bring only when a client keeps sending past what it was asked for.
    let maximumQueuedBytes: Int

    /// The most of a refused request's body read and dropped before the connection is closed
    /// instead (the answer was sent; reading a little lets the client see it rather than a reset).
    static let maximumDrainBytes = 64 * 1024

    /// Says whether the head being started asked for a WebSocket on a route (`UpgradeOfferScreen` sets it).
    let upgradeOffer: RouteUpgradeOffer?

    package init(
        plane: DataPlane, idleTimeout: TimeAmount, requestTimeout: TimeAmount = .seconds(30), upgradeOffer: RouteUpgradeOffer? = nil,
        requestIDs: SharedRequestIDs? = nil, watchesIdle: Bool = true
    ) {
        self.watchesIdle = watchesIdle
        self.upgradeOffer = upgradeOffer
        sharedRequestIDs = requestIDs
        self.plane = plane
        self.idleTimeout = idleTimeout
        self.requestTimeout = requestTimeout
        maximumQueuedBytes = plane.maximumQueuedBytes
        routeTable = plane.table.current
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        byteOutlet = try? context.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self)
        pool = plane.pool(for: context.eventLoop)
        metricHandles = plane.metricHandles(for: context.eventLoop)
        headBuffers = plane.headBuffers(for: context.eventLoop)
        lastActive = .now()
        // An HTTP/2 stream carries one request; its connection's idle time is watched by the connection.
        if watchesIdle { scheduleIdleCheck(at: lastActive + idleTimeout) }
    }

    func nextRequestID() -> String {
        sharedRequestIDs?.next() ?? requestIDs.next()
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        byteOutlet = nil
        scheduledChecks.idle?.cancel()
        scheduledChecks.request?.cancel()
        upstreamDeadlineCheck?.task.cancel()
        scheduledChecks = (nil, nil)
        upstreamDeadlineCheck = nil
    }

    // MARK: Inbound: request parts

    /// The end of a read cycle reaches Hummingbird's handlers only when a part of this cycle did:
    /// a cycle of proxied requests is none of their business.
    package func channelReadComplete(context: ChannelHandlerContext) {
        armRequestCheck()
        guard passedOn else { return }
        passedOn = false
        context.fireChannelReadComplete()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastActive = .now()
        handle(unwrapInboundIn(data), context: context)
    }

    private func handle(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch state {
        case .idle:
            // The path is normalised already (RequestTargetHandler, before this handler).
            // A CORS preflight from an allowed origin is answered by the API's origin policy; any other
            // request under a route (OPTIONS too) is proxied, and refused here when not admitted.
            var asksWebSocket = false
            if case .head = part {
                plane.table.refresh(&routeTable)
                asksWebSocket = upgradeOffer?.take() ?? false
            }
            guard case .head(let head) = part, !routeTable.isAllowedPreflight(head),
                case let (path, query) = RequestTarget.split(head.uri[...]),
                let (route, remainder) = routeTable.route(host: routeTable.hasHostRoutes ? head.headers.first(name: "host") : nil, path: path)
            else {
                if case .head = part {
                    state = .passthrough(requestDone: false, responseDone: false)
                    passthroughAnswerStarted = false
                    requestStarted()
                }
                passedOn = true
                context.fireChannelRead(wrapInboundOut(part))
                return
            }
            let exchange = ProxyExchange(
                handler: self, eventLoop: context.eventLoop, route: route, head: head, path: path, remainder: remainder, query: query,
                webSocket: asksWebSocket && head.method == .GET)
            state = .proxying(exchange)
            requestStarted()
            exchange.start()
        case .passthrough(let requestDone, let responseDone):
            if requestDone {
                enqueue(part, context: context)
                return
            }
            if case .end = part {
                state = .passthrough(requestDone: true, responseDone: responseDone)
                requestStartedAt = nil
                passedOn = true
                context.fireChannelRead(wrapInboundOut(part))
                if responseDone { becomeIdle() }
            } else {
                passedOn = true
                context.fireChannelRead(wrapInboundOut(part))
            }
        case .proxying(let exchange):
            if exchange.requestEnded {
                enqueue(part, context: context)
            } else {
                if case .end = part { requestStartedAt = nil }
                exchange.clientRead(part)
            }
        case .draining(let bytes):
            switch part {
            case .end:
                becomeIdle()
            case .body(let buffer) where bytes + buffer.readableBytes > Self.maximumDrainBytes:
                // More than a refused request deserves: close rather than read on.
                context.close(promise: nil)
            case .body(let buffer):
                state = .draining(bytes: bytes + buffer.readableBytes)
            case .head:
                break
            }
        }
    }

    /// Keeps a part of a request that came before the current one ended, and stops reading
    /// until it has been taken; closes the connection when the queue grows past its bound.
    private func enqueue(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        if case .body(let buffer) = part { queuedBytes += buffer.readableBytes }
        queued.append(part)
        queueHoldsReads = true
        if queuedBytes > maximumQueuedBytes || queued.count > Self.maximumQueuedParts {
            plane.logger.info("pipelined requests past the connection's bound; closing it", metadata: ["queued_bytes": "\(queuedBytes)"])
            queued.removeAll()
            queuedBytes = 0
            context.close(promise: nil)
        }
    }

    /// Parts one connection may queue (heads and body chunks of pipelined requests).
    static let maximumQueuedParts = 4_096

    /// The current request is over in both directions: take the next one, if it came already.
    private func becomeIdle() {
        state = .idle
        requestStartedAt = nil
        lastActive = .now()
        guard let context else { return }
        if closeWhenIdle {
            // The answer's end may still wait for its flush: out first, then the close.
            context.flush()
            context.close(promise: nil)
            return
        }
        guard !queued.isEmpty else {
            releaseQueueHold()
            return
        }
        let parts = Array(queued)
        queued.removeAll()
        queuedBytes = 0
        for part in parts { handle(part, context: context) }
        armRequestCheck()
        // Hummingbird's channel hands reads on at the end of a read cycle; these came outside one.
        passedOn = false
        context.fireChannelReadComplete()
        if queued.isEmpty { releaseQueueHold() }
    }

    /// Called by the exchange once its answer has ended (or failed).
    func exchangeFinished(requestEnded: Bool, closeConnection: Bool) {
        resumeReads()
        if closeConnection {
            context?.close(promise: nil)
            return
        }
        if requestEnded { becomeIdle() } else { state = .draining(bytes: 0) }
    }

    // MARK: Outbound: Hummingbird's answers pass through; the end of one frees the connection

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if droppingWrites {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        guard case .passthrough(let requestDone, let responseDone) = state else {
            context.write(data, promise: promise)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head:
            passthroughAnswerStarted = true
            context.write(data, promise: promise)
        case .end where !responseDone:
            context.write(data, promise: promise)
            if requestDone { becomeIdle() } else { state = .passthrough(requestDone: false, responseDone: true) }
        default:
            context.write(data, promise: promise)
        }
    }

    /// The upstream answered the exchange's WebSocket handshake with 101: NIO's decoder leaves, and a
    /// `TunnelInboundHandler` in its place reads the client's bytes (the decoder's leftovers first)
    /// for the exchange. The handlers behind, HTTP's, see nothing more (nor do they ask for reads:
    /// the tunnel's handler does, as the upstream can take them); this one keeps the connection's close.
    func beginTunnel(_ exchange: ProxyExchange) -> TunnelInboundHandler? {
        guard let context, let decoder = try? context.pipeline.syncOperations.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self) else {
            return nil
        }
        let reader = TunnelInboundHandler(exchange: exchange)
        do {
            try context.pipeline.syncOperations.addHandler(reader, position: .after(decoder.handler))
        } catch {
            return nil
        }
        context.pipeline.syncOperations.removeHandler(context: decoder, promise: nil)
        return reader
    }

    /// Writes an answer part of the current exchange to the client.
    func writeToClient(_ part: HTTPServerResponsePart, flush: Bool) {
        guard let context else { return }
        if flush {
            context.writeAndFlush(wrapOutboundOut(part), promise: nil)
        } else {
            context.write(wrapOutboundOut(part), promise: nil)
        }
    }

    /// Writes bytes of the current exchange's answer, framed already, past NIO's response encoder.
    /// Without the encoder in the pipeline (never, as the gateway builds it) the connection is closed.
    func writeBytesToClient(_ buffer: ByteBuffer) {
        guard let byteOutlet else {
            context?.close(promise: nil)
            return
        }
        byteOutlet.write(NIOAny(buffer), promise: nil)
    }

    /// The answer written with `writeBytesToClient` has ended: the handlers before this one, which
    /// count answers by the `.end` they see, are told so.
    func bytesAnswerEnded() {
        context?.triggerUserOutboundEvent(RequestTargetHandler.AnswerEnded(), promise: nil)
    }

    func flushClient() {
        context?.flush()
    }

    var clientIsWritable: Bool { context?.channel.isWritable ?? false }

    /// No HTTP/1 encoder before this handler: an HTTP/2 stream's, whose codec frames the answer's parts.
    var relaysAnswerParts: Bool { byteOutlet == nil }

    // MARK: Idle timeout and graceful close

    /// Closes the connection after `idleTimeout` with nothing from the client: between requests, or
    /// in the middle of one it is still sending (a body that stops coming), as Hummingbird's state
    /// handler does. A request sent whole and waiting for its answer is left to its own deadlines.
    /// The check is scheduled once and re-armed only when it fires: a busy connection schedules
    /// nothing per request.
    private func scheduleIdleCheck(at deadline: NIODeadline) {
        guard !idleCheckScheduled, let context else { return }
        idleCheckScheduled = true
        scheduledChecks.idle = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            guard let self, let context = self.context else { return }
            self.idleCheckScheduled = false
            guard !self.isAwaitingAnswer else {
                return self.scheduleIdleCheck(at: .now() + self.idleTimeout)
            }
            let due = self.lastActive + self.idleTimeout
            if due <= .now() {
                context.close(promise: nil)
            } else {
                self.scheduleIdleCheck(at: due)
            }
        }
    }

    // MARK: The whole-request deadline

    /// A request's head was read: its deadline runs from now. The check is armed at the end of the
    /// read cycle (`armRequestCheck`), and only if the request is still arriving then: a request read
    /// whole in one cycle, as most are, schedules nothing.
    private func requestStarted() {
        requestStartedAt = NIODeadline.now()
    }

    /// Schedules the request-deadline check when a request is still being read and none is scheduled.
    private func armRequestCheck() {
        guard let started = requestStartedAt, !requestCheckScheduled else { return }
        scheduleRequestCheck(at: started + requestTimeout)
    }

    /// Checks the request being read against its deadline. Scheduled once and re-armed only
    /// when it fires: a connection whose requests arrive whole schedules one check per `requestTimeout`.
    private func scheduleRequestCheck(at deadline: NIODeadline) {
        guard let context else { return }
        requestCheckScheduled = true
        scheduledChecks.request = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            guard let self, self.context != nil else { return }
            self.requestCheckScheduled = false
            guard let started = self.requestStartedAt else { return }
            let due = started + self.requestTimeout
            if due <= .now() {
                self.requestTimedOut()
            } else {
                self.scheduleRequestCheck(at: due)
            }
        }
    }

    /// The request did not arrive whole in time: 408 `request_timeout` if its answer has not begun, then close.
    private func requestTimedOut() {
        guard let context else { return }
        let error = ProxyExchange.requestIncomplete(within: requestTimeout)
        switch state {
        case .proxying(let exchange):
            exchange.requestTimedOut(error)  // answers (or not, if it began) and closes
        case .passthrough where !passthroughAnswerStarted:
            // Hummingbird's handler still waits for the body: the gateway answers, and drops what it might write later.
            let body = ByteBuffer(bytes: JSONWriter.bytes(error.json))
            context.write(wrapOutboundOut(.head(error.responseHead(contentLength: body.readableBytes, close: true))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            droppingWrites = true
            context.close(promise: nil)
        default:
            context.close(promise: nil)
        }
    }

    /// The current request has been read whole and its answer has not ended.
    private var isAwaitingAnswer: Bool {
        switch state {
        case .idle, .draining: false
        case .passthrough(let requestDone, let responseDone): requestDone && !responseDone
        case .proxying(let exchange): exchange.requestEnded
        }
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent else { return context.fireUserInboundEventTriggered(event) }
        // An HTTP/2 stream finishes its one request: its connection drains itself (GOAWAY).
        guard watchesIdle else { return }
        // Hummingbird's state handler sees only the requests passed on; this handler sees them all.
        if case .idle = state, queued.isEmpty {
            context.close(promise: nil)
        } else {
            closeWhenIdle = true
        }
    }

    // MARK: Back-pressure

    package func read(context: ChannelHandlerContext) {
        if holdingReads || queueHoldsReads {
            readPending = true
        } else {
            context.read()
        }
    }

    /// Stops reading the client (the upstream cannot take more yet).
    func holdReads() {
        holdingReads = true
    }

    func resumeReads() {
        guard holdingReads else { return }
        holdingReads = false
        readIfPending()
    }

    private func releaseQueueHold() {
        guard queueHoldsReads else { return }
        queueHoldsReads = false
        readIfPending()
    }

    private func readIfPending() {
        guard readPending, !holdingReads, !queueHoldsReads else { return }
        readPending = false
        context?.read()
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if case .proxying(let exchange) = state { exchange.clientWritabilityChanged(context.channel.isWritable) }
        context.fireChannelWritabilityChanged()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        if case .proxying(let exchange) = state { exchange.clientGone() }
        state = .idle
        queued.removeAll()
        queuedBytes = 0
        context.fireChannelInactive()
    }
}
