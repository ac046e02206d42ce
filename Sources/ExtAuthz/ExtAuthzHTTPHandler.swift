import DataPlane
import EdgeHTTP
import HTTPTypes
import JOSE
import NIOCore
import NIOHTTP1

/// One connection of Envoy's HTTP ext_authz (`http_service`): each check request is the original
/// request's head with `path_prefix` before its path, decided by `AccessDecision` on this event loop.
///
/// Allowed is 200 exactly (a 2xx other than 200 counts as denied in several Envoy versions), with
/// the identity fields and the assertion for `allowed_upstream_headers` and the fields the client
/// may have forged in `x-envoy-auth-headers-to-remove`. Denied is the status, fields and JSON body
/// the gateway's own proxy would answer, which Envoy relays to the client; a navigation without a
/// session is a 302 to sign in.
final class ExtAuthzHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Check requests carry no body unless Envoy buffers the client's (`with_request_body`): it is
    /// read past, up to this much.
    static let maximumBodyBytes = 1 << 20
    /// The metric and access log's name for these decisions.
    static let endpoint = "ext_authz (HTTP)"

    private let plane: DataPlane
    private let configuration: ExtAuthzConfiguration
    private let removalLists: ExtAuthzRemovalLists
    private var table: RouteTable
    private var requestIDs = ConnectionRequestIDs()
    private var head: HTTPRequestHead?
    private var bodyBytes = 0
    private var refusedBody = false
    private var decision: AccessDecision?
    private var peer: String?

    init(plane: DataPlane, configuration: ExtAuthzConfiguration, removalLists: ExtAuthzRemovalLists) {
        self.plane = plane
        self.configuration = configuration
        self.removalLists = removalLists
        self.table = plane.table.current
    }

    func channelActive(context: ChannelHandlerContext) {
        peer = context.channel.remoteAddress?.ipAddress
        // Only the Envoys may ask: anyone else is closed on, before a byte is read (a check names any
        // request, and an allowed one carries an assertion for it).
        guard configuration.admits(peer) else {
            plane.logger.notice(
                "ext_authz refused a connection: its address is not in ext_authz.callers", metadata: ["peer": "\(peer ?? "unknown")", "listener": "http"])
            context.close(promise: nil)
            return
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        decision?.cancel()
        decision = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            bodyBytes = 0
            refusedBody = false
        case .body(let body):
            bodyBytes += body.readableBytes
            if bodyBytes > Self.maximumBodyBytes, !refusedBody, let head {
                refusedBody = true
                let error = GatewayError(.contentTooLarge, "payload_too_large", "a check request's body is at most 1 MiB; lower with_request_body.max_request_bytes")
                let requestID = requestIDs.next()
                deny(context: context, head: head, started: .now, requestID: requestID, ExtAuthzDenial(error, signIn: nil, requestID: requestID), close: true)
            }
        case .end:
            guard let head, !refusedBody else { return }
            self.head = nil
            check(context: context, head: head)
        }
    }

    /// Decides one check request and answers it.
    private func check(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let started = ContinuousClock.now
        let requestID = requestIDs.next()
        let close = !head.isKeepAlive
        plane.table.refresh(&table)
        let question: AccessQuestion
        do throws(GatewayError) {
            question = try Self.question(head, pathPrefix: configuration.pathPrefix, hostRequired: table.hasHostRoutes, client: plane.clientAddress(peer: peer, forwardedFor: head.headers["x-forwarded-for"]))
        } catch {
            return deny(context: context, head: head, started: started, requestID: requestID, ExtAuthzDenial(error, signIn: nil, requestID: requestID), close: close)
        }
        let decision = AccessDecision(plane: plane, question: question, eventLoop: context.eventLoop, requestID: requestID)
        self.decision = decision
        let removals = removalLists.list(for: table)
        decision.decide(table: table) { [self] verdict in
            self.decision = nil
            switch verdict {
            case .allowed(let grant):
                let upstream = ExtAuthzUpstreamFields(grant: grant, headers: head.headers, removals: removals)
                guard !upstream.isOversized else {
                    let denial = ExtAuthzDenial(ExtAuthzUpstreamFields.tooManyFields, signIn: nil, requestID: requestID)
                    return deny(context: context, head: head, started: started, requestID: requestID, denial, close: close, decision: decision)
                }
                var fields = upstream.set.map { (name: $0.name, value: $0.value) }
                if !upstream.remove.isEmpty { fields.append((name: "x-envoy-auth-headers-to-remove", value: upstream.remove.joined(separator: ","))) }
                fields.append((name: "cache-control", value: "no-store"))
                answer(context: context, head: head, started: started, requestID: requestID, status: .ok, fields: fields, body: nil, close: close, decision: decision)
            case .denied(let error, let signIn):
                let denial = ExtAuthzDenial(error, signIn: signIn, requestID: requestID)
                deny(context: context, head: head, started: started, requestID: requestID, denial, close: close, decision: decision)
            }
        }
    }

    /// The original request a check names: its method, its path after `pathPrefix` (in its one
    /// spelling), its `Host` (given once: required when routes are bound to hosts).
    static func question(_ head: HTTPRequestHead, pathPrefix: String, hostRequired: Bool, client: String) throws(GatewayError) -> AccessQuestion {
        // Byte for byte: the prefix is Envoy's, put before the original path as it came.
        let target = Array(head.uri.utf8)
        let prefix = Array(pathPrefix.utf8)
        guard target.count > prefix.count, target.starts(with: prefix), target[prefix.count] == UInt8(ascii: "/") else {
            throw GatewayError(
                .notFound, "not_found",
                "ext_authz checks come under ext_authz.path_prefix (\(pathPrefix)); set Envoy's http_service.path_prefix to the same")
        }
        let hosts = head.headers["host"]
        return try AccessQuestion.envoyCheck(
            uri: String(decoding: target[prefix.count...], as: UTF8.self), method: head.method.rawValue, host: hosts.count == 1 && !hosts[0].isEmpty ? hosts[0] : nil,
            headers: head.headers, hostRequired: hostRequired, client: client)
    }

    /// A refusal, as Envoy relays it to the client.
    private func deny(
        context: ChannelHandlerContext, head: HTTPRequestHead, started: ContinuousClock.Instant, requestID: String, _ denial: ExtAuthzDenial, close: Bool,
        decision: AccessDecision? = nil
    ) {
        answer(
            context: context, head: head, started: started, requestID: requestID, status: HTTPResponse.Status(code: denial.status),
            fields: denial.fields.map { (name: $0.name, value: $0.value) }, body: denial.body, close: close, decision: decision)
    }

    private func answer(
        context: ChannelHandlerContext, head: HTTPRequestHead, started: ContinuousClock.Instant, requestID: String, status: HTTPResponse.Status,
        fields: [(name: String, value: String)], body bytes: [UInt8]?, close: Bool, decision: AccessDecision? = nil
    ) {
        guard context.channel.isActive else { return }
        let body = bytes.flatMap { $0.isEmpty ? nil : ByteBuffer(bytes: $0) }
        var headers = HTTPHeaders()
        headers.reserveCapacity(fields.count + 2)
        for field in fields { headers.add(name: field.name, value: field.value) }
        headers.add(name: "content-length", value: String(body?.readableBytes ?? 0))
        if close { headers.add(name: "connection", value: "close") }
        let responseStatus = HTTPResponseStatus(statusCode: status.code, reasonPhrase: status.reasonPhrase)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: responseStatus, headers: headers))), promise: nil)
        if let body, head.method != .HEAD { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if close { written.whenComplete { _ in context.close(promise: nil) } }
        plane.recordDecision(
            endpoint: Self.endpoint, requestID: requestID, method: AccessQuestion.metricLabel(head.method.rawValue), status: status.code,
            nanoseconds: (ContinuousClock.now - started).nanoseconds, protocol: "HTTP/1.1", userID: decision?.userID, userName: decision?.userName)
    }
}
