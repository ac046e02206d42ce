import EdgeHTTP
import NIOCore
import NIOHTTP1
import SecurityGuard

/// An MCP request under way is registered with its caller's account and token from its admission
/// to its end: a sign-out, a back-channel logout, a disabled account, a revoked grant, family or
/// token (on any instance: the access-change feed) or the token's expiry ends it within a second.
/// An SSE answer ends between two events, cleanly; anything else not yet answered is refused as
/// the next request would be. The MCP server hears of it: the request's upstream connection (or
/// stream) closes, and before 2026-07-28 each request of it is cancelled with
/// `notifications/cancelled` (`cancelUpstreamWork`).
extension ProxyExchange {
    /// How long an end waits for the event under way before the connection is cut instead.
    static let mcpStreamEndGrace = TimeAmount.milliseconds(500)

    func registerMCPExchange(_ caller: AuthenticatedCaller) {
        registerExchange(of: caller)
        // Its token's expiry ends a stream (armed when one begins): a JSON answer is not held past it anyway.
        mcp.expiresAt = caller.expiresAt
    }

    /// The caller's access ended while this request was under way.
    ///
    /// - Parameter cancelsWork: whether the MCP server is told to stop the request's work: yes when
    ///   access was taken away; not when the token only expired (the agent refreshes and is still
    ///   allowed: its stream ends, its work goes on).
    /// - Parameter refusal: the answer when nothing was answered yet; 401 `access_ended` (authorize again) without one.
    func endMCPExchange(reason: String, cancelsWork: Bool = true, refusal: GatewayError? = nil) {
        guard !finished, mcpEndPending == nil else { return }
        mcpCall?.ended = "access_ended: " + reason
        // The MCP server stops the work too: told so (before 2026-07-28), and its connection for the request closed below.
        if cancelsWork { cancelUpstreamWork(reason: reason) }
        guard responseStarted else {
            return fail(refusal ?? GatewayError(.unauthorized, "access_ended", "access to this MCP server ended (\(reason)) before it answered; authorize again"))
        }
        guard let events = mcpEvents else {
            // A JSON answer under way: cut, upstream and client.
            closeUpstream()
            return finish(closeClient: true)
        }
        if events.isAtBoundary { return endMCPStreamCleanly() }
        mcpEndPending = eventLoop.assumeIsolated().scheduleTask(in: Self.mcpStreamEndGrace) { [self] in
            guard !finished else { return }
            plane.logger.info("MCP stream cut mid-event", metadata: ["request_id": "\(requestID)", "reason": "\(reason)"])
            closeUpstream()
            finish(closeClient: true)
        }
    }

    /// An SSE answer's head: its events are followed, and it counts as an open stream.
    func beginMCPEvents() {
        mcpEvents = SSEEventBoundary()
        plane.metrics.mcpStreamOpened()
        guard let expiresAt = mcpState?.expiresAt else { return }
        let seconds = max(0, expiresAt - plane.browser.clock.now())
        tunnelExpiry = eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(min(seconds, 400 * 24 * 3600) * 1000))) { [self] in
            endMCPExchange(reason: "token expired", cancelsWork: false)
        }
    }

    /// A piece of an SSE answer under an end: relayed up to the first event's end, then the stream ends.
    /// Returns whether the stream ended (the piece is not to be relayed as usual).
    func relayMCPEventsEnding(_ buffer: ByteBuffer) -> ByteBuffer? {
        guard var events = mcpEvents else { return buffer }
        let upTo = buffer.withUnsafeReadableBytes { events.advance($0, stoppingAtBoundary: mcpEndPending != nil) }
        mcpEvents = events
        guard mcpEndPending != nil, let upTo else { return buffer }
        return buffer.getSlice(at: buffer.readerIndex, length: upTo)
    }

    /// Ends an SSE answer between two events: the upstream's side closed, the client's answer ended
    /// as any answer ends (HTTP/2's end of stream, HTTP/1.1's last chunk), or its connection closed.
    func endMCPStreamCleanly() {
        mcpEndPending?.cancel()
        closeUpstream()
        if handler.relaysAnswerParts {
            finish(closeClient: false)
            return handler.writeToClient(.end(nil), flush: true)
        }
        if relayChunked {
            handler.writeBytesToClient(HTTP1Bytes.lastChunk)
            handler.bytesAnswerEnded()
            handler.flushClient()
            return finish(closeClient: closesClient)
        }
        finish(closeClient: true)
    }

    /// The exchange is over: its stream is no longer open.
    func endMCPEvents() {
        mcpEndPending?.cancel()
        mcpEndPending = nil
        guard mcpEvents != nil else { return }
        mcpEvents = nil
        plane.metrics.mcpStreamClosed()
    }
}
