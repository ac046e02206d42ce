import EdgeHTTP
import HTTPTypes
import JOSE
import NIOCore
import NIOHTTP1
import Observability
import Resilience
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import TrafficCop

/// One `/api/auth/verify` request answered on the connection's event loop: the original request
/// read from the proxy's header family (`ForwardAuthOriginal`), decided by `AccessDecision` (the
/// decision ext_authz answers too), and the verdict spelled for the proxy: 200 with the
/// identity fields, the refusal the route would answer, and a navigation without a session sent
/// to sign in (nginx: 401 with `X-Portcullis-Sign-In`; Caddy and Traefik: 302).
final class ForwardAuthExchange {
    /// The path forward-auth answers (exactly; any other spelling is Hummingbird's to answer).
    static let path = "/api/auth/verify"

    private let handler: ProxyFrontHandler
    private let plane: DataPlane
    private let proxies: ForwardAuthProxies
    private let head: HTTPRequestHead
    private let origin: String?
    private let eventLoop: any EventLoop
    private let requestID: String
    private let started = ContinuousClock.now
    private var finished = false
    private var decision: AccessDecision?
    /// `gateway.allowed_origins` of the table the decision was made on (CORS on its answer).
    private var allowedOrigins: Set<String> = []
    private var family = ForwardAuthHeaderFamily.nginx

    init(handler: ProxyFrontHandler, plane: DataPlane, proxies: ForwardAuthProxies, head: HTTPRequestHead, eventLoop: any EventLoop) {
        self.handler = handler
        self.plane = plane
        self.proxies = proxies
        self.head = head
        self.origin = RequestFields(head.headers).origin
        self.eventLoop = eventLoop
        self.requestID = handler.nextRequestID()
    }

    /// Decides, answering now or once the store has.
    func start(table: RouteTable) {
        allowedOrigins = table.allowedOrigins
        // The original-request fields are believed from the proxies in front only: anybody else
        // could name any request and learn, or obtain an assertion for, what it would get.
        guard let peer = handler.peerAddress, plane.admission.clientAddresses.isTrustedProxy(peer) else {
            return fail(
                GatewayError(
                    .forbidden, "forward_auth_untrusted_peer",
                    "forward-auth answers only the proxies listed in gateway.trusted_proxies; add the proxy's address there"))
        }
        let family = proxies.family(for: peer)
        self.family = family
        let headers = head.headers
        let values: (HTTPField.Name) -> [String] = { headers[$0.canonicalName] }
        let question: AccessQuestion
        do throws(GatewayError) {
            let original = try ForwardAuthOriginal(family: family, values: values)
            // With routes bound to hosts, a decision without the host could be another host's route's.
            let host = table.hasHostRoutes ? try ForwardAuthOriginal.host(family: family, values: values) : (try? ForwardAuthOriginal.host(family: family, values: values))
            // A store read per cookie never met here is bounded per client (behind the proxy, by X-Forwarded-For, as on the route).
            let client = plane.admission.clientAddresses.clientAddress(peer: peer, forwardedFor: headers["x-forwarded-for"])
            question = AccessQuestion(
                method: original.method, path: original.path, query: original.query, host: host, headers: headers, clientAddress: client, asker: .forwardAuth)
        } catch {
            return fail(error)
        }
        let decision = AccessDecision(plane: plane, question: question, eventLoop: eventLoop, requestID: requestID)
        self.decision = decision
        decision.decide(table: table) { [self] verdict in answer(verdict) }
    }

    /// The client went away: nothing more is written, whatever the store answers.
    func clientGone() {
        finished = true
        decision?.cancel()
    }

    /// The verdict in the proxy's terms.
    private func answer(_ verdict: AccessVerdict) {
        switch verdict {
        case .allowed(let grant):
            answer(.ok, fields: grant.fields)
        case .denied(let refusal, let signIn?):
            // Caddy and Traefik relay a 302; nginx's `error_page 401` reads `X-Portcullis-Sign-In`.
            if family == .forwarded { return answer(.found, fields: [("Location", signIn), ("Cache-Control", "no-store")]) }
            fail(refusal, extra: [("X-Portcullis-Sign-In", signIn)])
        case .denied(let refusal, nil):
            fail(refusal)
        }
    }

    /// The refusal as the data plane answers one (`GatewayError.responseHead`), with `extra` fields.
    private func fail(_ error: GatewayError, extra: [(String, String)] = []) {
        guard !finished else { return }
        let body = ByteBuffer(bytes: JSONWriter.bytes(error.json))
        let close = ProxyExchange.wantsClose(head)
        let responseHead = error.responseHead(contentLength: body.readableBytes, close: close) { headers in
            for (name, value) in extra { headers.add(name: name, value: value) }
            decorate(&headers)
        }
        write(responseHead, body: body, close: close)
    }

    /// A bodiless answer of the gateway's own.
    private func answer(_ status: HTTPResponseStatus, fields: [(name: String, value: String)]) {
        let close = ProxyExchange.wantsClose(head)
        var headers = HTTPHeaders()
        headers.reserveCapacity(fields.count + 4)
        for field in fields { headers.add(name: field.name, value: field.value) }
        headers.add(name: "Content-Length", value: "0")
        if close { headers.add(name: "Connection", value: "close") }
        decorate(&headers)
        write(HTTPResponseHead(version: .http1_1, status: status, headers: headers), body: nil, close: close)
    }

    /// The request id, and the CORS answer for an origin gateway.allowed_origins lists (as the API's routes answer it).
    private func decorate(_ headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: "X-Request-Id", value: requestID)
        if let origin, allowedOrigins.contains(origin) {
            headers.replaceOrAdd(name: "Access-Control-Allow-Origin", value: origin)
            headers.replaceOrAdd(name: "Vary", value: "Origin")
        }
    }

    /// Writes the answer (a HEAD's without its body), records it, and frees the connection for the next request.
    private func write(_ responseHead: HTTPResponseHead, body: ByteBuffer?, close: Bool) {
        finished = true
        let status = responseHead.status
        handler.writeToClient(.head(responseHead), flush: false)
        if let body, head.method != .HEAD { handler.writeBytesToClient(body) }
        handler.flushClient()
        plane.recordDecision(
            endpoint: Self.path, requestID: requestID, method: head.method.rawValue, status: Int(status.code), nanoseconds: (ContinuousClock.now - started).nanoseconds,
            protocol: "HTTP/1.1", userID: decision?.userID, userName: decision?.userName)
        handler.decisionFinished(closeConnection: close)
    }
}
