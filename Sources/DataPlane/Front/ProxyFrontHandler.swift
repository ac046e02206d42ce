import EdgeHTTP
import NIOCore
import NIOHTTP1
import Observability
import TrafficCop

/// Serves plain `gateway.routes` requests straight from the connection's bytes, ahead of NIO's
/// HTTP/1 decoder, and hands the connection to the decoder at the first request it does not serve.
///
/// The common proxied request (a request to a route whose head arrives whole, with no body or a
/// body of one `Content-Length`; see `PlainRequestHead` for exactly what "plain" admits) costs
/// NIO's decoder, the upgrade check, the target screen and a handler hop per part when it goes
/// the general way; here it is read in one pass and handed to its `ProxyExchange` at once, and
/// its body's bytes after it as they come (`PlainRequestBody`), the next head read only after the
/// body's last byte. A head split across reads (a browser's
/// cookies past the first read, pipelined requests across a read) is waited for: its bytes are
/// kept, at most `limits.max_header_bytes` and one read, and its deadline never moves with the
/// bytes that follow (the connection's first head: from when the connection opened, timed by
/// the `RequestHeadTimeoutHandler` ahead of this handler while it is there; a later one: from
/// when it is first read, which for one waiting behind a request in flight, unread, is when that
/// answer ends). Everything else (a chunked body, an upgrade, a path no route
/// serves, anything unusual) goes to the pipeline
/// behind this handler from that request's first byte, and this handler leaves the pipeline:
/// the rest of the connection is NIO's, with the head timeout re-armed for the head it was handed.
/// Answers keep their order: bytes that follow a request wait (and the connection is not read)
/// until its answer has ended.
package final class ProxyFrontHandler: ChannelDuplexHandler, RemovableChannelHandler, SerialProxyExchangeHost {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer
    package typealias OutboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    let plane: DataPlane
    let limits: PlainRequestHead.Limits
    /// How long the client may send nothing between requests (`limits.idle_timeout_seconds`).
    let idleTimeout: TimeAmount
    /// How long a head may take to arrive whole (`limits.request_head_timeout_seconds`): a later
    /// head waited for here, or one handed to NIO.
    let headTimeout: TimeAmount
    /// How long a request with a body may take to arrive whole (`limits.request_timeout_seconds`),
    /// from its head, as NIO's path times it.
    let requestTimeout: TimeAmount
    /// The most bytes that may wait behind a request in flight before the connection is closed.
    let maximumQueuedBytes: Int

    private(set) var context: ChannelHandlerContext?
    private(set) var pool: UpstreamPool?
    private(set) var metricHandles: ProxyMetricHandles?
    /// This connection's copy of the routes in force (`LiveRouteTable.refresh` before each request).
    private var routeTable: RouteTable
    private(set) var headBuffers: HeadBuffers?
    private(set) lazy var peerAddress: String? = context?.channel.remoteAddress?.ipAddress
    private var requestIDs = ConnectionRequestIDs()

    /// Bytes read and not yet served or handed on.
    private var received = ByteBuffer()
    private var exchange: ProxyExchange?
    /// The body of the request last started, while bytes of it are still to come: they are its
    /// exchange's (or dropped, once it has answered), and no head is read before its end.
    private var body: PlainRequestBody?
    /// Answers a body not whole by its deadline: armed when one begins and none is armed, re-armed when it fires.
    private var bodyCheck: Scheduled<Void>?
    /// A forward-auth decision in flight (waiting for the store); like `exchange`, it holds the bytes behind it.
    private var decision: ForwardAuthExchange?
    /// An answer could not be written out (the client is not reading): nothing more is served until it can.
    private var awaitingWritable = false
    /// Whether a request is being answered: bytes behind it wait.
    private var requestInFlight: Bool { exchange != nil || decision != nil }
    /// Serving requests from `received` now (an exchange that finishes at once must not start the next itself).
    private var serving = false
    private var handedOn = false
    /// The connection is closing: nothing more is served.
    private var closing = false
    /// Inside a read cycle: bytes handed on now are followed by the cycle's own end.
    private var inReadCycle = false
    private var holdingReads = false
    /// The exchange asked for no more reads (its upstream cannot take more yet), until it resumes them.
    private var exchangeHoldsReads = false
    private var readPending = false
    /// A graceful shutdown asked this connection to close once its current request is answered.
    private var closeWhenIdle = false
    private var lastActive = NIODeadline.now()
    private var idleCheck: Scheduled<Void>?
    /// Whether a head has been taken whole here. From then on a head handed on is timed by a
    /// `RequestHeadTimeoutHandler` added for it: the connection's first one leaves once the first
    /// head has passed it, in the same read, so finding it in the pipeline then says nothing.
    private var firstHeadTaken = false
    /// A head begun in `received` and not yet whole, waited for; `nil` while none waits.
    private var partialHead: PartialHead?
    /// Answers a head waited for past its deadline: armed when one begins and none is armed, never
    /// cancelled per request (a fire with no head late re-arms for the next, or ends).
    private var headCheck: Scheduled<Void>?
    /// When the front was added, at the connection's start: the first head's deadline runs from it.
    private var openedAt = NIODeadline.now()
    var upstreamDeadlineCheck: UpstreamDeadlineCheck?
    var currentExchange: ProxyExchange? { exchange }
    /// Builds the pipeline behind this handler, called once when the connection is handed on
    /// (before any byte passes): a connection that only ever sends plain requests never builds
    /// NIO's HTTP/1 handlers, and an idle one does not keep them. `nil` once called.
    private var buildPipelineBehind: (() throws -> Void)?
    /// Called instead when the connection ends without being handed on (its pipeline never built).
    /// Called here rather than from the channel's close future: a callback there would keep what
    /// it holds for the whole life of a connection that was handed on (an agent socket, say).
    private var endedBeforeHandOn: (() -> Void)?

    /// - Parameters:
    ///   - buildPipelineBehind: what to add behind this handler when the connection is handed on.
    ///   - endedBeforeHandOn: called when the connection ends (this handler leaves) before any hand-on.
    package init(
        plane: DataPlane, limits: PlainRequestHead.Limits, idleTimeout: TimeAmount, headTimeout: TimeAmount, requestTimeout: TimeAmount,
        buildPipelineBehind: @escaping () throws -> Void, endedBeforeHandOn: @escaping () -> Void
    ) {
        self.plane = plane
        self.limits = limits
        self.idleTimeout = idleTimeout
        self.headTimeout = headTimeout
        self.requestTimeout = requestTimeout
        self.buildPipelineBehind = buildPipelineBehind
        self.endedBeforeHandOn = endedBeforeHandOn
        maximumQueuedBytes = plane.maximumQueuedBytes
        routeTable = plane.table.current
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        pool = plane.pool(for: context.eventLoop)
        metricHandles = plane.metricHandles(for: context.eventLoop)
        headBuffers = plane.headBuffers(for: context.eventLoop)
        lastActive = .now()
        openedAt = lastActive
        scheduleIdleCheck(at: lastActive + idleTimeout)
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        // Removed without a hand-on: the connection has ended (the front leaves only by handing on).
        if let ended = endedBeforeHandOn {
            endedBeforeHandOn = nil
            buildPipelineBehind = nil
            ended()
        }
        headCheck?.cancel()
        headCheck = nil
        partialHead = nil
        idleCheck?.cancel()
        bodyCheck?.cancel()
        bodyCheck = nil
        upstreamDeadlineCheck?.task.cancel()
        idleCheck = nil
        upstreamDeadlineCheck = nil
    }

    // MARK: Inbound

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !handedOn else { return context.fireChannelRead(data) }
        // Closing (a head timed out): what the client still sends is not kept.
        guard !closing else { return }
        inReadCycle = true
        lastActive = .now()
        var bytes = unwrapInboundIn(data)
        if received.readableBytes == 0 {
            received = bytes
        } else {
            received.writeBuffer(&bytes)
        }
        if body == nil, requestInFlight || awaitingWritable {
            // Behind a request in flight: waits, unread further, within its bound.
            holdingReads = true
            if received.readableBytes > maximumQueuedBytes {
                plane.logger.info("pipelined requests past the connection's bound; closing it", metadata: ["queued_bytes": "\(received.readableBytes)"])
                context.close(promise: nil)
            }
            return
        }
        serve(context: context)
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        inReadCycle = false
        if handedOn { context.fireChannelReadComplete() }
    }

    /// Serves the plain requests at the start of `received`, one at a time, until one is in
    /// flight, the bytes run out, or a request is not plain (then the connection is handed on).
    private func serve(context: ChannelHandlerContext) {
        guard !serving else { return }
        serving = true
        defer { serving = false }
        while !awaitingWritable, !handedOn, !closing, received.readableBytes > 0, self.context != nil {
            // A body's bytes first: until its last, nothing here is a head.
            if body != nil {
                guard takeBody(context: context) else { break }
                continue
            }
            guard !requestInFlight else { break }
            // A head waited for is read again only once it can have ended (or has passed its bound).
            if let waiting = partialHead, !waiting.mayHaveEnded(received, maximumHeadBytes: limits.maximumHeadBytes) {
                partialHead?.scanned = received.readableBytes
                break
            }
            let outcome = received.withUnsafeReadableBytes { PlainRequestHead.parse($0, limits: limits) }
            if outcome == .incomplete {
                // The start of a head that may still be plain, within its bound: the rest is read.
                awaitRestOfHead(context: context)
                break
            }
            // Not plain, or not one the front serves: NIO's decoder takes it from its first byte.
            guard case .complete(let plain) = outcome else { return handOn(context: context, reason: .head) }
            guard let started = start(plain, context: context) else { return handOn(context: context, reason: .target) }
            partialHead = nil
            firstHeadTaken = true
            received.moveReaderIndex(forwardBy: plain.length)
            switch started {
            case .proxy(let started):
                exchange = started
                if plain.bodyLength == 0 {
                    // No body: the request has ended before its exchange starts.
                    started.clientRead(.end(nil))
                } else if received.readableBytes >= plain.bodyLength, started.takesWholeBodyBeforeStart(plain.bodyLength),
                    let whole = received.readSlice(length: plain.bodyLength)
                {
                    // The whole body came with its head: handed over with its end before the exchange
                    // starts, as a bodyless request's end is, so it goes upstream with the head in one write.
                    started.clientRead(.body(whole))
                    started.clientRead(.end(nil))
                } else {
                    // The body follows as it comes, from the bytes after the head (the loop takes them).
                    beginBody(length: plain.bodyLength, context: context)
                }
                started.start()
            case .decision(let started):
                // Answered within `start`, or in flight until the store answers.
                decision = started
                started.start(table: routeTable)
            }
        }
        guard !handedOn else { return }
        // Read whole, `received` is left as it is (not cleared: clearing a buffer NIO's read pool
        // still shares allocates a new one); the next read replaces it.
        if !requestInFlight && !awaitingWritable {
            releaseReads()
        } else if received.readableBytes > 0 {
            holdingReads = true  // the next request waits for this one's answer
        } else if body != nil, !exchangeHoldsReads {
            releaseReads()  // the rest of the body is read as it comes (reads held for a request before it end here)
        }
    }

    /// What serves a plain request on the loop.
    private enum Started {
        case proxy(ProxyExchange)
        case decision(ForwardAuthExchange)
    }

    /// The exchange for `plain`, when its target is in its normalised spelling and under a route,
    /// or forward-auth's decision for it (`/api/auth/verify` exactly).
    private func start(_ plain: PlainRequestHead, context: ChannelHandlerContext) -> Started? {
        var head = HTTPRequestHead(
            version: .http1_1, method: HTTPMethod(rawValue: plain.method.rawValue), uri: plain.uri, headers: HTTPHeaders(plain.fields))
        // The same screen as every request NIO decodes; one it refuses is answered by that path.
        guard (try? RequestTargetHandler.screen(&head)) != nil else { return nil }
        let (path, query) = RequestTarget.split(head.uri[...])
        plane.table.refresh(&routeTable)
        if path == ForwardAuthExchange.path, let proxies = plane.forwardAuthProxies {
            // A decision reads no body: one that comes with a body is NIO's to take.
            guard plain.bodyLength == 0 else { return nil }
            return .decision(ForwardAuthExchange(handler: self, plane: plane, proxies: proxies, head: head, eventLoop: context.eventLoop))
        }
        let host = routeTable.hasHostRoutes ? head.headers.first(name: "host") : nil
        guard let (route, remainder) = routeTable.route(host: host, path: path) else { return nil }
        return .proxy(ProxyExchange(handler: self, eventLoop: context.eventLoop, route: route, head: head, path: path, remainder: remainder, query: query))
    }

    /// Hands the connection to the pipeline behind this handler (built now when it waited for
    /// this) from the first byte not served, with the head timeout re-armed for the head those
    /// bytes begin, and leaves the pipeline.
    private func handOn(context: ChannelHandlerContext, reason: ConnectionHandOnReason) {
        handedOn = true
        idleCheck?.cancel()
        idleCheck = nil
        // A head waited for here keeps the deadline it began with.
        let deadline = partialHead?.deadline ?? .now() + headTimeout
        headCheck?.cancel()
        headCheck = nil
        partialHead = nil
        let rest = received
        received = ByteBuffer()
        let (build, ended) = (buildPipelineBehind, endedBeforeHandOn)
        (buildPipelineBehind, endedBeforeHandOn) = (nil, nil)
        do {
            try build?()
        } catch {
            ended?()
            plane.logger.error("could not build the connection's HTTP/1 pipeline; closing it", metadata: ["error_type": "\(type(of: error))"])
            return context.close(promise: nil)
        }
        // Counted once the pipeline behind is there (a connection closed because it could not be built is not handed on).
        plane.metrics.connectionHandedOn(reason)
        // The connection's first head may still be on its way, under the timeout armed when it opened;
        // a later head (even one that began in the read that ended the first) gets a timeout of its own.
        if firstHeadTaken || (try? context.pipeline.syncOperations.context(handlerType: RequestHeadTimeoutHandler.self)) == nil {
            do {
                let timeout = max(deadline - .now(), .milliseconds(1))
                try context.pipeline.syncOperations.addHandler(RequestHeadTimeoutHandler(timeout: timeout), position: .after(self))
            } catch {
                return context.close(promise: nil)
            }
        }
        if rest.readableBytes > 0 {
            context.fireChannelRead(wrapInboundOut(rest))
            // Outside a read cycle (bytes that waited behind an answer), the handlers behind are told the cycle ended.
            if !inReadCycle { context.fireChannelReadComplete() }
        }
        holdingReads = false
        // A read held here is asked for before this handler leaves: a removed handler's `read`
        // reaches nothing (its context has no handler before it), and the connection would read
        // no more (an upgrade behind plain requests answered 101, then never read a frame).
        if readPending {
            readPending = false
            context.read()
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        exchange?.clientWritabilityChanged(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
        if awaitingWritable, context.channel.isWritable, !handedOn {
            // The client read what was answered: the requests behind it are served now (or, once a
            // graceful shutdown asked, the connection closes with everything answered out).
            awaitingWritable = false
            if closeWhenIdle {
                closing = true
                context.close(promise: nil)
                return
            }
            serve(context: context)
        }
    }

    package func channelInactive(context: ChannelHandlerContext) {
        exchange?.clientGone()
        exchange = nil
        decision?.clientGone()
        decision = nil
        body = nil
        received = ByteBuffer()
        partialHead = nil
        context.fireChannelInactive()
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard !handedOn else { return context.fireUserInboundEventTriggered(event) }
        switch event {
        case is ChannelShouldQuiesceEvent:
            // An answer not yet written out counts as in flight: closing now would drop it. So does a
            // refused body still being dropped: closing with it unread could reset the refusal away.
            if !requestInFlight && !awaitingWritable && body == nil {
                context.close(promise: nil)
            } else {
                closeWhenIdle = true
            }
        case ChannelEvent.inputClosed:
            // The client has sent all it will (a half-close): the answer in flight is written, then
            // the connection closes; a body or a head that can no longer end closes it now. (NIO's
            // pipeline, not built before the hand-on, would otherwise be what reacts.)
            if body != nil || partialHead != nil || (!requestInFlight && !awaitingWritable) {
                closing = true
                context.close(promise: nil)
            } else {
                closeWhenIdle = true
            }
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    // MARK: ProxyExchangeHost

    /// A plain request never asks for an upgrade: the front hosts no tunnel.
    func beginTunnel(_ exchange: ProxyExchange) -> TunnelInboundHandler? { nil }

    func nextRequestID() -> String {
        requestIDs.next()
    }

    func writeToClient(_ part: HTTPServerResponsePart, flush: Bool) {
        guard let context else { return }
        switch part {
        case .head(let head): context.write(wrapOutboundOut(HTTP1Bytes.responseHead(head, allocator: context.channel.allocator)), promise: nil)
        case .body(.byteBuffer(let buffer)): context.write(wrapOutboundOut(buffer), promise: nil)
        case .body(.fileRegion): return context.close(promise: nil)  // never written by an exchange
        case .end: break
        }
        if flush { context.flush() }
    }

    func writeBytesToClient(_ buffer: ByteBuffer) {
        context?.write(wrapOutboundOut(buffer), promise: nil)
    }

    /// Nothing behind this handler counts answers while it serves.
    func bytesAnswerEnded() {}

    func flushClient() {
        context?.flush()
    }

    var clientIsWritable: Bool { context?.channel.isWritable ?? false }
    var relaysAnswerParts: Bool { false }

    func holdReads() {
        holdingReads = true
        exchangeHoldsReads = true
    }

    func resumeReads() {
        exchangeHoldsReads = false
        // The time the client was not read is not its silence.
        lastActive = .now()
        // Bytes behind the request (not its body's: those are taken as they come) wait for its answer.
        guard exchange == nil || received.readableBytes == 0 else { return }
        releaseReads()
    }

    /// Forward-auth's answer has been written: as an exchange's end, and the next request waits
    /// while the client is not reading what it was answered.
    func decisionFinished(closeConnection: Bool) {
        decision = nil
        if let context, !closeConnection, !context.channel.isWritable {
            awaitingWritable = true
            holdingReads = true
            lastActive = .now()
            return
        }
        exchangeFinished(requestEnded: true, closeConnection: closeConnection)
    }

    func exchangeFinished(requestEnded: Bool, closeConnection: Bool) {
        exchange = nil
        exchangeHoldsReads = false
        // The deadline check stays scheduled: the next request's deadline is later, and the check re-arms for it.
        lastActive = .now()
        guard let context else { return }
        // A body still coming when the answer asks to close (a refusal of a `Connection: close`
        // request, say) is dropped to its end first, as a graceful close waits for it (see `takeBody`):
        // closing with it unread could reset the answer away.
        if closeConnection, body != nil, !closing {
            closeWhenIdle = true
            return serve(context: context)
        }
        // A graceful close waits for the rest of a body being dropped (see `takeBody`), as NIO's path drains it.
        if closeConnection || (closeWhenIdle && body == nil) {
            closing = true
            // The answer's end may still wait for its flush: out first, then the close.
            context.flush()
            context.close(promise: nil)
            return
        }
        // Requests that came while this one was in flight; inside `serve` its loop takes them.
        serve(context: context)
    }

    // MARK: A plain request's body

    /// The request just started has a body of `length` bytes: they are read next, and timed.
    private func beginBody(length: Int, context: ChannelHandlerContext) {
        let waiting = PlainRequestBody(length: length, deadline: .now() + requestTimeout)
        body = waiting
        if bodyCheck == nil { scheduleBodyCheck(at: waiting.deadline) }
    }

    /// Passes the body's bytes at the start of `received` to its exchange, and its end after its
    /// last byte; once the exchange has answered, drops them instead, and closes the connection
    /// past `ProxyChannelHandler.maximumDrainBytes`.
    /// Returns whether any bytes were taken.
    @discardableResult
    private func takeBody(context: ChannelHandlerContext) -> Bool {
        guard var waiting = body, waiting.remaining > 0, received.readableBytes > 0,
            let part = received.readSlice(length: min(waiting.remaining, received.readableBytes))
        else { return false }
        waiting.remaining -= part.readableBytes
        let ended = waiting.remaining == 0
        if let exchange {
            body = ended ? nil : waiting
            exchange.clientRead(.body(part))
            // A part the exchange refused ended it (and closed or freed the connection): no end follows.
            if ended, self.exchange === exchange { exchange.clientRead(.end(nil)) }
            return true
        }
        waiting.dropped += part.readableBytes
        guard waiting.dropped <= ProxyChannelHandler.maximumDrainBytes else {
            // More than a refused request deserves: closed rather than read on.
            body = nil
            closing = true
            context.close(promise: nil)
            return true
        }
        body = ended ? nil : waiting
        if ended, closeWhenIdle {
            // A graceful close waited for the dropped body's end.
            closing = true
            context.close(promise: nil)
        }
        return true
    }

    /// Checks the body being read against its deadline. Deadlines only grow, so one check armed
    /// for an earlier body serves the next by re-arming for its deadline.
    private func scheduleBodyCheck(at deadline: NIODeadline) {
        guard let context else { return }
        bodyCheck = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            guard let self else { return }
            self.bodyCheck = nil
            guard let waiting = self.body, !self.closing, self.context != nil else { return }
            if waiting.deadline <= .now() {
                self.bodyTimedOut()
            } else {
                self.scheduleBodyCheck(at: waiting.deadline)
            }
        }
    }

    /// The request's body did not arrive whole in time: its exchange answers 408 `request_timeout`
    /// (if its answer has not begun) and closes; a body being dropped just closes.
    private func bodyTimedOut() {
        guard let context else { return }
        body = nil
        holdingReads = true
        readPending = false
        guard let exchange else {
            closing = true
            context.close(promise: nil)
            return
        }
        // Ends the exchange (and, through `exchangeFinished`, the connection), its answer begun or not.
        exchange.requestTimedOut(ProxyExchange.requestIncomplete(within: requestTimeout))
    }

    // MARK: Reads and the idle timeout

    package func read(context: ChannelHandlerContext) {
        if holdingReads && !handedOn {
            readPending = true
        } else {
            context.read()
        }
    }

    private func releaseReads() {
        holdingReads = false
        guard readPending else { return }
        readPending = false
        context?.read()
    }

    /// Waits for the rest of the head at the start of `received`, until its deadline: past it the
    /// client is answered 408 `request_timeout`, as a head handed to NIO's decoder would be,
    /// nothing more is read or kept, and the connection closes. A later head's deadline runs from
    /// the first time it is seen unfinished (the read it began in, or the end of the answer it
    /// waited behind, unread); the first head's from the connection's start, and it is timed here
    /// only once the `RequestHeadTimeoutHandler` ahead of this handler has left (which the parser's
    /// `.incomplete`, never holding a blank line, keeps from happening while the head is unfinished).
    private func awaitRestOfHead(context: ChannelHandlerContext) {
        if partialHead == nil {
            let timedHere = firstHeadTaken || (try? context.pipeline.syncOperations.context(handlerType: RequestHeadTimeoutHandler.self)) == nil
            let waiting = PartialHead(deadline: firstHeadTaken ? .now() + headTimeout : openedAt + headTimeout, timedHere: timedHere)
            partialHead = waiting
            if timedHere && headCheck == nil { scheduleHeadCheck(at: waiting.deadline) }
        }
        partialHead?.scanned = received.readableBytes
    }

    /// Checks the head waited for at `deadline`. Deadlines only grow, so one check armed for an
    /// earlier head that has since come whole serves the next by re-arming for its deadline.
    private func scheduleHeadCheck(at deadline: NIODeadline) {
        guard let context else { return }
        headCheck = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            guard let self else { return }
            self.headCheck = nil
            guard let waiting = self.partialHead, waiting.timedHere, !self.handedOn, !self.closing else { return }
            if waiting.deadline <= .now() {
                self.headTimedOut()
            } else {
                self.scheduleHeadCheck(at: waiting.deadline)
            }
        }
    }

    /// A head did not arrive whole in time: 408, and the connection closes at once (a client that
    /// does not read its answer cannot hold it open).
    private func headTimedOut() {
        guard let context, partialHead != nil, !handedOn, !closing else { return }
        partialHead = nil
        closing = true
        received = ByteBuffer()
        holdingReads = true
        readPending = false
        context.writeAndFlush(wrapOutboundOut(RawResponse.bytes(.requestHeadTimedOut)), promise: nil)
        context.close(promise: nil)
    }

    /// Closes the connection after `idleTimeout` with nothing from the client and no request in
    /// flight (or one whose body is still to come). Scheduled once and re-armed only when it fires: a busy connection schedules nothing per request.
    private func scheduleIdleCheck(at deadline: NIODeadline) {
        guard let context else { return }
        idleCheck = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            guard let self, let context = self.context, !self.handedOn else { return }
            // A request in flight keeps the connection, but not a body that stopped coming (as on NIO's
            // path); a body not read because its upstream cannot take more is not the client's silence.
            guard !self.requestInFlight || (self.body != nil && !self.exchangeHoldsReads) else { return self.scheduleIdleCheck(at: .now() + self.idleTimeout) }
            let due = self.lastActive + self.idleTimeout
            if due <= .now() {
                context.close(promise: nil)
            } else {
                self.scheduleIdleCheck(at: due)
            }
        }
    }
}
