import DataPlane
import EdgeHTTP
import HTTPTypes
import Hummingbird
import JOSE
import Observability
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import TrafficCop

/// `/api/auth/verify`: forward-auth for a proxy in front (nginx `auth_request`, Caddy
/// `forward_auth`, Traefik `forwardAuth`): the decision a proxied request would get, for a
/// request described by the proxy's headers, without forwarding anything.
struct ForwardAuthRoutes: Sendable {
    /// The routes in force (a reload may change them), read once per decision.
    let table: LiveRouteTable
    let authentication: CallerAuthentication
    let admission: Admission
    let runtime: RuntimeClient
    let sessionOwners: SessionOwnershipView
    let metrics: GatewayMetrics

    static let path = "/api/auth/verify"

    func register(on router: Router<GatewayRequestContext>) {
        // Any method: nginx's auth_request sends the original method's subrequest as GET; Caddy and Traefik keep it.
        for method in [HTTPRequest.Method.get, .head, .post, .put, .patch, .delete, .options] {
            router.on(RouterPath(Self.path), method: method) { request, _ in try await verify(request) }
        }
    }

    /// The original request: `X-Original-URI` and `X-Original-Method` (nginx), else `X-Forwarded-Uri`
    /// and `X-Forwarded-Method` (Caddy, Traefik); GET when no method is named.
    static func original(_ headers: HTTPFields) throws -> (path: Substring, method: HTTPRequest.Method) {
        guard let uri = headers[Header.originalURI] ?? headers[Header.forwardedURI], !uri.isEmpty else {
            throw GatewayError.invalidRequest("name the original request in X-Original-URI (nginx) or X-Forwarded-Uri (Caddy, Traefik)")
        }
        let methodName = headers[Header.originalMethod] ?? headers[Header.forwardedMethod] ?? "GET"
        guard let method = ProxyRoute.methods.first(where: { $0.rawValue == methodName.uppercased() }) else {
            throw GatewayError(.methodNotAllowed, "method_not_allowed", "the original method \(JSONValue.clip(methodName)) is not one a route forwards")
        }
        let (rawPath, query) = RequestTarget.split(uri[...])
        let path: Substring
        do {
            path = try RequestTarget.normalizedPath(rawPath)
            try RequestTarget.checkQuery(query)
        } catch {
            throw GatewayError.invalidRequest(error.message)
        }
        // A token in the URI is never read (it would sit in every log on the way); saying so beats ignoring it.
        if let query, RequestTarget.queryWithoutCredentials(query) != query {
            throw GatewayError(.badRequest, "token_in_url", "the original URI carries access_token; send the token in Authorization instead")
        }
        return (path, method)
    }

    /// 200 with the identity for the proxy to pass on, or the refusal the route itself would answer.
    func verify(_ request: Request) async throws -> Response {
        let (path, method) = try Self.original(request.headers)
        // The data plane's own match, on the same table.
        guard let (route, _) = table.current.route(for: path) else {
            throw GatewayError(.notFound, "not_found", "no gateway.routes prefix serves \(PathRedaction.redactedPath(String(path)))")
        }
        guard route.allowedMethodNames.contains(method.rawValue) else {
            throw GatewayError.methodNotAllowed(method.rawValue, path: PathRedaction.redactedPath(String(path)), allowed: route.allowedMethodNames)
        }
        let token = try AccessTokenAuthenticator.bearerToken(fromAuthorization: request.headers[.authorization])
        if token == nil, !route.requiresToken {
            let assertion = try assertion(for: route, caller: RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil))
            return Response(status: .ok, headers: [.cacheControl: "no-store", Self.assertionHeader: assertion])
        }
        let caller = try await authentication.requireCaller(request)
        let sessionHeader = request.headers[Header.sessionID]
        if let policy = route.policy,
            let refusal = policy.refusal(claims: caller.claims, tenantID: caller.tenantID, issuer: caller.external?.issuer, hasSession: sessionHeader != nil)
        {
            metrics.policyRefused()
            throw GatewayError(refusedBy: refusal)
        }
        var sessionID: String? = nil
        if let sessionHeader {
            let checked = try GatewayError.checkedSessionID(sessionHeader)
            var owned = sessionOwners.isOwned(checked, by: caller.userID, tenantID: caller.tenantID)
            if owned == nil {
                let principal = Principal(userID: caller.userID, tenantID: caller.tenantID)
                owned = try await sessionOwners.askRuntime(checked, by: principal, runtime: runtime, admission: admission)
            }
            guard owned == true else { throw GatewayError(.forbidden, "session_forbidden", "the session belongs to another user or tenant") }
            sessionID = checked
        }
        let assertion = try assertion(for: route, caller: RuntimeCaller(caller, sessionID: sessionID))
        var headers: HTTPFields = [.cacheControl: "no-store", Self.assertionHeader: assertion]
        // oauth2-proxy's names, so that existing proxy configurations carry over.
        headers[Header.user] = caller.userID
        headers[Header.tenant] = caller.tenantID
        if let email = caller.claims["email"]?.stringValue, Self.isHeaderSafe(email) { headers[Header.email] = email }
        if case .array(let groups)? = caller.claims["groups"] {
            let names = groups.compactMap(\.stringValue).filter { Self.isHeaderSafe($0) && !$0.contains(",") }
            if !names.isEmpty { headers[Header.groups] = names.joined(separator: ",") }
        }
        return Response(status: .ok, headers: headers)
    }

    static let assertionHeader = HTTPField.Name(AssertionHeader.name)!

    /// The header names read and written here (valid field names: the unwraps cannot fail).
    enum Header {
        static let originalURI = HTTPField.Name("X-Original-URI")!
        static let originalMethod = HTTPField.Name("X-Original-Method")!
        static let forwardedURI = HTTPField.Name("X-Forwarded-Uri")!
        static let forwardedMethod = HTTPField.Name("X-Forwarded-Method")!
        static let sessionID = HTTPField.Name("X-Session-Id")!
        static let user = HTTPField.Name("X-Auth-Request-User")!
        static let tenant = HTTPField.Name("X-Auth-Request-Tenant")!
        static let email = HTTPField.Name("X-Auth-Request-Email")!
        static let groups = HTTPField.Name("X-Auth-Request-Groups")!
    }

    private func assertion(for route: DataPlane.Route, caller: RuntimeCaller) throws -> String {
        do {
            return try runtime.assertions.assertion(audience: route.audience, caller: caller)
        } catch {
            throw GatewayError.noSigningKey
        }
    }

    /// Visible ASCII and spaces only: a claim copied into a header must not bend it.
    static func isHeaderSafe(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 512 && text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }
}
