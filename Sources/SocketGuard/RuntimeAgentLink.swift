import AgentLink
import DataPlane
import Foundation
import JOSE
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import RuntimeAPI

/// One event loop's connection to the Runtime's agent link, carrying every
/// agent socket of that loop as a stream (`AgentLinkFrame`).
///
/// Confined to its event loop, like the sockets it serves: a message from a
/// client goes to the Runtime without leaving the loop or taking a lock. The
/// link is opened when the first socket needs it, with one assertion naming
/// the gateway; when it drops, every stream on it ends with 1011 and the next
/// socket opens a new one.
package final class RuntimeAgentLink {
    private enum State {
        case idle
        case connecting
        case connected(any Channel)
    }

    let eventLoop: any EventLoop
    let links: RuntimeAgentLinks
    private var state = State.idle
    private var streams: [UInt64: AgentSocketHandler] = [:]
    private var nextStreamID: UInt64 = 0
    /// Frames written while the link was connecting.
    private var pending: [AgentLinkFrame] = []
    /// Masking keys for the frames this client sends, drawn from libcrypto a batch at a time.
    private var maskBytes: [UInt8] = []
    private var flushPending = false
    /// False while the Runtime cannot take more: sockets stop reading their clients.
    private(set) var isWritable = true
    /// Upgrades waiting for the link to open before they answer 101 (`whenOpen()`).
    private var waiters: [EventLoopPromise<Bool>] = []

    init(eventLoop: any EventLoop, links: RuntimeAgentLinks) {
        self.eventLoop = eventLoop
        self.links = links
    }

    /// Opens a stream for an admitted socket (only the guard makes an `AdmittedSocket`,
    /// from the Traffic Cop's admission); the stream's messages then go to `socket`.
    func open(_ socket: AgentSocketHandler, for admitted: AdmittedSocket) -> UInt64 {
        nextStreamID &+= 1
        streams[nextStreamID] = socket
        send(.open(stream: nextStreamID, admitted.streamIdentity))
        return nextStreamID
    }

    /// True once the link is open (at once when it is), false when it cannot open.
    ///
    /// An upgrade asks before it answers 101, so while the Runtime is away a client
    /// hears 503 instead of a 101 and then 1011. An open link answers without waiting.
    package func whenOpen() -> EventLoopFuture<Bool> {
        if isOpen { return eventLoop.makeSucceededFuture(true) }
        let promise = eventLoop.makePromise(of: Bool.self)
        waiters.append(promise)
        if case .idle = state { connect() }
        return promise.futureResult
    }

    package var isOpen: Bool {
        if case .connected = state { return true }
        return false
    }

    /// Ends a stream from the gateway's side (the client closed or was closed).
    func close(stream: UInt64, code: UInt16, reason: String) {
        guard streams.removeValue(forKey: stream) != nil else { return }
        send(.close(stream: stream, code: code, reason: reason))
    }

    /// Sends a message (or a stream's open or close) to the Runtime, connecting first if needed.
    func send(_ frame: AgentLinkFrame) {
        switch state {
        case .connected(let channel):
            write(frame, to: channel)
            flushSoon(channel)
        case .connecting:
            pending.append(frame)
        case .idle:
            pending.append(frame)
            connect()
        }
    }

    /// One flush for everything written during this turn of the loop (a logout that ends
    /// 20,000 streams writes 20,000 frames and flushes once).
    private func flushSoon(_ channel: any Channel) {
        guard !flushPending else { return }
        flushPending = true
        eventLoop.assumeIsolated().execute { [self] in
            flushPending = false
            channel.flush()
        }
    }

    private func write(_ frame: AgentLinkFrame, to channel: any Channel) {
        let buffer = frame.buffer(allocator: channel.allocator)
        channel.write(WebSocketFrame(fin: true, opcode: .binary, maskKey: nextMaskKey(), data: buffer), promise: nil)
    }

    /// RFC 6455 §5.3: a client masks every frame with an unpredictable key.
    func nextMaskKey() -> WebSocketMaskingKey? {
        if maskBytes.count < 4 { maskBytes = (try? SecureRandom.bytes(4_096)) ?? [] }
        guard maskBytes.count >= 4 else { return nil }
        defer { maskBytes.removeLast(4) }
        let count = maskBytes.count
        return WebSocketMaskingKey(maskBytes[(count - 4)..<count])
    }

    // MARK: Connecting

    private func connect() {
        state = .connecting
        links.logger.debug("agent link: opening a connection to the Runtime")
        let connection: RuntimeAgentLinks.Connection
        do {
            connection = try links.connection()
        } catch {
            return failed(reason: "the Runtime is unavailable; reconnect shortly")
        }
        let upgraded = eventLoop.makePromise(of: (any Channel)?.self)
        let maximumFrame = links.maximumMessageBytes + AgentLinkFrame.overhead
        // Sec-WebSocket-Key: 16 random bytes in standard base64.
        let requestKey = (try? SecureRandom.bytes(16)).map {
            Base64URL.encode($0).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/") + "=="
        } ?? NIOWebSocketClientUpgrader.randomRequestKey()
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(links.timeout)
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelInitializer { [links] channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls = connection.tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: connection.serverName))
                    }
                    var headers = HTTPHeaders()
                    headers.add(name: "Host", value: connection.hostHeader)
                    headers.add(name: AssertionHeader.name, value: connection.assertion)
                    headers.add(name: "Content-Length", value: "0")
                    let upgrader = NIOTypedWebSocketClientUpgrader<(any Channel)?>(
                        requestKey: requestKey, maxFrameSize: maximumFrame,
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture {
                                try channel.pipeline.syncOperations.addHandler(
                                    NIOWebSocketFrameAggregator(
                                        minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1_024, maxAccumulatedFrameSize: maximumFrame))
                                try channel.pipeline.syncOperations.addHandler(RuntimeAgentLinkHandler(links: links))
                                return channel
                            }
                        })
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration<(any Channel)?>(
                        upgradeRequestHead: HTTPRequestHead(version: .http1_1, method: .GET, uri: RuntimeEndpoint.agentLink, headers: headers),
                        upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in channel.eventLoop.makeSucceededFuture(nil) })
                    try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
                        configuration: .init(upgradeConfiguration: configuration)
                    ).cascade(to: upgraded)
                }
            }
        let connected = bootstrap.connect(host: connection.host, port: connection.port)
        connected.whenFailure { upgraded.fail($0) }
        // A Runtime that accepts the connection but never answers the upgrade.
        let timeout = links.timeout
        let deadline = eventLoop.scheduleTask(in: timeout) { upgraded.fail(ChannelError.connectTimeout(timeout)) }
        upgraded.futureResult.assumeIsolated().whenComplete { [self] result in
            deadline.cancel()
            guard case .success(let channel?) = result else {
                connected.whenSuccess { $0.close(promise: nil) }
                links.metrics.relayError(kind: "upstream")
                // A failure to connect, or an answer that did not upgrade.
                let error: any Error
                if case .failure(let failure) = result { error = failure } else { error = RuntimeAgentLinks.unavailable }
                links.failures.failed(RuntimeAgentLinks.opening, error: error)
                return failed(reason: "the Runtime is unavailable; reconnect shortly")
            }
            opened(channel)
        }
    }

    private func opened(_ channel: any Channel) {
        links.failures.succeeded(RuntimeAgentLinks.opening)
        state = .connected(channel)
        isWritable = channel.isWritable
        for frame in pending { write(frame, to: channel) }
        pending = []
        channel.flush()
        answerWaiters(true)
        channel.closeFuture.assumeIsolated().whenComplete { [self] _ in
            guard case .connected(let current) = state, current === channel else { return }
            failed(reason: "the Runtime went away; reconnect shortly", gone: true)
        }
    }

    /// The link could not open or dropped: every stream on it ends with 1011.
    private func failed(reason: String, gone: Bool = false) {
        state = .idle
        pending = []
        isWritable = true
        let ended = streams
        streams = [:]
        if gone, !ended.isEmpty { links.metrics.relayError(kind: "upstream_gone") }
        for socket in ended.values { socket.runtimeEnded(code: 1011, reason: reason) }
        answerWaiters(false)
    }

    private func answerWaiters(_ open: Bool) {
        let waiting = waiters
        waiters = []
        for promise in waiting { promise.succeed(open) }
    }

    // MARK: From the Runtime

    func received(_ frame: AgentLinkFrame) {
        switch frame {
        case .text(let stream, let message):
            streams[stream]?.runtimeSent(.text, message)
        case .binary(let stream, let message):
            streams[stream]?.runtimeSent(.binary, message)
        case .close(let stream, let code, let reason):
            // The Runtime ends a stream on its own only when the session ended (1008, passed on).
            guard let socket = streams.removeValue(forKey: stream) else { return }
            if [1000, 1001, 1006].contains(code) {
                links.metrics.relayError(kind: "upstream_gone")
                socket.runtimeEnded(code: 1011, reason: "the Runtime went away; reconnect shortly")
            } else {
                socket.runtimeEnded(code: code, reason: reason)
            }
        case .open:
            break  // only the gateway opens streams
        }
    }

    func writabilityChanged(_ writable: Bool) {
        isWritable = writable
        guard writable else { return }
        for socket in streams.values { socket.resumeReading() }
    }
}

/// The last handler of a link connection: hands the Runtime's frames to the loop's link.
package final class RuntimeAgentLinkHandler: ChannelInboundHandler {
    package typealias InboundIn = WebSocketFrame
    package typealias OutboundOut = WebSocketFrame

    let links: RuntimeAgentLinks
    private var link: RuntimeAgentLink?

    init(links: RuntimeAgentLinks) {
        self.links = links
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        link = links.link(for: context.eventLoop)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .binary:
            if let decoded = try? AgentLinkFrame(reading: frame.unmaskedData) { link?.received(decoded) }
        case .ping:
            context.writeAndFlush(
                wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, maskKey: link?.nextMaskKey(), data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            context.close(promise: nil)
        default:
            break
        }
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        link?.writabilityChanged(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
