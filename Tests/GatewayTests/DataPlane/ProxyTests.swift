import DataPlane
import EdgeHTTP
import Foundation
import Gateway
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import JOSE
import Logging
import NIOHTTP1
import NIOSSL
import ServiceLifecycle
import Synchronization
import Testing

/// A real upstream on loopback that answers every request with what it received:
/// method, path, query, headers (name and value, in order) and the body's length.
/// A query `delay_ms=N` makes it wait N milliseconds before answering (a slow upstream).
enum RecordingUpstream {
    /// The request targets an upstream received, in order (method and target, byte for byte).
    final class Targets: Sendable {
        private let list = Mutex<[String]>([])
        func append(_ line: String) { list.withLock { $0.append(line) } }
        var all: [String] { list.withLock { $0 } }
    }

    /// - Parameter tls: serve HTTPS with this configuration instead of plain HTTP.
    static func start(recording targets: Targets? = nil, tls: TLSConfiguration? = nil) async throws -> BackgroundServer {
        let router = Router()
        let handler: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            targets?.append("\(request.method.rawValue) \(request.uri.description)")
            let body = try await request.body.collect(upTo: 1 << 20)
            if let delay = request.uri.queryParameters.get("delay_ms", as: Int.self) { try await Task.sleep(for: .milliseconds(delay)) }
            let headers: [JSONValue] = request.headers.map { .array([.string($0.name.rawName), .string($0.value)]) }
            let record: JSONValue = [
                "method": .string(request.method.rawValue), "path": .string(request.uri.path), "query": .string(request.uri.query ?? ""),
                "target": .string(request.uri.description), "authority": .string(request.head.authority ?? ""),
                "headers": .array(headers), "body_bytes": .number(Double(body.readableBytes)),
            ]
            return Response(status: .ok, headers: [.contentType: "application/json", .init("X-Upstream")!: "recording"], body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(record))))
        }
        for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete, .options, HTTPRequest.Method("PROPFIND")!, HTTPRequest.Method("MKCOL")!] {
            router.on("/**", method: method, use: handler)
            router.on("/", method: method, use: handler)
        }
        let server: HTTPServerBuilder = try tls.map { try .tls(.http1(), tlsConfiguration: $0) } ?? .http1()
        return try await BackgroundServer.start { onPort in
            Application(
                router: router, server: server, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.upstream"))
        }
    }
}

extension Answer {
    /// The headers the recording upstream received, by lower-cased name.
    var receivedHeaders: [String: [String]] {
        var result: [String: [String]] = [:]
        guard case .array(let pairs)? = json["headers"] else { return result }
        for case .array(let pair) in pairs {
            if let name = pair.first?.stringValue, let value = pair.last?.stringValue { result[name.lowercased(), default: []].append(value) }
        }
        return result
    }
}

@Suite("The HTTP proxy for configured routes, and the admitted Runtime operations")
struct ProxyTests {
    @Test("identity headers from the client never reach the upstream, in any spelling; the gateway's assertion does, and verifies with its JWKS")
    func headerSpoofing() async throws {
        let upstream = try await RecordingUpstream.start()
        let upstreamURL = "http://127.0.0.1:\(upstream.port)"
        let fixture = try await GatewayFixture { $0.routes = [ProxyRoute(prefix: "/api/echo", upstream: upstreamURL)] }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let forged = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9."
        let spoofed: [(String, String)] = [
            ("X-Portcullis-Assertion", forged), ("x-portcullis-assertion", forged), ("X_Portcullis_Assertion", forged),
            ("X.Portcullis.Assertion", forged), ("X-Portcullis-User", "admin"), ("X-User-Id", "admin"), ("X_User_Id", "admin"),
            ("X-Tenant-Id", "other"), ("X-Forwarded-For", "203.0.113.9"), ("X_Forwarded_For", "203.0.113.9"),
            ("Forwarded", "for=203.0.113.9"), ("X-Real-IP", "203.0.113.9"), ("X-Remote-User", "admin"), ("Remote-User", "admin"),
            ("X-Forwarded-User", "admin"), ("X-Auth-Request-User", "admin"), ("X-Session-Id", login.sessionID),
            // Every field forward-auth answers, and its family, in the spellings WSGI and PHP fold together.
            ("X-Auth-Request-Tenant", "other"), ("X-Auth-Request-Groups", "admins"), ("X-Auth-Request-Email", "admin@evil.example"),
            ("X_Auth_Request_User", "admin"), ("x.auth.request.preferred-username", "admin"), ("X-Forwarded-Preferred-Username", "admin"),
            ("X-Custom", "kept"), ("Connection", "X-Drop-Me"), ("X-Drop-Me", "hop-by-hop"),
        ]
        let answer = try await fixture.send(.POST, "/api/echo/things/42?x=1&access_token=\(login.accessToken)", bearer: login.accessToken, headers: spoofed, body: #"{"a":1}"#)
        #expect(answer.status == 200, "\(answer.raw)")
        #expect(answer.headers.first(name: "X-Upstream") == "recording")
        #expect(answer["path"] == "/things/42")
        #expect(answer["query"] == "x=1", "access_token never travels upstream")
        #expect(answer.json["body_bytes"]?.numberValue == 7)
        let received = answer.receivedHeaders
        #expect(received["x-portcullis-assertion"]?.count == 1)
        for name in received.keys {
            let folded = String(name.map { $0 == "_" || $0 == "." ? "-" : $0 })
            #expect(folded != "x-portcullis-assertion" || name == "x-portcullis-assertion", "a client copy of the assertion arrived as \(name)")
            #expect(!["x-user-id", "x-tenant-id", "forwarded", "x-real-ip", "x-remote-user", "remote-user", "x-forwarded-user",
                "x-auth-request-user", "x-portcullis-user", "x-session-id", "authorization", "x-drop-me", "x-forwarded-preferred-username",
            ].contains(folded) && !folded.hasPrefix("x-auth-request-"), "\(name) reached the upstream")
        }
        #expect(received["x-forwarded-for"] == ["127.0.0.1"])
        #expect(received["x-custom"] == ["kept"])

        let jwks = try await fixture.send(.GET, "/.well-known/jwks.json")
        let keys = try KeySet.fromJWKS(Array(jwks.raw.utf8))
        let policy = AccessTokenPolicy(
            issuer: "http://127.0.0.1:8080", audience: upstreamURL, leeway: 5, maximumLifetime: 60, acceptedTypes: ["assertion+jwt"],
            requiredClaims: ["iss", "aud", "exp", "iat", "jti", "sub", "tenant_id"], forbiddenClaims: [])
        let assertion = try #require(received["x-portcullis-assertion"]?.first)
        fixture.remember(assertion)
        let verified = try AccessTokenVerifier(keys: keys, policy: policy).verify(assertion)
        #expect(verified.claims["tenant_id"] == "default")
        #expect(verified.claims["session_id"] == .string(login.sessionID))
        #expect(verified.subject.hasPrefix("usr_"))
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("a Bearer token is required; a session named in X-Session-Id must be the caller's")
    func authorization() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await GatewayFixture { $0.routes = [ProxyRoute(prefix: "/api/echo", upstream: "http://127.0.0.1:\(upstream.port)")] }
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        let alice = try await fixture.login("alice")
        let bob = try await fixture.login("bob")
        let none = try await fixture.send(.GET, "/api/echo/x")
        #expect(none.status == 401)
        #expect(none.error == "token_missing")
        let sessionAsToken = try await fixture.send(.GET, "/api/echo/x", bearer: alice.sessionID)
        #expect(sessionAsToken.status == 401)
        let othersSession = try await fixture.send(.GET, "/api/echo/x", bearer: bob.accessToken, headers: [("X-Session-Id", alice.sessionID)])
        #expect(othersSession.status == 403)
        #expect(othersSession.error == "session_forbidden")
        let malformed = try await fixture.send(.GET, "/api/echo/x", bearer: bob.accessToken, headers: [("X-Session-Id", bob.accessToken)])
        #expect(malformed.status == 400)
        #expect(malformed.error == "session_malformed")
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("intents through /api/intent reach the Runtime; executions read back through /api/runtime")
    func runtimeProxy() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let body = #"{"session_id":"\#(login.sessionID)","intent_type":"echo","payload":{"n":7}}"#
        let executed = try await fixture.send(.POST, "/api/intent", bearer: login.accessToken, body: body)
        #expect(executed.status == 200, "\(executed.raw)")
        #expect(executed["status"] == "completed")
        #expect(executed.json["result"] == ["n": 7])
        let executionID = try #require(executed["execution_id"])
        let read = try await fixture.send(.GET, "/api/runtime/executions/\(executionID)", bearer: login.accessToken)
        #expect(read.status == 200)
        #expect(read["execution_id"] == .some(executionID))
        let unauthenticated = try await fixture.send(.POST, "/api/intent", body: body)
        #expect(unauthenticated.status == 401)
        try await fixture.stop()
    }

    @Test("bodies over the limit get 413; an upstream that is down is 503, a hung one 504, both JSON")
    func limitsAndFailures() async throws {
        let silent = try SilentListener()
        defer { silent.close() }
        let fixture = try await GatewayFixture {
            $0.maximumBodyBytes = 2048
            $0.runtimeTimeout = 1
            $0.routes = [ProxyRoute(prefix: "/api/down", upstream: "http://127.0.0.1:1"), ProxyRoute(prefix: "/api/hung", upstream: "http://127.0.0.1:\(silent.port)")]
        }
        // A token minted with the gateway's key: no Runtime call, so a 1 s timeout cannot hit the set-up.
        let token = try AccessTokenIssuer(keys: fixture.keys, issuer: "http://127.0.0.1:8080", audience: "portcullis")
            .issue(subject: "usr_test", tenantID: "default", clientID: "test").token
        fixture.remember(token)
        let login = (accessToken: token, sessionID: "")
        let large = try await fixture.send(.POST, "/api/intent", bearer: login.accessToken, body: String(repeating: "x", count: 4096))
        #expect(large.status == 413)
        #expect(large.error == "payload_too_large")
        let down = try await fixture.send(.GET, "/api/down/x", bearer: login.accessToken)
        #expect(down.status == 503)
        #expect(down.error == "upstream_unavailable")
        let hung = try await fixture.send(.GET, "/api/hung/x", bearer: login.accessToken)
        #expect(hung.status == 504)
        #expect(hung.error == "upstream_timeout")
        let metrics = try await fixture.send(.GET, "/metrics", port: fixture.adminPort)
        #expect(metrics.raw.contains(#"portcullis_proxy_requests_total{upstream="/api/down",status="503"} 1"#))
        try await fixture.stop()
    }
}
