import AgentLink
import DataPlane
import EdgeHTTP
import JOSE
import Logging
import NIOCore
import NIOWebSocket
import RuntimeAPI
import SecurityGuard

/// Serves one admitted agent socket on its event loop: relays its messages
/// to the Runtime as a stream of the loop's `RuntimeAgentLink`, and keeps
/// authorizing it while it is open.
///
/// - Whole messages up to the configured size (1009 beyond); at most
///   `limits.websocket_messages_per_second` (1008 beyond, bursts of twice).
/// - The socket closes with 1008 "token expired" at the token's `exp`, unless
///   the client renews it with `{"type":"auth.renew","access_token":"..."}`
///   for the same user and tenant (answered `{"type":"auth.renewed","expires_at":...}`);
///   another user's token closes it with 1008. Only a text message that
///   mentions `auth.renew` is parsed here; every other message passes as bytes.
/// - A logout, revocation or disabled account closes it with 1008 (the
///   registry's request, delivered on this loop); a Runtime that ends the
///   stream for an ended session, 1008 passed on; a Runtime that goes away, 1011.
/// - A client silent for a ping interval is pinged, and closed with 1001 if
///   it is still silent one interval later.
/// - A client that does not read: while its connection is unwritable (answers
///   wait in the gateway), the client is not read, so it cannot ask for more;
///   unwritable for `limits.ws_send_timeout_seconds`, or with more than
///   `maximumUnreadBytes` waiting, it is closed with 1008 at once. Pings and
///   pongs from the client count in its message rate.
///
/// One deadline per socket, in its event loop's `SocketTimers`, serves the
/// expiry, the ping and the close grace; an idle socket holds no task and no buffer.
package final class AgentSocketHandler: ChannelDuplexHandler {
    package typealias InboundIn = WebSocketFrame
    package typealias OutboundIn = WebSocketFrame
    package typealias OutboundOut = WebSocketFrame

    let sockets: AgentSockets
    let admitted: AdmittedSocket
    private var context: ChannelHandlerContext?
    private var link: RuntimeAgentLink?
    /// The socket's stream on the link; 0 once it has ended.
    private var stream: UInt64 = 0
    private var expiresAt: Double
    private var lastHeard = NIODeadline.now()
    private var pingSent: NIODeadline?
    private var closeSent = false
    private var closeCode: UInt16 = 0
    /// Why the gateway (or the Runtime, through it) closed the socket; `nil` when the client did.
    private var closeReason: String?
    private var allowance: Double
    private var lastRefill = NIODeadline.now()
    private var timers: SocketTimers?
    private var readPending = false
    private var registered = false
    /// Since when the connection has been unwritable (the client is not taking in what it is sent).
    private var unwritableSince: NIODeadline?

    package init(sockets: AgentSockets, admitted: AdmittedSocket) {
        self.sockets = sockets
        self.admitted = admitted
        expiresAt = admitted.caller.expiresAt
        allowance = sockets.limits.webSocketMessagesPerSecond * 2
    }

    var pingInterval: TimeAmount { .milliseconds(Int64(sockets.limits.webSocketPingInterval * 1000)) }

    // MARK: Lifecycle

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        registered = true
        sockets.metrics.openSockets(1)
        let eventLoop = context.eventLoop
        timers = sockets.timers.value(for: eventLoop) { SocketTimers(eventLoop: eventLoop) }
        let link = sockets.links.link(for: context.eventLoop)
        self.link = link
        stream = link.open(self, for: admitted)
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        admitted.registration.target.attach(on: context.eventLoop) { request in
            loopBound.value.close(code: request.code, reason: request.reason, runtimeReason: "client socket closed by the gateway")
        }
        scheduleCheck()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        end(runtimeReason: "client went away")
        context.fireChannelInactive()
    }

    /// Graceful shutdown: the client is told (1001) and given the close grace to answer.
    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            close(code: 1001, reason: "the gateway is shutting down; reconnect shortly", runtimeReason: "gateway shutting down")
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        end(runtimeReason: "client went away")
        self.context = nil
    }

    /// The socket is gone: its stream, its registration and its deadline end with it (once).
    private func end(runtimeReason: String) {
        guard registered else { return }
        registered = false
        timers?.cancel(self)
        if stream != 0 { link?.close(stream: stream, code: 1000, reason: runtimeReason) }
        stream = 0
        sockets.registry.unregister(admitted.registration)
        sockets.metrics.openSockets(-1)
        var metadata: Logger.Metadata = ["session_id": "\(admitted.sessionID)", "code": "\(closeCode)"]
        if let closeReason { metadata["reason"] = "\(closeReason)" }
        sockets.logger.info("agent socket closed", metadata: metadata)
    }

    // MARK: From the client

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        lastHeard = .now()
        pingSent = nil
        switch frame.opcode {
        case .text, .binary:
            guard withinRate() else {
                return close(
                    code: 1008, reason: "message rate exceeded (limit \(Int(sockets.limits.webSocketMessagesPerSecond)) per second)",
                    runtimeReason: "client socket closed by the gateway")
            }
            let message = frame.unmaskedData
            if frame.opcode == .text, let token = AgentSocketHandler.renewalToken(message) {
                return renew(token)
            }
            guard !closeSent, stream != 0 else { return }
            link?.send(frame.opcode == .text ? .text(stream: stream, message) : .binary(stream: stream, message))
        case .ping, .pong:
            // Control frames count in the rate too: a flood of pings would otherwise be answered without bound.
            guard withinRate() else {
                return close(
                    code: 1008, reason: "message rate exceeded (limit \(Int(sockets.limits.webSocketMessagesPerSecond)) per second)",
                    runtimeReason: "client socket closed by the gateway")
            }
            guard frame.opcode == .ping, !closeSent else { return }
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            var data = frame.unmaskedData
            let code = data.readInteger(as: UInt16.self) ?? 1000
            let reason = data.readString(length: data.readableBytes) ?? ""
            if closeSent {
                // The client answered our close: done.
                context.close(promise: nil)
                return
            }
            if stream != 0 { link?.close(stream: stream, code: code, reason: reason) }
            stream = 0
            closeSent = true
            closeCode = code
            var answer = context.channel.allocator.buffer(capacity: 2)
            answer.writeInteger(code)
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: answer))).assumeIsolated()
                .whenComplete { _ in context.close(promise: nil) }
        default:
            break
        }
    }

    /// A frame the codec refused: the client is told why (1002 or 1009) and, since nothing after
    /// that frame can be read (not even its close), the connection closes once that is written.
    /// Any other error (the connection failing) closes it at once.
    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? AgentFrameError else { return context.close(promise: nil) }
        close(code: error.closeCode, reason: error.reason, runtimeReason: "client went away", thenDisconnect: true)
    }

    /// The token bucket of the client's message rate.
    private func withinRate() -> Bool {
        let rate = sockets.limits.webSocketMessagesPerSecond
        let now = NIODeadline.now()
        let elapsed = Double((now - lastRefill).nanoseconds) / 1e9
        lastRefill = now
        allowance = min(rate * 2, allowance + rate * elapsed)
        guard allowance >= 1 else { return false }
        allowance -= 1
        return true
    }

    // MARK: Renewal

    /// The access token of `{"type":"auth.renew","access_token":"..."}`, or `nil` for any other
    /// message; only a short message that contains `auth.renew` is parsed.
    static func renewalToken(_ message: ByteBuffer) -> String? {
        guard message.readableBytes < 16 * 1024, message.readableBytesView.firstRange(of: renewMarker) != nil,
            let object = try? StrictJSONReader().parseObject(Array(message.readableBytesView)), object["type"] == "auth.renew"
        else { return nil }
        return object["access_token"]?.stringValue ?? ""
    }

    static let renewMarker = Array("auth.renew".utf8)

    /// Checks a renewal on the loop (from the token cache and the revocation
    /// mirror), asking the store only when the mirror is stale.
    private func renew(_ token: String) {
        do {
            if let caller = try sockets.authenticator.authenticateInMemory(token) {
                return renewed(.success(caller))
            }
        } catch {
            return renewed(.failure(error))
        }
        guard let context else { return }
        let authenticator = sockets.authenticator
        context.eventLoop.makeFutureWithTask { try await authenticator.authenticate(token) }.assumeIsolated().whenComplete { [self] result in
            renewed(result)
        }
    }

    private func renewed(_ result: Result<AuthenticatedCaller, any Error>) {
        guard !closeSent else { return }
        switch result {
        case .failure(let failure as AuthenticationFailure):
            let error = GatewayError(failure)
            sendJSON(["type": "auth.renew_failed", "error": .string(error.code), "message": .string(error.message)])
        case .failure:
            sendJSON(["type": "auth.renew_failed", "error": "unavailable", "message": "the token could not be checked; try again"])
        case .success(let caller):
            guard caller.userID == admitted.caller.userID, caller.tenantID == admitted.caller.tenantID else {
                return close(code: 1008, reason: "the renewal token belongs to another user", runtimeReason: "client socket closed by the gateway")
            }
            expiresAt = max(expiresAt, caller.expiresAt)
            sendJSON(["type": "auth.renewed", "expires_at": .number(caller.expiresAt)])
        }
    }

    private func sendJSON(_ value: JSONValue) {
        guard let context, !closeSent else { return }
        let frame = WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: JSONWriter.bytes(value)))
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
    }

    // MARK: From the Runtime

    /// A message of this socket's stream.
    func runtimeSent(_ opcode: WebSocketOpcode, _ message: ByteBuffer) {
        guard let context, !closeSent else { return }
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: opcode, data: message)), promise: nil)
        if !context.channel.isWritable, let waiting = try? context.channel.syncOptions?.getOption(.bufferedWritableBytes),
            waiting > maximumUnreadBytes
        {
            closeUnread(context: context)
        }
    }

    /// The most the gateway holds for a client that does not read before closing it.
    var maximumUnreadBytes: Int { max(1 << 20, 4 * sockets.maximumMessageBytes) }

    var sendTimeout: TimeAmount { .milliseconds(Int64(sockets.limits.webSocketSendTimeout * 1000)) }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            unwritableSince = nil
            resumeReading()
        } else if unwritableSince == nil {
            unwritableSince = .now()
            scheduleCheck()
        }
        context.fireChannelWritabilityChanged()
    }

    /// The client has taken in nothing for too long, or too much waits for it: 1008, closed at once
    /// (a close handshake would wait behind everything it has not read).
    private func closeUnread(context: ChannelHandlerContext) {
        guard !closeSent else { return }
        sockets.logger.warning(
            "agent socket closed: its client does not read what it is sent",
            metadata: ["session_id": "\(admitted.sessionID)", "waiting_seconds": "\(unwritableSince.map { Double((NIODeadline.now() - $0).nanoseconds) / 1e9 } ?? 0)"])
        close(code: 1008, reason: "the client does not read its messages", runtimeReason: "client stopped reading")
        context.close(promise: nil)
    }

    /// The Runtime ended the stream (or the link went away): the client is told why.
    func runtimeEnded(code: UInt16, reason: String) {
        stream = 0
        close(code: code, reason: reason, runtimeReason: nil)
    }

    // MARK: Closing

    /// Sends the client one close frame and tells the Runtime (unless it ended
    /// the stream itself); the connection closes when the client answers, or
    /// after a grace period (at once once the frame is written, with `thenDisconnect`).
    func close(code: UInt16, reason: String, runtimeReason: String?, thenDisconnect: Bool = false) {
        guard let context, !closeSent else { return }
        closeSent = true
        closeCode = code
        closeReason = reason
        if stream != 0, let runtimeReason { link?.close(stream: stream, code: 1000, reason: runtimeReason) }
        stream = 0
        var data = context.channel.allocator.buffer(capacity: 2 + min(reason.utf8.count, 123))
        data.writeInteger(code)
        data.writeBytes(reason.utf8.prefix(123))
        let written = context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)))
        if thenDisconnect { written.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
        // The client has the close grace to answer; then the connection closes anyway.
        timers?.schedule(self, at: .now() + AgentSockets.closeGrace)
    }

    // MARK: Expiry and pings

    /// One deadline per socket, at the earlier of the token's expiry and the next ping decision.
    private func scheduleCheck() {
        guard !closeSent else { return }
        let untilExpiry = max(0, expiresAt - sockets.clock.now())
        var next = NIODeadline.now() + .milliseconds(Int64(min(untilExpiry, 86_400) * 1000))
        next = min(next, (pingSent ?? lastHeard) + pingInterval)
        if let unwritableSince { next = min(next, unwritableSince + sendTimeout) }
        timers?.schedule(self, at: next)
    }

    /// The socket's deadline came: after a close, the grace is over; otherwise expiry and ping are checked.
    func deadlineReached() {
        guard let context else { return }
        if closeSent {
            context.close(promise: nil)
            return
        }
        runCheck()
    }

    private func runCheck() {
        guard let context, !closeSent else { return }
        if sockets.clock.now() >= expiresAt {
            return close(code: 1008, reason: "token expired", runtimeReason: "client token expired")
        }
        let now = NIODeadline.now()
        if let unwritableSince, now - unwritableSince >= sendTimeout {
            return closeUnread(context: context)
        }
        if let pingSent {
            if now - pingSent >= pingInterval {
                return close(code: 1001, reason: "no answer to ping", runtimeReason: "client stopped answering")
            }
        } else if now - lastHeard >= pingInterval {
            pingSent = now
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer(string: "portcullis"))), promise: nil)
        }
        scheduleCheck()
    }

    // MARK: Back-pressure toward the Runtime

    package func read(context: ChannelHandlerContext) {
        if link?.isWritable == false || unwritableSince != nil {
            readPending = true
        } else {
            context.read()
        }
    }

    /// The link can take more, or the client's connection can: read the client again (when both can).
    func resumeReading() {
        guard readPending, link?.isWritable != false, unwritableSince == nil, let context else { return }
        readPending = false
        context.read()
    }
}
