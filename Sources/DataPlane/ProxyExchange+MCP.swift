import EdgeHTTP
import Foundation
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
    /// The methods an MCP route takes: the transport's (POST a message, GET a stream, DELETE a
    /// session), and HEAD and OPTIONS, which carry no call. Another is 405, whatever `methods` says.
    static let mcpMethods: [HTTPMethod] = [.POST, .GET, .DELETE, .HEAD, .OPTIONS]

    /// Holds an admitted MCP POST until its body is read, then decides; a GET, DELETE, HEAD or
    /// OPTIONS (no call in it) goes on. The request is registered at once with its caller's account
    /// and token, so that access ending while its body is still coming refuses it.
    func admitMCP(_ policy: MCPCallPolicy, caller: AuthenticatedCaller, sessionID: String?) {
        guard !finished else { return }
        nameInAccessLog(caller)  // its line names the caller, whatever is decided
        let call = MCPCallFields(clientID: caller.clientID, tenantID: caller.tenantID, decision: "allowed")
        guard Self.mcpMethods.contains(head.method), !webSocket else {
            mcpCall = call.deciding("method_not_allowed")
            var error = GatewayError(
                .methodNotAllowed, "method_not_allowed",
                "an MCP server takes POST (a message), GET (a stream) and DELETE (its session)\(webSocket ? ", never a WebSocket" : "")")
            // RFC 9110 §15.5.6: a 405 lists what the resource does take.
            error.allow = Self.mcpMethods.map(\.rawValue).filter(route.allowedMethodNames.contains).sorted().joined(separator: ", ")
            return fail(error)
        }
        // Only a POST carries a call; a method a proxy or framework reads from a field would be another.
        if head.headers.contains(where: { Self.isMethodOverride($0.name) }) {
            mcpCall = call.deciding("mcp_invalid_request")
            return fail(.invalidRequest("an MCP request may not carry X-HTTP-Method-Override (or X-Method-Override, X-HTTP-Method): send the method itself"))
        }
        guard head.method == .POST || (fields.contentLength.map { $0 == "0" } ?? !fields.hasTransferEncoding) else {
            mcpCall = call.deciding("mcp_invalid_request")
            return fail(.invalidRequest("only a POST to an MCP server carries a body; send this \(head.method.rawValue) without one"), closeClient: true)
        }
        registerMCPExchange(caller)
        guard head.method == .POST else {
            mcpCall = call
            // A stream may carry a list's answer again (a resumed request): filtered like the POST's own.
            if head.method == .GET, policy.filtersAnyList {
                listFilter = Self.listFilter(policy, caller: caller, hasSession: fields.sessionID != nil, id: nil, method: nil)
            }
            return proceed(caller, sessionID: sessionID)
        }
        if let length = fields.contentLength.flatMap(Int.init), length > policy.maximumBodyBytes {
            mcpCall = call.deciding("mcp_body_too_large")
            return fail(Self.mcpBodyTooLarge(policy.maximumBodyBytes), closeClient: true)
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
        let post = MCPPostFields(head.headers)
        if !Self.isIdentityEncoded(post.contentEncodings) {
            mcpCall = call.deciding("mcp_body_encoded")
            return fail(
                GatewayError(
                    .unsupportedMediaType, "mcp_body_encoded", "the gateway decides on an MCP request by its body, and cannot read one with a content-encoding; send it uncompressed"))
        }
        // The body is read as UTF-8 JSON here; a server told another charset (UTF-7, UTF-16) would read another message.
        guard Self.isJSONContentType(post.contentTypes) else {
            mcpCall = call.deciding("mcp_content_type")
            return fail(
                GatewayError(
                    .unsupportedMediaType, "mcp_content_type",
                    "an MCP message is sent as Content-Type: application/json (charset utf-8 or none), once; the gateway reads no other"))
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(bodyBytes)
        for buffer in pendingBody { bytes.append(contentsOf: buffer.readableBytesView) }
        let body: MCPBody
        do throws(MCPBodyError) {
            body = try MCPBody.read(bytes)
            let sent = MCPRequestHeaders(methods: post.methods, names: post.names)
            if let mismatch = sent.mismatch(with: body) { throw mismatch }
        } catch {
            call.decision = error.code
            mcpCall = call
            return answerRPC(
                status: .badRequest, JSONWriter.bytes(JSONRPCErrorAnswer.error(id: error.id, rpcCode: error.rpcCode, message: error.message, code: error.code)))
        }
        if case .single(let message) = body {
            call.method = message.method.map { String($0.prefix(128)) }
            call.name = message.name.map { message.method?.hasPrefix("resources/") == true || message.completes == "ref/resource" ? MCPCallFields.loggedName($0) : String($0.prefix(256)) }
            let labels = policy.labels(message)
            (call.methodLabel, call.nameLabel) = (labels.method, labels.name)
        } else {
            (call.method, call.methodLabel) = ("batch", "batch")
        }
        let (decision, decisions) = policy.decide(
            body, claims: caller.claims, tenantID: caller.tenantID, issuer: caller.external?.issuer, hasSession: fields.sessionID != nil,
            routeScopes: route.mcpScopes)
        call.decision = decision.label
        switch decision {
        case .allowed:
            if case .single(let message) = body, message.kind == .request, let method = message.method, let id = message.id {
                if policy.filtersList(method) {
                    listFilter = Self.listFilter(policy, caller: caller, hasSession: fields.sessionID != nil, id: id, method: method)
                } else if policy.filtersAnyList {
                    // Another request's answer on a filtering route: only its own response may come on it.
                    listFilter = MCPListFilter(answerTo: id)
                }
            }
            startedTraceparent = MCPTrace.startedTraceparent(sent: post.traceparents)
            // Traced, the MCP server's trace is the gateway's span's (the caller's trace, or one started here).
            call.traceID = trace?.traceID ?? MCPTrace.traceID(startedTraceparent ?? post.traceparents.first)
            mcpCall = call
            // What an end of access under way cancels at the MCP server: the requests (not notifications or responses) sent.
            switch body {
            case .single(let message): if message.kind == .request, let id = message.id { mcp.forwardedRequestIDs = [id] }
            case .batch(let messages): mcp.forwardedRequestIDs = messages.compactMap { $0.kind == .request ? $0.id : nil }
            }
            if !mcp.forwardedRequestIDs.isEmpty { mcp.protocolVersions = post.protocolVersions }
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
            // Why, in full, for the operator only: the answer names the tool, not the rule it failed.
            for case .refused(let refusal) in decisions {
                if let detail = refusal.detail {
                    plane.logger.notice("MCP call refused", metadata: ["request_id": "\(requestID)", "code": "\(refusal.code)", "why": "\(detail)"])
                }
            }
            guard let answer = JSONRPCErrorAnswer.refusal(for: body, decisions: decisions) else {
                // Notifications only: nothing awaits a JSON-RPC answer.
                return fail(GatewayError(.forbidden, call.decision, "the gateway's policy refuses this notification for this MCP server"))
            }
            answerRPC(status: Self.refusalStatus(body, decision: decision, post: post), answer)
        }
    }

    /// A refusal's status: 404 for a method the gateway does not pass, to a client of 2026-07-28 or
    /// later (its transport's rule for a method the server does not implement); 200 otherwise, the
    /// error in the body, as earlier revisions' servers answer.
    static func refusalStatus(_ body: MCPBody, decision: MCPDecision, post: MCPPostFields) -> HTTPResponseStatus {
        guard case .single = body, case .refused(let refusal) = decision, refusal.rpcCode == JSONRPCErrorAnswer.methodNotFoundCode,
            MCPProtocolRevision.answersUnknownMethodWith404(post.protocolVersions)
        else { return .ok }
        return .notFound
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

    /// The filter of a list request's answer (`id` and `method`), or of every list answer on a stream.
    static func listFilter(_ policy: MCPCallPolicy, caller: AuthenticatedCaller, hasSession: Bool, id: JSONValue?, method: String?) -> MCPListFilter {
        let (claims, tenantID, issuer) = (caller.claims, caller.tenantID, caller.external?.issuer)
        let keeps: @Sendable (String, String) -> Bool = { method, name in
            policy.lists(name: name, method: method, claims: claims, tenantID: tenantID, issuer: issuer, hasSession: hasSession)
        }
        if let id, let method { return MCPListFilter(method: method, id: id, keeps: keeps) }
        return MCPListFilter(streamOf: ["tools/list", "prompts/list", "resources/list", "resources/templates/list"].filter(policy.filtersList), keeps: keeps)
    }

    /// `application/json`, with no parameter but `charset=utf-8`, in one field (read over its bytes:
    /// every MCP POST asks; through EdgeHTTP's concrete comparisons, as a generic one called across
    /// the module boundary runs unspecialised, at 6% of an MCP POST's CPU).
    static func isJSONContentType(_ values: [String]) -> Bool {
        guard values.count == 1 else { return false }
        if HeaderScreen.equalsLowercased(values[0].utf8, "application/json") { return true }  // as nearly every client sends it
        var first = true
        for part in values[0].utf8.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: false) {
            let word = trimmed(part)
            if first {
                guard HeaderScreen.equalsLowercased(word, "application/json") else { return false }
                first = false
            } else if !HeaderScreen.equalsLowercased(word, "charset=utf-8"), !HeaderScreen.equalsLowercased(word, "charset=\"utf-8\"") {
                return false
            }
        }
        return !first
    }

    /// `X-HTTP-Method-Override`, `X-Method-Override` or `X-HTTP-Method`, in any case (one pass over
    /// the fields, by length first: every MCP request asks).
    static func isMethodOverride(_ name: String) -> Bool {
        switch name.utf8.count {
        case 13: HeaderScreen.equalsLowercased(name.utf8, "x-http-method")
        case 17: HeaderScreen.equalsLowercased(name.utf8, "x-method-override")
        case 22: HeaderScreen.equalsLowercased(name.utf8, "x-http-method-override")
        default: false
        }
    }

    /// Whether every `Content-Encoding` value is `identity` (or there is none).
    static func isIdentityEncoded(_ values: [String]) -> Bool {
        values.allSatisfy { value in
            value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).allSatisfy { HeaderScreen.equalsLowercased(trimmed($0), "identity") }
        }
    }

    /// `bytes` without the spaces and tabs around them.
    private static func trimmed(_ bytes: Substring.UTF8View.SubSequence) -> Substring.UTF8View.SubSequence {
        let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let start = bytes.firstIndex(where: { !isBlank($0) }), let end = bytes.lastIndex(where: { !isBlank($0) }) else { return bytes[bytes.endIndex...] }
        return bytes[start...end]
    }

    static func mcpBodyTooLarge(_ limit: Int) -> GatewayError {
        GatewayError(
            .contentTooLarge, "mcp_body_too_large",
            "the gateway reads an MCP request whole to decide on it, up to \(limit) bytes; this one is larger (its operator may raise mcp.max_body_bytes)")
    }
}

// MARK: Filtered list answers

extension ProxyExchange {
    /// A list call's answer head (or any request's, on a route that filters lists): held (JSON, or
    /// any answer with a length, whose length changes), or passed on with its events filtered as
    /// they come (SSE); an answer the gateway cannot read is refused, never passed unfiltered.
    func holdOrFilterAnswer(_ response: UpstreamResponseHead) {
        guard let filter = listFilter else { return }
        listFilter = nil
        guard (200..<300).contains(response.status), response.status != 202, response.status != 204 else {
            return upstreamRead(.head(response))  // an error, or nothing, lists nothing
        }
        var contentTypes: [String] = []
        var encoded = false
        for field in response.fields {
            if response.name(of: field, is: "content-type") { contentTypes.append(response.valueString(of: field).lowercased()) }
            if response.name(of: field, is: "content-encoding"), response.valueString(of: field).lowercased() != "identity" { encoded = true }
        }
        // One Content-Type, its media type exactly JSON's or SSE's: two would be read differently by different clients.
        let contentType = contentTypes.first ?? ""
        let mediaType = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        let isJSON = contentTypes.count == 1 && mediaType == "application/json"
        let isEvents = contentTypes.count == 1 && mediaType == "text/event-stream"
        guard !encoded, isJSON || isEvents else {
            plane.logger.warning("MCP list answer not filterable", metadata: ["upstream": "\(route.name)", "content_type": "\(contentType.prefix(60))"])
            return fail(
                GatewayError(.badGateway, "mcp_answer_unfilterable", "the MCP server answered in a form the gateway cannot read on a route that filters lists (JSON or SSE, uncompressed); its operator must fix it"),
                upstreamStatus: 502)
        }
        if isEvents && response.contentLength == nil {
            eventFilter = MCPEventStreamFilter(filter: filter)
            return upstreamRead(.head(response))
        }
        // Held until its end, within the upstream's time (the deadline stays: an answer that never ends is 504).
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
                return fail(GatewayError(.badGateway, "mcp_answer_too_large", "the MCP server's answer is larger than the gateway reads on a route that filters lists (8 MiB)"), upstreamStatus: 502)
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
            // Never passed unfiltered: the stream ends here (at an event boundary: nothing of this event went).
            plane.logger.warning(
                "MCP list event not filterable; stream ended", metadata: ["upstream": "\(route.name)", "request_id": "\(requestID)", "why": "\(error)"])
            mcpCall?.ended = "list_unfilterable"
            endMCPStreamCleanly()
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
                return fail(
                    GatewayError(.badGateway, "mcp_answer_unfilterable", "the MCP server's answer is not JSON the gateway can read, or over 8 MiB, on a route that filters lists; its operator must fix it"),
                    upstreamStatus: 502)
            }
            out += events.finish()
        } else {
            do {
                out = try filter.filteredAnswer(bytes)
            } catch {
                return fail(
                    GatewayError(
                        .badGateway, "mcp_answer_unfilterable",
                        "the MCP server's answer is not one JSON-RPC response to the request, which a route that filters lists requires; its operator must fix it"), upstreamStatus: 502)
            }
        }
        rewrittenLength = out.count
        upstreamRead(.head(response))
        if !out.isEmpty { upstreamRead(.body(ByteBuffer(bytes: out))) }
        upstreamRead(.end)
    }

    /// A filtered SSE answer's end: an unfinished event held is dropped (MCPEventStreamFilter.finish), then the end.
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
