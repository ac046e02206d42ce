import EdgeHTTP
import JOSE
import MCPPolicy
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
    func beginMCPEvents(_ response: UpstreamResponseHead) {
        mcpEvents = SSEEventBoundary()
        mcp.eventsOpenEnded = Self.takesEventsOfItsOwn(response)
        plane.metrics.mcpStreamOpened()
        guard let expiresAt = mcpState?.expiresAt else { return }
        let seconds = max(0, expiresAt - plane.browser.clock.now())
        tunnelExpiry = eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(min(seconds, 400 * 24 * 3600) * 1000))) { [self] in
            endMCPExchange(reason: "token expired", cancelsWork: false)
        }
    }

    /// A piece of an SSE answer under an end, or with notices waiting: what reaches the first
    /// event's end (all of it when none ends in it), its events followed.
    func relayMCPEventsEnding(_ buffer: ByteBuffer) -> ByteBuffer? {
        guard var events = mcpEvents else { return buffer }
        let stopping = mcpEndPending != nil || !(mcpState?.pendingNotices.isEmpty ?? true)
        let upTo = buffer.withUnsafeReadableBytes { events.advance($0, stoppingAtBoundary: stopping) }
        mcpEvents = events
        guard stopping, let upTo else { return buffer }
        return buffer.getSlice(at: buffer.readerIndex, length: upTo)
    }

    /// Tells the client on this GET's stream that the URL elicitation `id` it was given is complete
    /// (the person connected the service): `notifications/elicitation/complete` as an SSE event of
    /// its own, between two of the upstream's (held until the event under way ends).
    ///
    /// Only a stream that can carry it hears it: an SSE answer under way, not ending, with no
    /// length told to the client, opened by a client of 2025-11-25 (the one revision with the
    /// notification). Anything else ignores it: the client learns it when it retries.
    ///
    /// On a route that filters lists the stream's bytes reach this point as the filter's whole
    /// events, so a notice goes between two of those.
    func tellElicitationComplete(_ id: String) {
        guard !finished, mcpEndPending == nil, let events = mcpEvents, let state = mcpState, state.eventsOpenEnded,
            MCPProtocolRevision.hearsElicitationComplete(head.headers["MCP-Protocol-Version"])
        else { return }
        plane.logger.info("URL elicitation completed on the client's stream", metadata: ["request_id": "\(requestID)", "elicitation_id": "\(id)"])
        guard events.isAtBoundary else {
            // Held for the event under way; a server that never ends it holds a few ids at most, each once.
            if state.pendingNotices.count < Self.pendingNoticesLimit, !state.pendingNotices.contains(id) { state.pendingNotices.append(id) }
            return
        }
        writeAnswerBody(Self.elicitationCompleteEvent(id))
        handler.flushClient()
    }

    /// How many notices wait at most for the end of one event of the upstream's.
    static let pendingNoticesLimit = 8

    /// `notifications/elicitation/complete` for `id` as an SSE event of its own.
    static func elicitationCompleteEvent(_ id: String) -> ByteBuffer {
        var event = ByteBuffer()
        event.writeStaticString("event: message\ndata: ")
        event.writeBytes(JSONWriter.bytes(URLElicitationAnswer.completion(elicitationID: id)))
        event.writeStaticString("\n\n")
        return event
    }

    /// Whether the gateway may add an event of its own to an SSE answer: the client was told no
    /// length (chunked, or until the close with no transfer coding), and the bytes are the events
    /// themselves (no `Content-Encoding` but `identity`): a compressed stream's bytes are not.
    static func takesEventsOfItsOwn(_ response: UpstreamResponseHead) -> Bool {
        switch response.framing {
        case .chunked, .untilClose: break
        case .none, .length: return false
        }
        return !response.fields.contains { field in
            (response.name(of: field, is: "content-encoding") && response.valueString(of: field).lowercased() != "identity")
                || (response.name(of: field, is: "transfer-encoding") && response.valueString(of: field).lowercased() != "chunked")
        }
    }

    /// The notices waiting for the end of the upstream's event under way, which has just ended.
    func sendPendingNotices() {
        guard let state = mcpState, !state.pendingNotices.isEmpty else { return }
        let notices = state.pendingNotices
        state.pendingNotices = []
        for id in notices { writeAnswerBody(Self.elicitationCompleteEvent(id)) }
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
