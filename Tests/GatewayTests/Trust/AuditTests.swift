import DataPlane
import Foundation
import Gateway
import HTTPTypes
import Hummingbird
import JOSE
import Logging
import NIOHTTP1
import MCPResource
import PortcullisTestSupport
import Testing

/// Runs `portcullis audit` (the real binary) with the token on stdin.
func runAudit(_ arguments: [String], token: String) async throws -> (status: Int32, output: String) {
    try await runPortcullis(["audit"] + arguments + ["--token", "-"], input: token)
}

@Suite("portcullis audit")
struct AuditTests {
    @Test("against the gateway: every attack is refused, including validly signed expired, wrong-audience and typ-confused copies")
    func gatewayRefusesEverything() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let jwks = try await fixture.send(.GET, "/.well-known/jwks.json")
        let jwksPath = fixture.directory + "/jwks.json"
        try Data(jwks.raw.utf8).write(to: URL(fileURLWithPath: jwksPath))
        let kid = try #require(fixture.keys.keySet.entries.first?.key.kid)
        let (status, output) = try await runAudit(
            ["http://127.0.0.1:\(fixture.gatewayPort)/api/session/\(login.sessionID)", "--jwks", jwksPath, "--signing-key", fixture.directory + "/keys/\(kid).pem", "--timeout", "30"],
            token: login.accessToken)
        #expect(status == 0, "\(output)")
        #expect(!output.contains("ACCEPTED"), "\(output)")
        for name in ["alg-none", "key-confusion-pem", "embedded-jwk", "ecdsa-zero-es256", "expired", "wrong-audience", "typ-jwt", "duplicate-claim", "no-token"] {
            #expect(output.contains("refused ") && output.contains(name), "missing \(name)")
        }
        #expect(output.contains("0 accepted, 0 skipped"))
        #expect(!output.contains(login.accessToken))
        try await fixture.stop()
    }

    @Test("against deliberately weak verifiers: alg none honoured, exp ignored; the weaknesses are reported and the exit code is 1")
    func weakVerifiers() async throws {
        let key = try JWSKey.generate(algorithm: .es256, kid: "weak")
        let keys = try KeySet([.init(key: key, status: .active)])
        let strict = AccessTokenVerifier(keys: keys, policy: .gateway(issuer: "https://weak.example", audience: "weak"))
        let lax = AccessTokenVerifier(keys: keys, policy: .gateway(issuer: "https://weak.example", audience: "weak", leeway: 1e9, maximumLifetime: 1e10))
        let router = Router()
        @Sendable func bearer(_ request: Request) -> String? {
            request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        }
        // Honours alg "none" (any case) without checking a signature.
        router.get("/weak-none") { request, _ -> HTTPResponse.Status in
            guard let token = bearer(request) else { return .unauthorized }
            if let first = token.split(separator: ".").first, let bytes = Base64URL.decode(String(first)),
                let header = try? StrictJSONReader().parseObject(bytes), header["alg"]?.stringValue?.lowercased() == "none"
            {
                return .ok
            }
            return (try? strict.verify(token)) != nil ? .ok : .unauthorized
        }
        // Checks the signature but not the times.
        router.get("/weak-exp") { request, _ -> HTTPResponse.Status in
            guard let token = bearer(request) else { return .unauthorized }
            return (try? lax.verify(token)) != nil ? .ok : .unauthorized
        }
        let server = try await BackgroundServer.start { onPort in
            Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.weak"))
        }
        let directory = NSTemporaryDirectory() + "portcullis-weak-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data(try key.privatePEM().utf8).write(to: URL(fileURLWithPath: directory + "/weak.pem"))
        let token = try AccessTokenIssuer(keys: keys, issuer: "https://weak.example", audience: "weak").issue(subject: "u1", tenantID: "t1", clientID: "c").token

        let none = try await runAudit(["http://127.0.0.1:\(server.port)/weak-none", "--signing-key", directory + "/weak.pem", "--timeout", "30"], token: token)
        #expect(none.status == 1, "\(none.output)")
        #expect(none.output.split(separator: "\n").contains { $0.hasPrefix("ACCEPTED") && $0.contains("alg-none ") })
        #expect(!none.output.split(separator: "\n").contains { $0.hasPrefix("ACCEPTED") && $0.contains("expired") })

        let exp = try await runAudit(["http://127.0.0.1:\(server.port)/weak-exp", "--signing-key", directory + "/weak.pem", "--timeout", "30"], token: token)
        #expect(exp.status == 1, "\(exp.output)")
        let acceptedLines = exp.output.split(separator: "\n").filter { $0.hasPrefix("ACCEPTED") }
        #expect(acceptedLines.contains { $0.contains("expired") })
        #expect(acceptedLines.contains { $0.contains("not-yet-valid") })
        #expect(!acceptedLines.contains { $0.contains("alg-none") })
        #expect(!exp.output.contains("key-confusion-pem"), "no public key given: key confusion is listed as skipped")
        #expect(exp.output.contains("skipped") && exp.output.contains("key-confusion"))

        // A token the endpoint refuses: exit 2, nothing else sent.
        let refused = try await runAudit(["http://127.0.0.1:\(server.port)/weak-exp"], token: "eyJhbGciOiJFUzI1NiJ9.e30.AAAA")
        #expect(refused.status == 2)
        #expect(refused.output.contains("did not accept the given token"))
        try await server.stop()
    }

    @Test("--mcp against the gateway's MCP route to a server that keeps sessions: a session is opened with the valid token, every attack is POSTed as MCP's ping in it (only the valid token's reaches the server), refused; the 401 names resource_metadata, whose document names this URL and the authorization server")
    func mcpRoute() async throws {
        // An MCP server that keeps sessions, as FastMCP's does: outside one, 400.
        let targets = RecordingUpstream.Targets()
        let router = Router()
        router.post("/mcp") { request, _ -> Response in
            let body = String(buffer: try await request.body.collect(upTo: 1 << 16))
            let method = body.contains("\"initialize\"") ? "initialize" : body.contains("notifications/initialized") ? "initialized" : "ping"
            targets.append(method + " " + (request.headers[HTTPField.Name("Mcp-Session-Id")!] ?? "-") + " " + (request.headers[HTTPField.Name("MCP-Protocol-Version")!] ?? "-"))
            if method == "initialize" {
                return Response(
                    status: .ok, headers: [.contentType: "application/json", HTTPField.Name("Mcp-Session-Id")!: "s-1"],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"t","version":"1"}}}"#)))
            }
            guard request.headers[HTTPField.Name("Mcp-Session-Id")!] == "s-1" else {
                return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: "Bad Request: Missing session ID")))
            }
            return method == "initialized"
                ? Response(status: .accepted)
                : Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"jsonrpc":"2.0","id":1,"result":{}}"#)))
        }
        let upstream = try await BackgroundServer.start { onPort in
            Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.mcp-sessions"))
        }
        let port = try TestPostgres.freePort()
        let publicURL = "http://127.0.0.1:\(port)"
        var route = ProxyRoute(prefix: "/mcp/gh", upstream: "http://127.0.0.1:\(upstream.port)/mcp")
        route.servesMCP = true
        route.mcp = try #require(MCPResource(publicURL: publicURL, host: nil, pathPrefix: "/mcp/gh", scopes: [], ruleScopes: []))
        let fixture = try await GatewayFixture { configuration in
            configuration.port = port
            configuration.publicURL = publicURL
            configuration.routes = [route]
        }
        let token = try MCPRouteTests.token(fixture, audience: publicURL + "/mcp/gh")
        let jwksPath = fixture.directory + "/jwks.json"
        try Data(try await fixture.send(.GET, "/.well-known/jwks.json").raw.utf8).write(to: URL(fileURLWithPath: jwksPath))
        let kid = try #require(fixture.keys.keySet.entries.first?.key.kid)
        let (status, output) = try await runAudit(
            [publicURL + "/mcp/gh", "--mcp", "--jwks", jwksPath, "--signing-key", fixture.directory + "/keys/\(kid).pem", "--timeout", "30"], token: token)
        #expect(status == 0 && !output.contains("ACCEPTED") && !output.contains("PROBLEM"), "\(output)")
        #expect(output.contains("mcp-challenge") && output.contains("401 names resource_metadata \(publicURL)/.well-known/oauth-protected-resource/mcp/gh"), "\(output)")
        #expect(output.contains("its resource is the URL audited") && output.contains("authorization servers: http://127.0.0.1:8080"), "\(output)")
        #expect(output.contains("MCP discovery: 3 ok, 0 problem(s)"), "\(output)")
        #expect(targets.all == ["initialize - -", "initialized s-1 2025-11-25", "ping s-1 2025-11-25"],
                "a session opened with the valid token, then only its ping reached the server: \(targets.all)")
        #expect(!output.contains(token))

        // Audited at an address that is not the one clients are given: discovery is a problem (exit 1).
        let elsewhere = try await runAudit(["http://localhost:\(port)/mcp/gh", "--mcp", "--timeout", "30"], token: token)
        #expect(elsewhere.status == 1 && elsewhere.output.contains("PROBLEM") && elsewhere.output.contains("another origin"), "\(elsewhere.output)")
        let badHeader = try await runAudit([publicURL + "/mcp/gh", "--mcp", "--header", "Authorization: Bearer x"], token: token)
        #expect(badHeader.status == 2 && badHeader.output.contains("cannot set Authorization"), "\(badHeader.output)")
        try await fixture.stop()
        try await upstream.stop()
    }
}
