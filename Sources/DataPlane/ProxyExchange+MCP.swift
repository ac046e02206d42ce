import EdgeHTTP
import JOSE
import MCPPolicy
import NIOCore
import NIOHTTP1
import Observability
import SecurityGuard

/// An MCP route's decision on each request, before anything reaches its server: a POST's body is
/// read whole (up to `mcp.max_body_bytes`), checked against `Mcp-Method` and `Mcp-Name`, and
/// decided message by message; a GET stream or a DELETE is the route's policy's alone.
extension ProxyExchange {
    /// Holds an admitted MCP POST until its body is read, then decides; any other method goes on.
    func admitMCP(_ policy: MCPCallPolicy, caller: AuthenticatedCaller, sessionID: String?) {
        guard !finished else { return }
        userID = caller.userID  // its line names the caller, whatever is decided
        guard head.method == .POST else {
            mcpCall = MCPCallFields(clientID: caller.clientID, tenantID: caller.tenantID, decision: "allowed")
            return proceed(caller, sessionID: sessionID)
        }
        mcpAwaiting = (caller, sessionID)
        if requestEnded { return decideMCPBody() }
        if expectsContinue && bodyBytes == 0 {
            // Admitted so far: the body is needed to decide on the rest.
            handler.writeToClient(.head(HTTPResponseHead(version: .http1_1, status: .continue)), flush: true)
        }
    }

    /// The whole body came: decide, and forward it, refuse it, or ask for a step-up.
    func decideMCPBody() {
        guard let (caller, sessionID) = mcpAwaiting, let policy = route.mcpPolicy, !finished else { return }
        mcpAwaiting = nil
        var call = MCPCallFields(clientID: caller.clientID, tenantID: caller.tenantID, decision: "allowed")
        if let encoding = head.headers.first(name: "content-encoding"), encoding.lowercased() != "identity" {
            call.decision = "mcp_body_encoded"
            mcpCall = call
            return fail(
                GatewayError(
                    .unsupportedMediaType, "mcp_body_encoded", "the gateway decides on an MCP request by its body, and cannot read one with a content-encoding; send it uncompressed"))
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(bodyBytes)
        for buffer in pendingBody { bytes.append(contentsOf: buffer.readableBytesView) }
        let body: MCPBody
        do throws(MCPBodyError) {
            body = try MCPBody.read(bytes)
            let sent = MCPRequestHeaders(methods: head.headers["mcp-method"], names: head.headers["mcp-name"])
            if let mismatch = sent.mismatch(with: body) { throw mismatch }
        } catch {
            call.decision = error.code
            mcpCall = call
            return answerRPC(
                status: .badRequest, JSONWriter.bytes(JSONRPCErrorAnswer.error(id: error.id, rpcCode: error.rpcCode, message: error.message, code: error.code)))
        }
        if case .single(let message) = body {
            call.method = message.method
            call.name = message.name.map { message.method?.hasPrefix("resources/") == true ? MCPCallFields.loggedName($0) : $0 }
        } else {
            call.method = "batch"
        }
        let (decision, decisions) = policy.decide(
            body, claims: caller.claims, tenantID: caller.tenantID, issuer: caller.external?.issuer, hasSession: fields.sessionID != nil,
            routeScopes: route.mcp?.scopes ?? [])
        call.decision = decision.label
        switch decision {
        case .allowed:
            if case .single(let message) = body, message.kind == .request, let method = message.method, let id = message.id, policy.filtersList(method) {
                let (claims, tenantID, issuer, hasSession) = (caller.claims, caller.tenantID, caller.external?.issuer, fields.sessionID != nil)
                listFilter = MCPListFilter(method: method, id: id) { name in
                    policy.lists(name: name, method: method, claims: claims, tenantID: tenantID, issuer: issuer, hasSession: hasSession)
                }
            }
            startedTraceparent = MCPTrace.startedTraceparent(for: head.headers)
            call.traceID = MCPTrace.traceID(startedTraceparent ?? head.headers.first(name: "traceparent"))
            mcpCall = call
            proceed(caller, sessionID: sessionID)
        case .needsScopes(let scopes):
            mcpCall = call
            var error = GatewayError(
                .forbidden, "insufficient_scope",
                "this call needs the scopes \(scopes.joined(separator: " ")); ask the person for them (authorize again with that scope) and retry")
            error.insufficientScope = scopes.joined(separator: " ")
            fail(error)
        case .refused:
            mcpCall = call
            guard let answer = JSONRPCErrorAnswer.refusal(for: body, decisions: decisions) else {
                // Notifications only: nothing awaits a JSON-RPC answer.
                return fail(GatewayError(.forbidden, call.decision, "the gateway's policy refuses this notification for this MCP server"))
            }
            answerRPC(status: .ok, answer)
        }
    }

    /// Answers with a JSON-RPC body the gateway made (an error the client shows as one) and ends
    /// the exchange; the MCP server never hears of the request.
    func answerRPC(status: HTTPResponseStatus, _ body: [UInt8]) {
        guard !finished else { return }
        self.status = Int(status.code)
        let closeClient = expectsContinue && !requestEnded
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "Content-Length", value: String(body.count))
        if closeClient { headers.add(name: "Connection", value: "close") }
        decorate(&headers)
        handler.writeToClient(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers)))
        handler.writeToClient(.body(.byteBuffer(ByteBuffer(bytes: body))))
        handler.writeToClient(.end(nil), flush: true)
        finish(closeClient: closeClient || Self.wantsClose(head))
    }

    static func mcpBodyTooLarge(_ limit: Int) -> GatewayError {
        GatewayError(
            .contentTooLarge, "mcp_body_too_large",
            "the gateway reads an MCP request whole to decide on it, up to \(limit) bytes; this one is larger (its operator may raise mcp.max_body_bytes)")
    }
}

// MARK: Filtered list answers

extension ProxyExchange {
    /// A list call's answer head: held (JSON, or any answer with a length, whose length changes),
    /// or passed on with its events filtered as they come (SSE); an answer the gateway cannot read
    /// is refused, never passed unfiltered.
    func holdOrFilterAnswer(_ response: UpstreamResponseHead) {
        guard let filter = listFilter else { return }
        listFilter = nil
        guard response.status == 200 else { return upstreamRead(.head(response)) }  // an error lists nothing
        var contentType = ""
        var encoded = false
        for field in response.fields {
            if response.name(of: field, is: "content-type") { contentType = response.valueString(of: field).lowercased() }
            if response.name(of: field, is: "content-encoding"), response.valueString(of: field).lowercased() != "identity" { encoded = true }
        }
        let isJSON = contentType.hasPrefix("application/json")
        let isEvents = contentType.hasPrefix("text/event-stream")
        guard !encoded, isJSON || isEvents else {
            plane.logger.warning("MCP list answer not filterable", metadata: ["upstream": "\(route.name)", "content_type": "\(contentType.prefix(60))"])
            return fail(
                GatewayError(.badGateway, "mcp_answer_unfilterable", "the MCP server answered the list in a form the gateway cannot filter (JSON or SSE, uncompressed); its operator must fix it"),
                upstreamStatus: 502)
        }
        if isEvents && response.contentLength == nil {
            eventFilter = MCPEventStreamFilter(filter: filter)
            return upstreamRead(.head(response))
        }
        deadline = nil
        status = response.status
        heldAnswer = (response, [])
        listFilter = filter
    }

    /// A piece of a filtered answer: held, or its complete events passed on.
    func filterAnswerBody(_ buffer: ByteBuffer) {
        if var held = heldAnswer {
            heldAnswer = nil  // one copy of the bytes while they grow
            held.bytes.append(contentsOf: buffer.readableBytesView)
            guard held.bytes.count <= MCPListFilter.maximumBytes else {
                return fail(GatewayError(.badGateway, "mcp_answer_too_large", "the MCP server's list answer is larger than the gateway filters (8 MiB)"), upstreamStatus: 502)
            }
            heldAnswer = held
            return
        }
        guard var filter = eventFilter else { return }
        eventFilter = nil
        do {
            let out = try filter.feed(buffer.readableBytesView)
            eventFilter = filter
            if !out.isEmpty { passFiltered(out) }
        } catch {
            plane.logger.warning("MCP list event too large to filter; stream ended", metadata: ["upstream": "\(route.name)", "request_id": "\(requestID)"])
            finish(closeClient: true)
        }
    }

    /// Filtered bytes on to the client, as the upstream's body would go.
    private func passFiltered(_ bytes: [UInt8]) {
        let filter = eventFilter
        eventFilter = nil
        upstreamRead(.body(ByteBuffer(bytes: bytes)))
        if !finished { eventFilter = filter }
    }

    /// A held answer's end: filtered, and sent with its new length.
    func releaseHeldAnswer() {
        guard let (response, bytes) = heldAnswer, let filter = listFilter else { return }
        heldAnswer = nil
        listFilter = nil
        var out: [UInt8]
        if Self.isEventStream(response) {
            var events = MCPEventStreamFilter(filter: filter)
            do {
                out = try events.feed(bytes)
            } catch {
                return fail(GatewayError(.badGateway, "mcp_answer_too_large", "the MCP server's list answer is larger than the gateway filters (8 MiB)"), upstreamStatus: 502)
            }
            out += events.finish()
        } else {
            do {
                out = try filter.filtered(bytes) ?? bytes
            } catch {
                return fail(
                    GatewayError(.badGateway, "mcp_answer_unfilterable", "the MCP server's list answer is not valid JSON; its operator must fix it"), upstreamStatus: 502)
            }
        }
        rewrittenLength = out.count
        upstreamRead(.head(response))
        if !out.isEmpty { upstreamRead(.body(ByteBuffer(bytes: out))) }
        upstreamRead(.end)
    }

    /// A filtered SSE answer's end: what was held goes as it came, then the end.
    func endFilteredEvents() {
        guard var filter = eventFilter else { return }
        eventFilter = nil
        let rest = filter.finish()
        if !rest.isEmpty { upstreamRead(.body(ByteBuffer(bytes: rest))) }
        upstreamRead(.end)
    }
}

extension ProxyExchange {
    /// Whether an answer is an event stream (`text/event-stream`).
    static func isEventStream(_ response: UpstreamResponseHead) -> Bool {
        response.fields.contains { response.name(of: $0, is: "content-type") && response.valueString(of: $0).lowercased().hasPrefix("text/event-stream") }
    }
}
