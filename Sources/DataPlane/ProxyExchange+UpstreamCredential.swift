import EdgeHTTP
import JOSE
import MCPPolicy
import NIOCore
import SecurityGuard

extension ProxyExchange {
    /// Looks up the caller's token for the route's upstream (at its connected service, or exchanged
    /// at the company's provider), then forwards: from memory on this event loop when it is there,
    /// else after the read or exchange. A caller who has not connected the service is refused with
    /// where to connect it; a failed exchange is answered as it failed.
    func lookUpCredential(_ credential: UpstreamCredential, caller: AuthenticatedCaller?, sessionID: String?) {
        upstreamCredentialLookedUp = true
        // `auth: none` without a token: nobody to act as.
        guard let caller else {
            return fail(GatewayError(.unauthorized, "token_missing", "this route acts as you at its upstream: send an access token"))
        }
        let lookup: UpstreamCredentialLookup
        switch credential {
        case .connection(let name):
            guard let source = plane.credentials else {
                return fail(GatewayError.unavailable("this route's connection \(name) is not available on this gateway; try again shortly"))
            }
            lookup = source.token(for: caller, connection: name, on: eventLoop)
        case .exchange(let target):
            guard let source = plane.exchanges else {
                return fail(GatewayError.unavailable("this route's token exchange is not available on this gateway; try again shortly"))
            }
            lookup = source.token(for: caller, target: target, on: eventLoop)
        }
        switch lookup {
        case .known(let token?):
            upstreamBearer = token
            proceed(caller, sessionID: sessionID)
        case .known(nil):
            credentialMissing(credential, caller: caller, sessionID: sessionID)
        case .asking(let read):
            then(read, call: .upstreamCredential) { exchange, result in
                switch result {
                case .success(let token?):
                    exchange.upstreamBearer = token
                    exchange.proceed(caller, sessionID: sessionID)
                case .success(nil): exchange.credentialMissing(credential, caller: caller, sessionID: sessionID)
                case .failure(let error): exchange.fail(GatewayError(answering: error))
                }
            }
        }
    }

    /// The lookup found no token: the person has not connected the service (an exchange fails with
    /// its reason instead, so none found there is the source's fault).
    func credentialMissing(_ credential: UpstreamCredential, caller: AuthenticatedCaller, sessionID: String?) {
        guard case .connection(let name) = credential, let source = plane.credentials else {
            return fail(GatewayError.unavailable("this route's credential could not be found; try again shortly"))
        }
        connectionMissing(name, source: source, caller: caller, sessionID: sessionID)
    }

    /// The MCP methods a server answers without the person's token at its service: starting a
    /// session and a ping. Notifications, responses, a GET's stream and a DELETE need none either.
    static let mcpMethodsWithoutConnection: Set<String> = ["initialize", "ping"]

    /// The caller has not connected the route's service. An MCP request that needs it is answered
    /// with a URL elicitation naming the connect page (`URLElicitationAnswer`: `-32042`, or an
    /// `InputRequiredResult` for 2026-07-28), its link bound to the person, so the client shows them
    /// where to go and retries; what an MCP server does without it goes on without a credential;
    /// anything else is 403 `connection_required` naming the page.
    func connectionMissing(_ name: String, source: any UpstreamCredentialSource, caller: AuthenticatedCaller, sessionID: String?) {
        let url = source.connectURL(connection: name)
        guard route.isMCP else {
            // A page load: to the connect page, and back here once connected.
            if BrowserSessionGate.isNavigation(head), let location = plane.browser.connectLocation(connection: name, host: fields.host, path: path, query: query) {
                return answer(status: .seeOther, contentType: nil, body: ByteBuffer(), extra: [("Location", location), ("Cache-Control", "no-store")])
            }
            return fail(Self.connectionRequired(name, url: url))
        }
        let method = mcpCall?.method
        if head.method != .POST || mcp.forwardedRequestIDs.isEmpty || method.map(Self.mcpMethodsWithoutConnection.contains) == true {
            return proceed(caller, sessionID: sessionID)
        }
        // A batch (2025-03-26) is answered with one 403: an elicitation answers a single request.
        guard mcp.forwardedRequestIDs.count == 1, let id = mcp.forwardedRequestIDs.first, let method, method != "batch" else {
            return fail(Self.connectionRequired(name, url: url))
        }
        mcpCall?.decision = "connection_required"
        let protocolVersion = mcp.protocolVersions.first
        then(source.elicitation(for: caller, connection: name, on: eventLoop), call: .connectionElicitation) { exchange, result in
            switch result {
            case .success(let elicitationID):
                let link = url + "?elicitation=" + elicitationID
                exchange.answerRPC(
                    status: .ok,
                    JSONWriter.bytes(
                        URLElicitationAnswer.answer(
                            id: id, protocolVersion: protocolVersion, elicitationID: elicitationID, inputKey: "connect_" + name, url: link,
                            message: "This tool acts as you at \(name), which you have not connected: open \(link) to connect it, then try again.",
                            code: "connection_required")))
            case .failure(let error): exchange.fail(GatewayError(answering: error))
            }
        }
    }

    /// Registers this exchange with `caller`'s account and token and the route's connection: the
    /// end of any of them ends it, on its event loop (`endRegisteredExchange`), on any instance.
    /// Every MCP request is registered so; any other request that carries the caller's token at a
    /// connected service too (a WebSocket is registered as a tunnel).
    func registerExchange(of caller: AuthenticatedCaller) {
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let loop = eventLoop
        let connection = route.upstreamCredential?.connection
        // A GET's stream carries what the MCP server (here, the gateway) sends unasked: the end of a URL elicitation.
        var elicitationComplete: (@Sendable (String) -> Void)? = nil
        if route.isMCP && head.method == .GET && connection != nil {
            elicitationComplete = { id in loop.execute { bound.value.tellElicitationComplete(id) } }
        }
        tunnelRegistration = plane.tunnels.register(
            TunnelRegistry.Entry(
                sessionID: nil, userID: caller.userID, tenantID: caller.tenantID, tokenID: caller.tokenID,
                close: { _, reason in loop.execute { bound.value.endRegisteredExchange(reason: reason, connectionEnded: false) } },
                connection: connection,
                endConnection: { reason in loop.execute { bound.value.endRegisteredExchange(reason: reason, connectionEnded: true) } },
                clientID: caller.clientID ?? "",
                elicitationComplete: elicitationComplete))
    }

    /// The caller's access, or the connection whose token this request carries, ended while it was
    /// under way: an MCP request ends as `endMCPExchange` ends it (a disconnect answers 403, not the
    /// 401 that sends an agent to authorize again), any other as `endCredentialedExchange`.
    func endRegisteredExchange(reason: String, connectionEnded: Bool) {
        guard route.isMCP else { return endCredentialedExchange(reason: reason, reconnect: connectionEnded) }
        endMCPExchange(reason: reason, refusal: connectionEnded ? Self.connectionEnded(reason) : nil)
    }

    /// The credential this request carries upstream stopped being the caller's to use: not yet
    /// answered, it is refused; answering, both connections are cut (the upstream's work stops with its request).
    func endCredentialedExchange(reason: String, reconnect: Bool) {
        guard !finished else { return }
        guard responseStarted else {
            closeUpstream()
            return fail(Self.connectionEnded(reason, reconnect: reconnect))
        }
        closeUpstream()
        finish(closeClient: true)
    }

    /// 403 `access_ended`: the credential this request carried upstream stopped being the caller's to
    /// use before the upstream answered: the account at its service was disconnected (`reconnect`:
    /// the advice is to connect it again), or the caller's own access ended.
    static func connectionEnded(_ reason: String, reconnect: Bool = true) -> GatewayError {
        GatewayError(
            .forbidden, "access_ended",
            "this request's access ended (\(reason)) before the upstream answered" + (reconnect ? "; connect it again, then try again" : ""))
    }

    /// 403 `connection_required`: the person must connect the service first, at `url`.
    static func connectionRequired(_ name: String, url: String) -> GatewayError {
        GatewayError(.forbidden, "connection_required", "this route acts as you at \(name), which you have not connected: open \(url) to connect it, then try again")
    }
}
