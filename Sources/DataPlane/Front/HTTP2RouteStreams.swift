import EdgeHTTP
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import TrafficCop

/// Serves an HTTP/2 connection's plain route requests on the connection itself, with no stream
/// channel: each such stream is a `HTTP2RouteStream` and its `ProxyExchange`, on the event loop.
///
/// Sits between swift-nio-http2's connection handler and its stream multiplexer. A stream opened
/// by a `HEADERS` frame that ends it (a request with no body), `GET`, not gRPC, with no `host`
/// field beside `:authority`, whose target `RequestTargetHandler.screen` accepts and whose path is
/// under a route, is served here (`routeHead`). Every other stream's frames pass on to the
/// multiplexer untouched, and get a stream channel with the whole HTTP/2 stream pipeline (its
/// refusals included): so this is a shorter way to the same exchange, not a second set of
/// decisions. A stream channel costs about as much CPU as the rest of swift-nio-http2 does for a
/// request (issue 46's floors), which is what serving these streams here saves.
package final class HTTP2RouteStreams: ChannelDuplexHandler {
    package typealias InboundIn = HTTP2Frame
    package typealias InboundOut = HTTP2Frame
    package typealias OutboundIn = HTTP2Frame
    package typealias OutboundOut = HTTP2Frame

    let plane: DataPlane
    let requestIDs: SharedRequestIDs
    private(set) var context: ChannelHandlerContext?
    private(set) var pool: UpstreamPool?
    private(set) var metricHandles: ProxyMetricHandles?
    private(set) var headBuffers: HeadBuffers?
    private(set) lazy var peerAddress: String? = context?.channel.remoteAddress?.ipAddress
    /// This connection's copy of the routes in force (`LiveRouteTable.refresh` before each stream).
    private var routeTable: RouteTable
    /// The streams served here, until swift-nio-http2 says each is closed.
    private var streams: [HTTP2StreamID: HTTP2RouteStream] = [:]
    /// The highest stream id opened so far: a client's streams open in increasing order (RFC 9113
    /// §5.1.1, enforced by swift-nio-http2), so a `HEADERS` above it opens a stream, any other is a trailer.
    private var lastOpened = HTTP2StreamID.rootStream
    /// The one check of all the route streams' upstream deadlines.
    private var deadlineCheck: UpstreamDeadlineCheck?

    package init(plane: DataPlane, requestIDs: SharedRequestIDs) {
        self.plane = plane
        self.requestIDs = requestIDs
        routeTable = plane.table.current
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        pool = plane.pool(for: context.eventLoop)
        metricHandles = plane.metricHandles(for: context.eventLoop)
        headBuffers = plane.headBuffers(for: context.eventLoop)
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        closeAll()
        self.context = nil
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        if id == .rootStream { return context.fireChannelRead(data) }
        if streams[id] != nil { return }  // a route stream's later frames (a reset's, a window's): swift-nio-http2 reports its close
        guard id > lastOpened, case .headers(let headers) = frame.payload else { return context.fireChannelRead(data) }
        lastOpened = id
        plane.table.refresh(&routeTable)
        guard headers.endStream, let head = Self.routeHead(headers.headers), !routeTable.isAllowedPreflight(head),
            case let (path, query) = RequestTarget.split(head.uri[...]),
            let (route, remainder) = routeTable.route(host: routeTable.hasHostRoutes ? head.headers.first(name: "host") : nil, path: path)
        else { return context.fireChannelRead(data) }
        let stream = HTTP2RouteStream(streamID: id, connection: self)
        streams[id] = stream
        let exchange = ProxyExchange(handler: stream, eventLoop: context.eventLoop, route: route, head: head, path: path, remainder: remainder, query: query)
        // The stream outlives its entry here for as long as the exchange runs: the exchange may still
        // be writing (its answer's end closes the stream, and the exchange finishes after).
        exchange.retainedHost = stream
        stream.exchange = exchange
        exchange.start()
        // The request ended with its head: the exchange reads its end now, as from a stream channel.
        if !exchange.finished { exchange.clientRead(.end(nil)) }
    }

    /// A route stream's window events end here (its answer's flow is `HTTP2RouteStream`'s); every
    /// stream's opening and close go on, for the connection's management (idle time, graceful stop).
    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let closed as StreamClosedEvent:
            streams.removeValue(forKey: closed.streamID)?.streamClosed()
        case let window as NIOHTTP2WindowUpdatedEvent where streams[window.streamID] != nil:
            return
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // swift-nio-http2 refused a frame of a route stream's answer (its own rules: a length the body
        // does not match, say): the stream is reset and its exchange ended, as nothing more of its
        // answer can go. The multiplexer has no such stream.
        if let error = error as? NIOHTTP2Errors.StreamError, let stream = streams[error.streamID] { return stream.refused() }
        context.fireErrorCaught(error)
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        for stream in streams.values { stream.updateWritability() }
        context.fireChannelWritabilityChanged()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        closeAll()
        context.fireChannelInactive()
    }

    /// Makes sure the connection's deadline check runs by `deadline`.
    func watchDeadline(_ deadline: NIODeadline) {
        deadlineCheck = UpstreamDeadlineCheck.arm(deadlineCheck, by: deadline, on: context?.eventLoop) { [weak self] in
            guard let self else { return }
            self.checkDeadlines()
        }
    }

    /// Ends the exchanges whose upstream deadline has passed, and re-arms for the earliest one left.
    private func checkDeadlines() {
        deadlineCheck = nil
        let now = NIODeadline.now()
        var expired: [ProxyExchange] = []
        var next: NIODeadline?
        for stream in streams.values {
            guard let exchange = stream.exchange, let deadline = exchange.deadline else { continue }
            if deadline <= now { expired.append(exchange) } else { next = min(next ?? deadline, deadline) }
        }
        // Ended after the walk: an exchange's end may close its stream, which changes `streams`.
        for exchange in expired { exchange.timedOut() }
        if let next { watchDeadline(next) }
    }

    private func closeAll() {
        deadlineCheck?.task.cancel()
        deadlineCheck = nil
        let open = streams.values
        streams.removeAll()
        for stream in open { stream.streamClosed() }
    }

    /// The request head a stream's opening `HEADERS` stands for, when it is one this handler serves:
    /// a `GET` with exactly one each of `:method`, `:scheme`, `:authority` and `:path` (a path, never
    /// the absolute form, which the stream channel's `HTTP2RequestHeadCheck` refuses; valid as
    /// swift-nio-http2 requires), no other pseudo-header, no `host` field, not gRPC, and a target
    /// `RequestTargetHandler.screen` accepts (normalised by it). Built as swift-nio-http2's HTTP/1
    /// codec builds it (`host` from `:authority` first, the fields in order); `nil` for any other
    /// request, which then takes the stream-channel path and its answers.
    static func routeHead(_ headers: HPACKHeaders) -> HTTPRequestHead? {
        var method: String?
        var scheme: String?
        var authority: String?
        var path: String?
        var fields: [(String, String)] = []
        fields.reserveCapacity(headers.count - 3)
        fields.append(("host", ""))
        for (name, value, _) in headers {
            if name.utf8.first == UInt8(ascii: ":") {
                switch name {
                case ":method" where method == nil: method = value
                case ":scheme" where scheme == nil: scheme = value
                case ":authority" where authority == nil: authority = value
                case ":path" where path == nil: path = value
                default: return nil
                }
                continue
            }
            switch name.utf8.count {
            case 4 where name == "host": return nil
            case 12 where name == "content-type" && GRPCRequest.contentType(value) != nil: return nil
            default: fields.append((name, value))
            }
        }
        guard method == "GET", let scheme, let authority, let path, path.utf8.first == UInt8(ascii: "/"),
            Self.isValidPseudoHeaderValue(scheme), Self.isValidPseudoHeaderValue(authority), Self.isValidPseudoHeaderValue(path)
        else { return nil }
        fields[0].1 = authority
        var head = HTTPRequestHead(version: .http2, method: .GET, uri: path, headers: HTTPHeaders(fields))
        do {
            try RequestTargetHandler.screen(&head)
        } catch {
            return nil
        }
        return head
    }

    /// swift-nio-http2's rule for a pseudo-header's value (its HTTP/1 codec refuses others): no
    /// control byte, space or DEL, which would break the request line an HTTP/1.1 upstream reads.
    private static func isValidPseudoHeaderValue(_ value: String) -> Bool {
        !value.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F })
    }
}
