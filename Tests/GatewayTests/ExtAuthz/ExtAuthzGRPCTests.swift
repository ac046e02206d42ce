import DataPlane
import EnvoyAuthProtos
import ExtAuthz
import Foundation
import Gateway
import GRPCCore
import GRPCNIOTransportHTTP2
import GRPCProtobuf
import JOSE
import NIOHTTP1
import PortcullisTestSupport
import ProviderLogin
import SwiftProtobuf
import Testing
import TrafficCop

/// Envoy's gRPC ext_authz (issue 67): `envoy.service.auth.v3.Authorization/Check`, asked with the
/// `CheckRequest` Envoy builds from the original request, answered with the decision forward-auth
/// gives it: `OkHttpResponse` with the fields for the upstream, or `DeniedHttpResponse` with the
/// refusal the client gets.
@Suite("ext_authz over gRPC: Envoy's Check decided as forward-auth decides")
struct ExtAuthzGRPCTests {
    /// ExtAuthzHTTPTests' gateway with the gRPC listener on instead.
    static func gateway(_ provider: FakeProvider, callers: [String] = ["127.0.0.1"], routes extra: [ProxyRoute] = []) async throws -> GatewayFixture {
        try await ExtAuthzHTTPTests.gateway(provider, callers: callers, routes: extra) { $0.grpcPort = 0 }
    }

    /// The `CheckRequest` Envoy builds for `method` `path` with the client's `headers` (names
    /// lower-cased, as Envoy sends them), from `client`.
    static func request(_ method: String, _ path: String, host: String = "app.example.test", headers: [(String, String)] = [], client: String = "203.0.113.7")
        -> Envoy_Service_Auth_V3_CheckRequest
    {
        var request = Envoy_Service_Auth_V3_CheckRequest()
        request.attributes.source.address.socketAddress.address = client
        request.attributes.source.address.socketAddress.portValue = 51234
        var http = Envoy_Service_Auth_V3_AttributeContext.HttpRequest()
        http.id = "1"
        http.method = method
        http.path = path
        http.host = host
        http.scheme = "https"
        http.protocol = "HTTP/1.1"
        http.headers = [":method": method, ":path": path, ":authority": host, ":scheme": "https"]
        for (name, value) in headers { http.headers[name.lowercased()] = value }
        request.attributes.request.http = http
        return request
    }

    /// Asks `port` once.
    static func check(port: Int, _ request: Envoy_Service_Auth_V3_CheckRequest) async throws -> Envoy_Service_Auth_V3_CheckResponse {
        try await withGRPCClient(transport: try .http2NIOPosix(target: .ipv4(address: "127.0.0.1", port: port), transportSecurity: .plaintext)) { client in
            try await client.unary(
                request: ClientRequest(message: request), descriptor: MethodDescriptor(fullyQualifiedService: "envoy.service.auth.v3.Authorization", method: "Check"),
                serializer: ProtobufSerializer<Envoy_Service_Auth_V3_CheckRequest>(), deserializer: ProtobufDeserializer<Envoy_Service_Auth_V3_CheckResponse>(),
                options: .defaults
            ) { response in try response.message }
        }
    }

    /// The HTTP status a check answers (200 for allowed), its error code, and its fields by lower-cased name.
    static func read(_ response: Envoy_Service_Auth_V3_CheckResponse) -> (status: Int, error: String?, fields: [String: String], removed: [String]) {
        switch response.httpResponse {
        case .okResponse(let ok)?:
            var fields: [String: String] = [:]
            for option in ok.headers { fields[option.header.key] = option.header.value }
            return (response.status.code == 0 ? 200 : -1, nil, fields, ok.headersToRemove)
        case .deniedResponse(let denied)?:
            var fields: [String: String] = [:]
            for option in denied.headers { fields[option.header.key] = option.header.value }
            let error = (try? StrictJSONReader().parseObject(Array(denied.body.utf8)))?["error"]?.stringValue
            return (Int(denied.status.code.rawValue), error, fields, [])
        default:
            return (-1, nil, [:], [])
        }
    }

    @Test("every forward-auth decision has a gRPC twin that agrees with it (status, error, identity, challenge, Allow); allowed is status OK with OkHttpResponse, denied a non-OK status (16 for 401, 7 for 403) with DeniedHttpResponse; dynamic_metadata names the user and the route")
    func twinsOfForwardAuth() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let fixture = try await Self.gateway(provider)
        let port = try #require(fixture.extAuthzGRPCPort)
        let allowed = try provider.token(claims: ["scope": "billing:read", "email": "ann@example.com", "email_verified": true, "groups": ["finance", "ops"]])
        let narrow = try provider.token(claims: ["scope": "openid"])
        fixture.remember(allowed)
        fixture.remember(narrow)
        let cases: [(name: String, method: String, uri: String, token: String?)] = [
            ("allowed", "POST", "/api/billing/invoices?page=2", allowed),
            ("wrong scope", "GET", "/api/billing/x", narrow),
            ("no token", "GET", "/api/billing/x", nil),
            ("climbs above /", "GET", "/api/billing/../../../etc/passwd", allowed),
            ("token in the URI", "GET", "/api/billing/x?access_token=abc", nil),
            ("unknown path", "GET", "/api/other", allowed),
            (".. into another prefix", "GET", "/public/../api/billing/x", nil),
            ("method off the route", "DELETE", "/api/billing/x", allowed),
            ("auth: none", "GET", "/public/status", nil),
            ("a token without email or groups", "GET", "/api/plain/x", try provider.token(claims: [:])),
        ]
        for (name, method, uri, token) in cases {
            let forwarded = try await fixture.send(.GET, "/api/auth/verify", bearer: token, headers: [("X-Original-URI", uri), ("X-Original-Method", method)])
            let response = try await Self.check(port: port, Self.request(method, uri, headers: token.map { [("authorization", "Bearer " + $0)] } ?? []))
            let checked = Self.read(response)
            #expect(checked.status == forwarded.status, "\(name): gRPC \(checked.status), forward-auth \(forwarded.status) \(forwarded.raw)")
            #expect(checked.error == forwarded.error, "\(name): \(checked.error ?? "-") and \(forwarded.raw)")
            for field in ["x-auth-request-user", "x-auth-request-tenant", "x-auth-request-email", "x-auth-request-groups"] {
                // An empty field is removed upstream rather than set empty: absent here, empty in forward-auth's answer.
                #expect((checked.fields[field] ?? "") == (forwarded.headers[field].first ?? ""), "\(name): \(field)")
            }
            #expect(checked.fields["www-authenticate"] == forwarded.headers["WWW-Authenticate"].first, "\(name)")
            #expect(checked.fields["allow"] == forwarded.headers["Allow"].first, "\(name)")
            let expectedCode: Int32 = forwarded.status == 200 ? 0 : forwarded.status == 401 ? 16 : forwarded.status == 403 ? 7 : response.status.code
            #expect(response.status.code == expectedCode && (forwarded.status == 200) == (response.status.code == 0), "\(name): \(response.status.code)")
            checked.fields["x-portcullis-assertion"].map(fixture.remember)
            forwarded.headers["X-Portcullis-Assertion"].first.map(fixture.remember)
        }
        let ok = try await Self.check(port: port, Self.request("GET", "/api/billing/x", headers: [("authorization", "Bearer " + allowed), ("x_auth_request_user", "admin")]))
        let read = Self.read(ok)
        let assertion = try #require(read.fields["x-portcullis-assertion"])
        fixture.remember(assertion)
        let claims = try StrictJSONReader().parseObject(try JWSCompact.parse(assertion).payload)
        #expect(claims["aud"] == .string(ForwardAuthTests.upstream))
        #expect(read.removed.contains("x_auth_request_user") && read.removed.contains("authorization"), "\(read.removed)")
        let user = ok.dynamicMetadata.fields["user_id"]?.stringValue
        #expect(user != nil && user == read.fields["x-auth-request-user"] && ok.dynamicMetadata.fields["route"]?.stringValue == "/api/billing/**", "\(ok.dynamicMetadata)")
        #expect(ok.okResponse.headers.allSatisfy { $0.appendAction == .overwriteIfExistsOrAdd && !$0.header.value.isEmpty }, "every field set replaces the client's copy, and has a value")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("only ext_authz.callers may ask: Check from another address is denied (status 7, 403 ext_authz_caller_refused: a denial, never an RPC error, which an Envoy failing open would let through); the health service answers SERVING for the server and for envoy.service.auth.v3.Authorization, NOT_FOUND for any other service; a gRPC request refused is a 401 for Envoy to answer in gRPC's terms")
    func callersHealthAndGRPCRequests() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let strangers = try await Self.gateway(provider, callers: ["10.9.9.9"])
        let strangerPort = try #require(strangers.extAuthzGRPCPort)
        let stranger = try await Self.check(port: strangerPort, Self.request("GET", "/api/plain/x"))
        let refused = Self.read(stranger)
        #expect(stranger.status.code == 7 && refused.status == 403 && refused.error == "ext_authz_caller_refused", "\(refused)")
        try await strangers.stop()

        let fixture = try await Self.gateway(provider)
        let port = try #require(fixture.extAuthzGRPCPort)
        func health(_ service: String) async throws -> Grpc_Health_V1_HealthCheckResponse {
            var request = Grpc_Health_V1_HealthCheckRequest()
            request.service = service
            return try await withGRPCClient(transport: try .http2NIOPosix(target: .ipv4(address: "127.0.0.1", port: port), transportSecurity: .plaintext)) { client in
                try await client.unary(
                    request: ClientRequest(message: request), descriptor: MethodDescriptor(fullyQualifiedService: "grpc.health.v1.Health", method: "Check"),
                    serializer: ProtobufSerializer<Grpc_Health_V1_HealthCheckRequest>(), deserializer: ProtobufDeserializer<Grpc_Health_V1_HealthCheckResponse>(),
                    options: .defaults
                ) { response in try response.message }
            }
        }
        #expect(try await health("").status == .serving)
        #expect(try await health("envoy.service.auth.v3.Authorization").status == .serving)
        do {
            _ = try await health("some.other.Service")
            Issue.record("an unknown service is NOT_FOUND")
        } catch let error as RPCError {
            #expect(error.code == .notFound, "\(error)")
        }
        let grpcCall = Self.read(try await Self.check(port: port, Self.request("POST", "/api/plain/pkg.Service/Method", headers: [("content-type", "application/grpc")])))
        #expect(grpcCall.status == 401 && grpcCall.error == "token_missing" && grpcCall.fields["grpc-status"] == nil, "\(grpcCall)")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("a browser's cookie and an MCP route are decided as over HTTP: a navigation without a session is 302 to sign in, an MCP route's 401 names resource_metadata; a revoked token is refused by the next Check")
    func browserMCPAndRevocation() async throws {
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [
                BrowserSessionTests.browserRoute("/app", "http://127.0.0.1:9"), ProxyRoute(prefix: "/api/plain", upstream: "http://plain.internal:8080"),
                try! MCPRouteTests.mcpRoute("/mcp/a", upstream: 9),
            ]
            var extAuthz = ExtAuthzConfiguration()
            extAuthz.grpcPort = 0
            configuration.extAuthz = extAuthz
        }
        let port = try #require(fixture.extAuthzGRPCPort)
        let navigation = Self.read(
            try await Self.check(port: port, Self.request("GET", "/app/page?x=1", host: "127.0.0.1:8080", headers: BrowserSessionTests.navigation.map { ($0.0.lowercased(), $0.1) })))
        let expected = "http://127.0.0.1:8080/.portcullis/sign_in?rd=" + FormEncoding.encode("http://127.0.0.1:8080/app/page?x=1")
        #expect(navigation.status == 302 && navigation.fields["location"] == expected, "\(navigation)")
        let mcp = Self.read(try await Self.check(port: port, Self.request("POST", "/mcp/a")))
        #expect(mcp.status == 401 && mcp.fields["www-authenticate"]?.contains("resource_metadata=") == true, "\(mcp)")
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let own = [("authorization", "Bearer " + login.accessToken)]
        #expect(Self.read(try await Self.check(port: port, Self.request("GET", "/api/plain/x", headers: own))).status == 200)
        #expect(try await fixture.post("/api/auth/logout", bearer: login.accessToken, ["session_id": .string(login.sessionID)]).status == 204)
        let after = Self.read(try await Self.check(port: port, Self.request("GET", "/api/plain/x", headers: own)))
        #expect(after.status == 401 && after.error == "token_revoked", "\(after)")
        try await fixture.stop()
    }
}
