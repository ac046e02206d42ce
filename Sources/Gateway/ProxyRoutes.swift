import AsyncHTTPClient
import Hummingbird
import HTTPTypes
import JOSE
import NIOCore
import NIOHTTP1
import RuntimeAPI
import TrafficCop

/// The HTTP proxy for `gateway.routes`, on Hummingbird and AsyncHTTPClient: the
/// general path. Plain-HTTP upstreams are served by the data plane
/// (`ProxyChannelHandler`) before a request reaches the router; this path
/// answers what the data plane passes on (`https://` upstreams, `OPTIONS`, and
/// path spellings the router matches but the data plane's prefix does not),
/// with the same rules.
///
/// These upstreams are other services, not the Runtime: the Runtime's own API
/// is never forwarded as a whole (its public operations are `IntentRoutes`,
/// `SessionRoutes` and the agent socket, each admitted by the Traffic Cop).
/// A Bearer token is required. The client's request is streamed upstream
/// without hop-by-hop headers, without `Authorization`, and without any
/// client copy of a header the gateway sets (in any case, with `_` or `.`
/// for `-`, and `Forwarded`); then the gateway adds `X-Portcullis-Assertion`
/// (user, tenant, and the session when the client named one it owns in
/// `X-Session-Id`), `X-Forwarded-For`, `-Proto` and `-Host`.
/// The answer streams back. Upstream failures are JSON 502/503/504.
struct ProxyRoutes: Sendable {
    let authentication: CallerAuthentication
    let admission: Admission
    /// For the ownership of a session named in `X-Session-Id`, and the assertions.
    let runtime: RuntimeClient
    let http: HTTPClient
    let metrics: GatewayMetrics
    let routes: [ProxyRoute]
    let maximumBodyBytes: Int
    let upstreamTimeout: Double
    let forwardedProto: String

    /// One upstream: the public prefix, where it goes, and the `aud` of its assertions.
    struct Upstream: Sendable {
        let prefix: String
        let baseURL: String
        let audience: String
        let name: String
    }

    func register(on router: Router<GatewayRequestContext>) {
        let upstreams = routes.map {
            Upstream(prefix: $0.pathPrefix, baseURL: $0.audience, audience: $0.audience, name: $0.prefix)
        }
        for upstream in upstreams {
            for method in ProxyRoute.methods {
                for path in [upstream.prefix, upstream.prefix + "/**"] {
                    router.on(RouterPath(path), method: method) { request, context in
                        try await proxy(request, context, to: upstream)
                    }
                }
            }
        }
    }

    func proxy(_ request: Request, _ context: GatewayRequestContext, to upstream: Upstream) async throws -> Response {
        let caller = try await authentication.requireCaller(request)
        let principal = Principal(userID: caller.userID, tenantID: caller.tenantID)
        // A session named by the client is vouched for only if the caller owns it.
        var sessionID: String?
        if let named = request.headers[HTTPField.Name("X-Session-Id")!] {
            let checked = try GatewayError.checkedSessionID(named)
            let session = try await runtime.session(admission.admit(SessionIntent(.read, principal: principal, sessionID: checked)))
            guard session.isOwned(by: caller.userID, tenantID: caller.tenantID) else {
                throw GatewayError(.forbidden, "session_anonymous", "the named session is anonymous; log in with it before using it here")
            }
            sessionID = checked
        }
        // The path is normalised already (RequestTargetHandler). The upstream URL is built from the
        // part below the prefix only; a path the router matched some other way is no route here.
        guard let rest = ProxyRoute.remainder(of: request.uri.path[...], under: upstream.prefix) else {
            throw GatewayError(.notFound, "not_found", "no route answers \(request.method.rawValue) \(RequestObservationMiddleware.redactedPath(request.uri.path))")
        }
        var url = upstream.baseURL + rest
        if let query = RequestTarget.queryWithoutCredentials(request.uri.query?[...]) { url += "?" + query }

        var outbound = HTTPClientRequest(url: url)
        outbound.method = HTTPMethod(rawValue: request.method.rawValue)
        let connectionListed = HeaderScreen.connectionListed(request.headers)
        for field in request.headers where HeaderScreen.isForwardable(field.name, connectionListed: connectionListed) {
            outbound.headers.add(name: field.name.rawName, value: field.value)
        }
        let assertion: String
        do {
            assertion = try runtime.assertions.assertion(
                audience: upstream.audience, caller: RuntimeCaller(caller, sessionID: sessionID))
        } catch {
            throw GatewayError.noSigningKey
        }
        outbound.headers.add(name: AssertionHeader.name, value: assertion)
        outbound.headers.add(name: "X-Forwarded-For", value: admission.clientAddress(request, context))
        outbound.headers.add(name: "X-Forwarded-Proto", value: forwardedProto)
        if let host = request.head.authority { outbound.headers.add(name: "X-Forwarded-Host", value: host) }

        let limit = maximumBodyBytes
        if let length = request.headers[.contentLength].flatMap(Int.init) {
            guard length <= limit else { throw Self.tooLarge(limit) }
            if length > 0 { outbound.body = .stream(LimitedBody(base: request.body, limit: limit), length: .known(Int64(length))) }
        } else if request.headers[.transferEncoding] != nil {
            outbound.body = .stream(LimitedBody(base: request.body, limit: limit), length: .unknown)
        }

        let started = ContinuousClock.now
        let response: HTTPClientResponse
        do {
            response = try await http.execute(outbound, timeout: .milliseconds(Int64(upstreamTimeout * 1000)))
        } catch is LimitedBody.TooLarge {
            throw Self.tooLarge(limit)
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            metrics.proxied(upstream: upstream.name, status: 504, since: started)
            throw GatewayError(.gatewayTimeout, "upstream_timeout", "the upstream did not answer within \(Int(upstreamTimeout)) s; try again")
        } catch {
            metrics.proxied(upstream: upstream.name, status: 503, since: started)
            throw GatewayError(.serviceUnavailable, "upstream_unavailable", "the upstream cannot be reached; try again shortly")
        }
        metrics.proxied(upstream: upstream.name, status: Int(response.status.code), since: started)
        var headers = HTTPFields()
        let upstreamConnection = HeaderScreen.connectionListed(response.headers)
        for (name, value) in response.headers where HeaderScreen.isReturnable(name, connectionListed: upstreamConnection) {
            if let fieldName = HTTPField.Name(name) { headers.append(HTTPField(name: fieldName, value: value)) }
        }
        if let length = response.headers.first(name: "content-length") { headers[.contentLength] = length }
        return Response(
            status: HTTPResponse.Status(code: Int(response.status.code), reasonPhrase: response.status.reasonPhrase), headers: headers,
            body: ResponseBody(asyncSequence: response.body))
    }

    static func tooLarge(_ limit: Int) -> GatewayError {
        GatewayError(.contentTooLarge, "payload_too_large", "the request body is limited to \(limit) bytes")
    }
}

/// A request body that fails once more than `limit` bytes have passed.
struct LimitedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    struct TooLarge: Error {}

    let base: RequestBody
    let limit: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: RequestBody.AsyncIterator
        let limit: Int
        var seen = 0

        mutating func next() async throws -> ByteBuffer? {
            guard let buffer = try await base.next() else { return nil }
            seen += buffer.readableBytes
            if seen > limit { throw TooLarge() }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), limit: limit) }
}
