import EdgeHTTP
import NIOCore
import SecurityGuard

/// A WebSocket to a route: the opening handshake goes through every decision a request does
/// (token or session cookie, the route's policy, the assertion; with the cookie, the request's own
/// origin), then the upstream's 101 turns both connections into a tunnel that relays bytes as
/// they come, with back-pressure both ways, until either side closes or the session ends.
extension ProxyExchange {
    /// A tunnel's state on its exchange.
    struct Tunnel {
        /// Where the upstream's frames end: a close of the gateway's own goes between two.
        var boundary = WebSocketFrameBoundary()
        /// A close asked for while a frame was under way: sent at the frame's end.
        var pendingClose: (code: UInt16, reason: String)?
        /// Closes the connections anyway if no frame boundary comes in time.
        var fallback: Scheduled<Void>?
        /// Reads the client's side; paused while the upstream cannot take more.
        var reader: TunnelInboundHandler?
    }

    /// How long a close waits for the upstream's frame under way to end before the connections are cut.
    static let tunnelCloseGrace = TimeAmount.seconds(2)

    /// Registers the WebSocket with its session and account as soon as it is admitted (before the
    /// upstream is asked), so that a logout, a back-channel logout or a disabled account that comes
    /// while the handshake is under way refuses it; and arranges its close when its credential ends.
    func registerTunnel() {
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let loop = eventLoop
        tunnelRegistration = plane.tunnels.register(
            TunnelRegistry.Entry(
                sessionID: tunnelSessionID, userID: tunnelCaller?.userID, tenantID: tunnelCaller?.tenantID, tokenID: tunnelCaller?.tokenID,
                close: { code, reason in loop.execute { bound.value.closeTunnel(code: code, reason: reason) } },
                connection: route.upstreamCredential?.connection))
        guard let expiresAt = tunnelCaller?.expiresAt else { return }
        let seconds = max(0, expiresAt - plane.browser.clock.now())
        let reason = authenticatedByCookie ? "session expired" : "token expired"
        tunnelExpiry = eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(min(seconds, 400 * 24 * 3600) * 1000))) { [self] in
            closeTunnel(code: 1008, reason: reason)
        }
    }

    /// The upstream answered 101: the client's connection stops reading HTTP and the 101 goes to the client.
    func beginTunnel(_ response: UpstreamResponseHead) {
        guard Self.acceptsWebSocket(response) else {
            // A 101 to something else than the WebSocket asked for: never a raw pipe to whatever it is.
            return fail(
                GatewayError(.badGateway, "upstream_unavailable", "the upstream switched to another protocol than the WebSocket asked for; its operator must fix it"),
                closeClient: true, upstreamStatus: 502)
        }
        responseStarted = true
        deadline = nil
        status = 101
        upstreamKeepAlive = false
        closesClient = true
        guard let reader = handler.beginTunnel(self) else {
            // The client's pipeline could not be switched: nothing was sent; both connections go.
            return fail(GatewayError(.badGateway, "upstream_unavailable", "the WebSocket could not be set up; try again"), closeClient: true)
        }
        var out = ByteBuffer()
        out.writeStaticString("HTTP/1.1 101 Switching Protocols\r\n")
        let listed = HeaderScreen.connectionListed(response)
        for field in response.fields where HeaderScreen.isReturnable(response, field, connectionListed: listed) {
            out.writeBytes(response.bytes[field.name])
            out.writeStaticString(": ")
            out.writeBytes(response.bytes[field.value])
            out.writeStaticString("\r\n")
        }
        out.writeStaticString("Connection: Upgrade\r\nUpgrade: websocket\r\n")
        HTTP1Bytes.writeField("X-Request-Id", requestID, into: &out)
        out.writeStaticString("\r\n")
        handler.writeBytesToClient(out)
        handler.flushClient()
        var tunnel = Tunnel()
        tunnel.reader = reader
        self.tunnel = tunnel
        plane.metrics.webSocketTunnelOpened()
    }

    /// Whether an upstream's 101 switched to a WebSocket (`Upgrade` naming `websocket`, and a `Sec-WebSocket-Accept`).
    static func acceptsWebSocket(_ response: UpstreamResponseHead) -> Bool {
        var upgrade = false
        var accept = false
        for field in response.fields {
            if response.name(of: field, is: "upgrade"), HeaderScreen.listsToken(response.bytes[field.value], "websocket") { upgrade = true }
            if response.name(of: field, is: "sec-websocket-accept") { accept = true }
        }
        return upgrade && accept
    }

    /// A part of the upstream's side after the 101: its bytes go to the client as they came.
    func tunnelRead(_ part: UpstreamResponsePart) {
        guard !finished else { return }
        switch part {
        case .head:
            break  // the parser reports no head after a 101
        case .body(let buffer):
            guard var tunnel, tunnel.pendingClose != nil else {
                // Walked for its frame boundaries, so that a close can go between two frames.
                buffer.withUnsafeReadableBytes { _ = self.tunnel?.boundary.advance($0, stoppingAtBoundary: false) }
                handler.writeBytesToClient(buffer)
                if !handler.clientIsWritable { upstream?.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in } }
                return
            }
            let upTo = buffer.withUnsafeReadableBytes { tunnel.boundary.advance($0, stoppingAtBoundary: true) }
            self.tunnel = tunnel
            guard let upTo else { return handler.writeBytesToClient(buffer) }
            if upTo > 0, let slice = buffer.getSlice(at: buffer.readerIndex, length: upTo) { handler.writeBytesToClient(slice) }
            sendPendingClose()
        case .end:
            handler.flushClient()
            complete()
        }
    }

    /// Bytes from the client after the 101: written upstream as they came.
    func clientTunnelRead(_ buffer: ByteBuffer) {
        guard !finished, let upstream, tunnel?.pendingClose == nil else { return }
        upstream.channel.write(buffer, promise: nil)
        if !upstream.channel.isWritable { tunnel?.reader?.pause() }
    }

    func clientTunnelReadComplete() {
        upstream?.channel.flush()
    }

    /// Closes the tunnel (its session ended): between two of the upstream's frames, with a close
    /// frame carrying `code` and `reason`; within `tunnelCloseGrace` in any case.
    func closeTunnel(code: UInt16, reason: String) {
        guard !finished else { return }
        guard var tunnel else {
            // Still a handshake: refused, and the upstream's connection closed, before any 101.
            return fail(
                GatewayError(.unauthorized, "session_ended", "the session ended (\(reason)) while the WebSocket was being opened; sign in again"),
                closeClient: true)
        }
        guard tunnel.pendingClose == nil else { return }
        tunnel.pendingClose = (code, reason)
        if tunnel.boundary.isAtBoundary {
            self.tunnel = tunnel
            return sendPendingClose()
        }
        tunnel.fallback = eventLoop.assumeIsolated().scheduleTask(in: Self.tunnelCloseGrace) { [self] in
            guard !finished else { return }
            fail(GatewayError(.serviceUnavailable, "tunnel_closed", reason), closeClient: true)
        }
        self.tunnel = tunnel
    }

    /// Writes the pending close frame, then ends both connections.
    private func sendPendingClose() {
        guard let close = tunnel?.pendingClose else { return }
        handler.writeBytesToClient(ByteBuffer(bytes: WebSocketFrameBoundary.closeFrame(code: close.code, reason: close.reason)))
        handler.flushClient()
        if let upstream {
            upstream.handler.delegate = nil
            upstream.channel.close(promise: nil)
            self.upstream = nil
        }
        finish(closeClient: true)
    }

    /// Unregisters the WebSocket and cancels its timers (the exchange is over).
    func endTunnel() {
        if let registration = tunnelRegistration {
            plane.tunnels.unregister(registration)
            tunnelRegistration = nil
        }
        tunnelExpiry?.cancel()
        tunnelExpiry = nil
        guard let tunnel else { return }
        tunnel.fallback?.cancel()
        tunnel.reader?.pause()
        plane.metrics.webSocketTunnelClosed()
        self.tunnel = nil
    }
}
