import AsyncHTTPClient
import Foundation
import JOSE
import NIOCore
import NIOHTTP1
import PortcullisTestSupport
import ProviderLogin
import Synchronization
import Testing

/// Two `portcullis gateway` processes and two `portcullis runtime` processes on one
/// PostgreSQL database (a cluster the tests start), sharing one keys directory:
/// gateway A talks to Runtime 1, gateway B to Runtime 2.
final class ScaleOut: @unchecked Sendable {
    let directory: String
    let databaseURL: String
    let issuer = "http://portcullis.test"
    private(set) var processes: [PortcullisProcess] = []
    let gatewayPorts: [Int]
    let runtimePorts: [Int]
    /// Each gateway's ext_authz listeners (HTTP, gRPC), when asked for.
    let extAuthzPorts: [(http: Int, grpc: Int)]

    /// - Parameters:
    ///   - configuration: YAML every instance reads as its config/portcullis.yaml (a trust section, say).
    ///   - extAuthz: each gateway answers Envoy's ext_authz too, in both modes (`extAuthzPorts`).
    init(configuration: String? = nil, extAuthz: Bool = false) async throws {
        directory = NSTemporaryDirectory() + "portcullis-scale-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/config", withIntermediateDirectories: true)
        if let configuration { try configuration.write(toFile: directory + "/config/portcullis.yaml", atomically: true, encoding: .utf8) }
        _ = try KeyDirectory(path: directory + "/keys").generate(algorithm: .es256)
        databaseURL = try await TestPostgres.shared().createDatabase()
        gatewayPorts = [try TestPostgres.freePort(), try TestPostgres.freePort()]
        runtimePorts = [try TestPostgres.freePort(), try TestPostgres.freePort()]
        extAuthzPorts = extAuthz ? [(try TestPostgres.freePort(), try TestPostgres.freePort()), (try TestPostgres.freePort(), try TestPostgres.freePort())] : []
        let common = ["STORAGE_POSTGRES_URL": databaseURL, "LOGGING_LEVEL": "warning"]
        for (index, port) in runtimePorts.enumerated() {
            processes.append(
                try PortcullisProcess(["runtime", "--host", "127.0.0.1", "--port", "\(port)", "--issuer", issuer], directory: directory, environment: common, name: "runtime\(index + 1)"))
        }
        for (index, port) in gatewayPorts.enumerated() {
            let environment = common.merging([
                "GATEWAY_PORT": "\(port)", "GATEWAY_ISSUER": issuer, "ADMIN_ENABLED": "false", "RUNTIME_URL": "http://127.0.0.1:\(runtimePorts[index])",
                // The load test creates hundreds of sessions from one address.
                "RATE_LIMITS_ANONYMOUS_SESSION_PER_CLIENT_PER_MINUTE": "100000", "RATE_LIMITS_ANONYMOUS_SESSION_PER_CLIENT_BURST": "100000",
                "RATE_LIMITS_LOGIN_PER_CLIENT_PER_MINUTE": "100000", "RATE_LIMITS_LOGIN_PER_CLIENT_BURST": "100000",
                "RATE_LIMITS_LOGIN_PER_USERNAME_PER_MINUTE": "100000", "RATE_LIMITS_LOGIN_PER_USERNAME_BURST": "100000",
            ]) { $1 }.merging(extAuthz ? ["EXT_AUTHZ_HTTP_PORT": "\(extAuthzPorts[index].http)", "EXT_AUTHZ_GRPC_PORT": "\(extAuthzPorts[index].grpc)"] : [:]) { $1 }
            processes.append(try PortcullisProcess(["gateway"], directory: directory, environment: environment, name: "gateway\(index == 0 ? "A" : "B")"))
        }
        do {
            for port in gatewayPorts { try await processes[2].waitUntilReady("http://127.0.0.1:\(port)/readyz") }
            for user in ["alice", "bob"] { try await addUser(user) }
        } catch {
            // A cluster that never became ready is stopped here: its processes would outlive the test.
            for process in processes { process.terminate() }
            throw error
        }
    }

    func addUser(_ name: String) async throws {
        try await cli(["users", "add", name, "--tenant", "default", "--password-stdin"], input: "correct horse battery")
    }

    /// Runs `portcullis ARGS` in the cluster's directory against its database; its output.
    @discardableResult
    func cli(_ arguments: [String], input: String? = nil) async throws -> String {
        let (status, output) = try await runPortcullis(arguments, directory: directory, environment: ["STORAGE_POSTGRES_URL": databaseURL], input: input)
        guard status == 0 else { throw FixtureError("portcullis \(arguments.joined(separator: " ")) failed: \(output)") }
        return output
    }

    var a: String { "http://127.0.0.1:\(gatewayPorts[0])" }
    var b: String { "http://127.0.0.1:\(gatewayPorts[1])" }

    func send(_ method: HTTPMethod, _ url: String, bearer: String? = nil, _ body: JSONValue? = nil) async throws -> Answer {
        try await ScaleOutClient().send(method, url, bearer: bearer, body)
    }

    func login(_ base: String, _ user: String, session: String? = nil) async throws -> Answer {
        var body: JSONObject = ["username": .string(user), "password": "correct horse battery"]
        if let session { body["session_id"] = .string(session) }
        return try await send(.POST, base + "/api/auth/login", .object(body))
    }

    /// Gateway B's answer to a read of `session` with `token`, asked again until it is 401 or a
    /// second (the contract's bound) has passed: the session's end and the token's revocation are
    /// two entries of the feed, and B may see the first a moment before the second.
    func readOnBUntilRefused(session: String, token: String) async throws -> Answer {
        var answer = try await send(.GET, b + "/api/session/\(session)", bearer: token)
        let deadline = ContinuousClock.now + .seconds(TimeBounds.seconds(1))
        while answer.status != 401, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            answer = try await send(.GET, b + "/api/session/\(session)", bearer: token)
        }
        return answer
    }

    /// Opens an agent socket on gateway B, sees one intent answered, runs `change` and
    /// records how the socket ends (and how long after `change` began).
    func socketOnB(token: String, session: String, change: @escaping @Sendable () async throws -> Void) async throws -> SocketTranscript {
        let url = b.replacingOccurrences(of: "http", with: "ws") + "/api/runtime/agent"
        return try await AgentRelayTests.session(url, headers: [("Authorization", "Bearer " + token), ("X-Session-Id", session)]) { outbound, iterator, _ in
            try await outbound.write(.text(#"{"type":"intent","request_id":"r1","intent_type":"echo","payload":{}}"#))
            _ = try await AgentRelayTests.nextJSON(&iterator)
            try await change()
        }
    }

    /// Stops every process and checks no log holds a secret.
    func stop(secrets: [String] = []) {
        for process in processes { process.terminate() }
        #expect(!FileManager.default.fileExists(atPath: directory + "/data"), "an instance fell back to a SQLite file instead of PostgreSQL")
        for process in processes {
            for secret in secrets where process.log.contains(secret) {
                Issue.record("a secret (\(secret.prefix(6))...) appears in a log")
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

@Suite("Several gateways and Runtimes on one PostgreSQL", .serialized, .enabled(if: TestPostgres.enabled, "PostgreSQL is not installed (apt-get install postgresql)"))
struct ScaleOutTests {
    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    @Test("a session created through gateway A is read, upgraded and used through gateway B")
    func sessionAcrossGateways() async throws {
        let cluster = try await ScaleOut()
        defer { cluster.stop() }
        let created = try await cluster.send(.POST, cluster.a + "/api/session/create-anonymous")
        let id = try #require(created["session_id"])
        let read = try await cluster.send(.GET, cluster.b + "/api/session/\(id)")
        #expect(read.status == 200 && read["state"] == "anonymous")
        let login = try await cluster.login(cluster.b, "alice", session: id)
        #expect(login.status == 200 && login["session_id"] == id)
        let token = try #require(login["access_token"])
        let onA = try await cluster.send(.GET, cluster.a + "/api/session/\(id)", bearer: token)
        #expect(onA.status == 200 && onA["state"] == "authenticated")
        let intent = try await cluster.send(
            .POST, cluster.a + "/api/intent", bearer: token, ["session_id": .string(id), "intent_type": "echo", "payload": ["from": "B's login"]])
        #expect(intent.status == 200, "\(intent.raw)")
        #expect(intent.json["result"] == ["from": "B's login"])
        cluster.stop(secrets: [token, login["refresh_token"] ?? ""])
    }

    @Test("a socket held by gateway B closes with 1008 within a second of a logout through gateway A; the token is refused on B as well")
    func logoutReachesOtherGateway() async throws {
        let cluster = try await ScaleOut()
        defer { cluster.stop() }
        let login = try await cluster.login(cluster.a, "alice")
        let token = try #require(login["access_token"]), session = try #require(login["session_id"])
        let transcript = try await cluster.socketOnB(token: token, session: session) {
            let logout = try await cluster.send(.POST, cluster.a + "/api/auth/logout", bearer: token, ["session_id": .string(session)])
            #expect(logout.status == 204)
        }
        #expect(transcript.close?.closeCode == .policyViolation)
        #expect(transcript.secondsToClose < TimeBounds.seconds(1), "closed \(transcript.secondsToClose) s after the logout on A")
        let refused = try await cluster.readOnBUntilRefused(session: session, token: token)
        #expect(refused.status == 401 && refused["error"] == "token_revoked", "\(refused.raw)")
        cluster.stop(secrets: [token])
    }

    @Test("an account disabled with portcullis users disable on another host closes its socket on gateway B with 1008 \"account disabled\" within a second")
    func disableReachesEveryGateway() async throws {
        let cluster = try await ScaleOut()
        defer { cluster.stop() }
        let login = try await cluster.login(cluster.a, "bob")
        let token = try #require(login["access_token"]), session = try #require(login["session_id"])
        let transcript = try await cluster.socketOnB(token: token, session: session) {
            try await cluster.cli(["users", "disable", "bob", "--tenant", "default"])
        }
        #expect(transcript.close?.closeCode == .policyViolation && transcript.close?.reason == "account disabled", "\(String(describing: transcript.close))")
        #expect(transcript.secondsToClose < TimeBounds.seconds(1), "closed \(transcript.secondsToClose) s after the disable")
        // A learns of the cut-off through the feed (milliseconds) and its sync (twice a second); until then the
        // revoked session answers 404. Under the parallel suite that can take a moment: poll, bounded.
        var refused = try await cluster.send(.GET, cluster.a + "/api/session/\(session)", bearer: token)
        let asked = ContinuousClock.now
        while refused.status == 404, ContinuousClock.now - asked < .seconds(5) {
            try await Task.sleep(for: .milliseconds(50))
            refused = try await cluster.send(.GET, cluster.a + "/api/session/\(session)", bearer: token)
        }
        #expect(refused.status == 401, "\(refused.raw)")
        cluster.stop(secrets: [token])
    }

    @Test("a trusted provider's token: logout through gateway A closes its socket on gateway B with 1008 within a second and is refused on B")
    func providerLogoutReachesOtherGateway() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "a")])
        let cluster = try await ScaleOut(
            configuration: "trust:\n  issuers:\n    - issuer: \(provider.issuer)\n      audiences: [portcullis-api]\n      tenant: acme\n")
        defer { cluster.stop() }
        let token = try provider.token(sub: "erin")
        let created = try await cluster.send(.POST, cluster.a + "/api/session/create-anonymous")
        let session = try #require(created["session_id"])
        // Each gateway fetches the provider's keys as it starts; give them a moment under load.
        var upgraded = try await cluster.send(.PATCH, cluster.a + "/api/session/\(session)/upgrade", bearer: token, .object([:]))
        for _ in 0..<50 where upgraded.status == 503 {
            try await Task.sleep(for: .milliseconds(100))
            upgraded = try await cluster.send(.PATCH, cluster.a + "/api/session/\(session)/upgrade", bearer: token, .object([:]))
        }
        #expect(upgraded.status == 200, "\(upgraded.raw)")
        let transcript = try await cluster.socketOnB(token: token, session: session) {
            let logout = try await cluster.send(.POST, cluster.a + "/api/auth/logout", bearer: token, ["session_id": .string(session)])
            #expect(logout.status == 204)
        }
        #expect(transcript.close?.closeCode == .policyViolation, "\(String(describing: transcript.close))")
        #expect(transcript.secondsToClose < TimeBounds.seconds(1), "closed \(transcript.secondsToClose) s after the logout on A")
        let refused = try await cluster.readOnBUntilRefused(session: session, token: token)
        #expect(refused.status == 401 && refused["error"] == "token_revoked", "\(refused.raw)")
        cluster.stop(secrets: [token])
        try await provider.stop()
    }

    @Test("a browser signed in on gateway A uses its session cookie on gateway B; signed out on B, the cookie sends a navigation on A to sign in within a second")
    func browserSessionAcrossGateways() async throws {
        let upstream = try await RecordingUpstream.start()
        let cluster = try await ScaleOut(configuration: """
            gateway:
              public_url: http://127.0.0.1
              routes:
                - {prefix: /app, upstream: "http://127.0.0.1:\(upstream.port)", auth: browser, identity_headers: {user: X-Remote-User}}
            """)
        defer { cluster.stop() }
        let form = [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded")]
        let signedIn = try await Answer.request(
            .POST, cluster.a + "/.portcullis/sign_in", headers: form, body: "username=alice&password=correct+horse+battery&rd=%2Fapp%2F", followRedirects: false)
        #expect(signedIn.status == 303, "\(signedIn.raw)")
        var jar = CookieJar()
        jar.take(signedIn)
        let value = try #require(jar["portcullis"])
        let onB = try await Answer.request(.GET, cluster.b + "/app/page", headers: [jar.header], followRedirects: false)
        #expect(onB.status == 200 && onB.receivedHeaders["x-remote-user"]?.first?.hasPrefix("usr_") == true, "\(onB.raw)")
        let onA = try await Answer.request(.GET, cluster.a + "/app/page", headers: [jar.header], followRedirects: false)
        #expect(onA.status == 200, "\(onA.raw)")
        let out = try await Answer.request(.POST, cluster.b + "/.portcullis/sign_out", headers: [("Sec-Fetch-Site", "same-origin"), jar.header], followRedirects: false)
        #expect(out.status == 303, "\(out.raw)")
        let navigation = BrowserSessionTests.navigation + [jar.header]
        let started = ContinuousClock.now
        var afterwards = try await Answer.request(.GET, cluster.a + "/app/page", headers: navigation, followRedirects: false)
        while afterwards.status != 302, Self.seconds(since: started) < TimeBounds.seconds(1) {
            try await Task.sleep(for: .milliseconds(20))
            afterwards = try await Answer.request(.GET, cluster.a + "/app/page", headers: navigation, followRedirects: false)
        }
        #expect(afterwards.status == 302 && afterwards.headers["Location"].first?.contains("/.portcullis/sign_in") == true, "\(afterwards.raw)")
        cluster.stop(secrets: [value])
        try await upstream.stop()
    }

    @Test("an MCP client's authorization started on gateway A is exchanged on gateway B, its token calls the MCP server through either, and its refresh rotates on A; the code's second use on A is refused")
    func authorizationAcrossGateways() async throws {
        let upstream = try await RecordingUpstream.start()
        let cluster = try await ScaleOut(configuration: """
            gateway:
              public_url: http://127.0.0.1
              routes:
                - {prefix: /mcp/a, upstream: "http://127.0.0.1:\(upstream.port)/mcp", mcp: true, require: {scopes: [tools]}}
            authorization_server:
              clients:
                - {client_id: ops-cli, name: Ops CLI, redirect_uris: ["http://127.0.0.1/callback"]}
            """)
        defer { cluster.stop() }
        let form = [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded")]
        let (access, refresh, _, code, exchange) = try await Self.authorize(cluster)
        for base in [cluster.a, cluster.b] {
            let called = try await cluster.send(.POST, base + "/mcp/a", bearer: access, ["jsonrpc": "2.0", "id": 1, "method": "tools/list"])
            #expect(called.status == 200, "\(base): \(called.raw)")
        }
        let refreshed = try await Answer.request(
            .POST, cluster.a + "/api/auth/oauth/token", headers: [form[1]], body: "grant_type=refresh_token&client_id=ops-cli&refresh_token=" + refresh, followRedirects: false)
        #expect(refreshed.status == 200 && refreshed["refresh_token"] != refresh, "\(refreshed.raw)")
        let reused = try await Answer.request(.POST, cluster.a + "/api/auth/oauth/token", headers: [form[1]], body: exchange, followRedirects: false)
        #expect(reused.status == 400 && reused["error"] == "invalid_grant", "\(reused.raw)")
        cluster.stop(secrets: [access, refresh, refreshed["refresh_token"] ?? refresh, code])
        try await upstream.stop()
    }

    @Test("an agent's MCP stream held on gateway B ends within a second, between two events, when the person signs out on gateway A; its token is then refused on B with the metadata pointer")
    func mcpStreamEndsAcrossGateways() async throws {
        let upstream = try await EventStreamUpstream.start()
        let cluster = try await ScaleOut(configuration: """
            gateway:
              public_url: http://127.0.0.1
              routes:
                - {prefix: /mcp/a, upstream: "http://127.0.0.1:\(upstream.port)/mcp", mcp: true}
            authorization_server:
              clients:
                - {client_id: ops-cli, name: Ops CLI, redirect_uris: ["http://127.0.0.1/callback"]}
            """)
        defer { cluster.stop() }
        let (access, refresh, jar, _, _) = try await Self.authorize(cluster)
        var request = HTTPClientRequest(url: cluster.b + "/mcp/a")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer " + access)
        request.headers.add(name: "Accept", value: "application/json, text/event-stream")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}"#))
        let stream = HeldStream(request)
        await stream.wait(seconds: 5) { $0.text.contains("\"progress\":2") }
        #expect(stream.text.contains("\"progress\":2") && stream.ended == nil, "\(stream.text)")
        let started = ContinuousClock.now
        let out = try await Answer.request(.POST, cluster.a + "/.portcullis/sign_out", headers: [("Sec-Fetch-Site", "same-origin"), jar.header], followRedirects: false)
        #expect(out.status == 303, "\(out.raw)")
        await stream.wait(seconds: 3) { $0.ended != nil }
        let ended = try #require(stream.ended, "the stream on B did not end")
        #expect(ended - started < .seconds(TimeBounds.seconds(1)), "ended \(ended - started) after the sign-out on A")
        #expect(!stream.failed && stream.text.hasSuffix("}\n\n"), "\(stream.text.suffix(80))")
        let next = try await cluster.send(.POST, cluster.b + "/mcp/a", bearer: access, ["jsonrpc": "2.0", "id": 2, "method": "ping"])
        #expect(next.status == 401 && next.headers.first(name: "www-authenticate")?.contains("resource_metadata=") == true, "\(next.raw)")
        cluster.stop(secrets: [access, refresh])
        try await upstream.stop()
    }

    /// Signs alice in on A, authorizes `ops-cli` for `/mcp/a` there and exchanges the code on B.
    static func authorize(_ cluster: ScaleOut) async throws -> (access: String, refresh: String, jar: CookieJar, code: String, exchange: String) {
        let form = [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded")]
        let signedIn = try await Answer.request(
            .POST, cluster.a + "/.portcullis/sign_in", headers: form, body: "username=alice&password=correct+horse+battery&rd=%2F", followRedirects: false)
        var jar = CookieJar()
        jar.take(signedIn)
        let verifier = "a-verifier-long-enough-for-pkce-0123456789-abcdef"
        let parameters = [
            ("response_type", "code"), ("client_id", "ops-cli"), ("redirect_uri", "http://127.0.0.1:5555/callback"), ("code_challenge", try Digest.sha256Base64URL(verifier)),
            ("code_challenge_method", "S256"), ("resource", "http://127.0.0.1/mcp/a"), ("state", "s1"),
        ]
        let query = parameters.map { $0.0 + "=" + FormEncoding.encode($0.1) }.joined(separator: "&")
        let page = try await Answer.request(.GET, cluster.a + "/api/auth/oauth/authorize?" + query, headers: [jar.header], followRedirects: false)
        let consented = try await Answer.request(
            .POST, cluster.a + "/api/auth/oauth/consent", headers: form + [jar.header], body: query + "&consent_nonce=" + AuthorizationServerTests.nonce(page) + "&decision=allow",
            followRedirects: false)
        let location = try #require(consented.headers["Location"].first, "\(consented.raw)")
        let code = try #require(FormEncoding.fields(location.split(separator: "?", maxSplits: 1).last ?? "")?["code"])
        let exchange = "grant_type=authorization_code&code=\(code)&client_id=ops-cli&redirect_uri=" + FormEncoding.encode("http://127.0.0.1:5555/callback") + "&code_verifier=" + verifier
        let tokens = try await Answer.request(.POST, cluster.b + "/api/auth/oauth/token", headers: [form[1]], body: exchange, followRedirects: false)
        #expect(page.status == 200 && tokens.status == 200, "\(page.raw) \(tokens.raw)")
        return (try #require(tokens["access_token"], "\(tokens.raw)"), try #require(tokens["refresh_token"]), jar, code, exchange)
    }

    @Test("a token revoked through gateway A is refused by gateway B within a second")
    func revocationReachesOtherGateway() async throws {
        let cluster = try await ScaleOut()
        defer { cluster.stop() }
        let login = try await cluster.login(cluster.a, "alice")
        let token = try #require(login["access_token"]), session = try #require(login["session_id"])
        // B has verified (and cached) the token before the revocation.
        #expect(try await cluster.send(.GET, cluster.b + "/api/session/\(session)", bearer: token).status == 200)
        let start = ContinuousClock.now
        #expect(try await cluster.send(.POST, cluster.a + "/api/auth/logout", bearer: token, ["session_id": .string(session)]).status == 204)
        var refusedAfter: Double? = nil
        while ScaleOutTests.seconds(since: start) < 3 {
            let answer = try await cluster.send(.GET, cluster.b + "/api/session/\(session)", bearer: token)
            if answer.status == 401 {
                refusedAfter = ScaleOutTests.seconds(since: start)
                #expect(answer["error"] == "token_revoked")
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let seconds = try #require(refusedAfter, "B still accepted the token 3 s after the revocation")
        #expect(seconds < TimeBounds.seconds(1), "refused \(seconds) s after the revocation")
        cluster.stop(secrets: [token])
    }

    @Test("a logout through gateway A is refused by gateway B's ext_authz within a second, in HTTP and gRPC mode alike (B had allowed the token, and cached it, before)")
    func logoutReachesOtherGatewaysExtAuthz() async throws {
        let cluster = try await ScaleOut(configuration: "gateway:\n  routes:\n    - prefix: /api/plain\n      upstream: http://plain.internal:8080\n", extAuthz: true)
        defer { cluster.stop() }
        let login = try await cluster.login(cluster.a, "alice")
        let token = try #require(login["access_token"]), session = try #require(login["session_id"])
        let ports = cluster.extAuthzPorts[1]
        /// B's two answers for a GET of /api/plain/x with the token: HTTP mode's status and error, gRPC's.
        func askB() async throws -> (http: Answer, grpc: (status: Int, error: String?, fields: [String: String], removed: [String])) {
            let http = try await Answer.request(.GET, "http://127.0.0.1:\(ports.http)/ext-authz/api/plain/x", bearer: token, followRedirects: false)
            let check = ExtAuthzGRPCTests.request("GET", "/api/plain/x", headers: [("authorization", "Bearer " + token)])
            return (http, ExtAuthzGRPCTests.read(try await ExtAuthzGRPCTests.check(port: ports.grpc, check)))
        }
        let before = try await askB()
        #expect(before.http.status == 200 && before.grpc.status == 200, "B allows the token before the logout: \(before.http.raw) \(before.grpc)")
        let start = ContinuousClock.now
        #expect(try await cluster.send(.POST, cluster.a + "/api/auth/logout", bearer: token, ["session_id": .string(session)]).status == 204)
        var refusedAfter: Double? = nil
        while ScaleOutTests.seconds(since: start) < 3 {
            let answer = try await askB()
            if answer.http.status == 401 && answer.grpc.status == 401 {
                refusedAfter = ScaleOutTests.seconds(since: start)
                #expect(answer.http.error == "token_revoked" && answer.grpc.error == "token_revoked", "\(answer.http.raw) \(answer.grpc)")
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let seconds = try #require(refusedAfter, "B's ext_authz still allowed the token 3 s after the logout on A")
        #expect(seconds < TimeBounds.seconds(1), "refused \(seconds) s after the logout")
        cluster.stop(secrets: [token])
    }

    @Test("one refresh token refreshed at once through A and B: exactly one succeeds; two logins upgrading one session through A and B: one 200, one 409")
    func racesAcrossGateways() async throws {
        let cluster = try await ScaleOut()
        defer { cluster.stop() }
        let login = try await cluster.login(cluster.a, "alice")
        let refresh = try #require(login["refresh_token"])
        async let first = cluster.send(.POST, cluster.a + "/api/auth/refresh", ["refresh_token": .string(refresh)])
        async let second = cluster.send(.POST, cluster.b + "/api/auth/refresh", ["refresh_token": .string(refresh)])
        let refreshes = try await [first, second].map(\.status).sorted()
        #expect(refreshes == [200, 401], "\(refreshes)")

        let created = try await cluster.send(.POST, cluster.a + "/api/session/create-anonymous")
        let id = try #require(created["session_id"])
        async let alice = cluster.login(cluster.a, "alice", session: id)
        async let bob = cluster.login(cluster.b, "bob", session: id)
        let logins = try await [alice, bob]
        #expect(logins.map(\.status).sorted() == [200, 409], "\(logins.map(\.raw))")
        #expect(logins.first { $0.status == 409 }?["error"] == "session_conflict")
        cluster.stop(secrets: [refresh, login["access_token"] ?? ""] + logins.compactMap { $0["access_token"] })
    }

    @Test("a key rotated with portcullis keys reaches every gateway at once (announced through PostgreSQL), not at the next 5-second poll")
    func keyRotationReachesEveryGateway() async throws {
        let cluster = try await ScaleOut()
        defer { cluster.stop() }
        let generated = try await cluster.cli(["keys", "generate", "--alg", "ES256", "--state", "next"])
        let kid = try #require(generated.split(separator: " ").dropFirst(3).first.map(String.init), "\(generated)")
        let start = ContinuousClock.now
        let rotated = try await cluster.cli(["keys", "rotate"])
        #expect(rotated.contains("told the instances on postgresql://"), "\(rotated)")
        var seenAfter: Double? = nil
        while ScaleOutTests.seconds(since: start) < 6 {
            let login = try await cluster.login(cluster.b, "alice")
            let token = try #require(login["access_token"])
            let header = try JWSCompact.parse(token).header
            if header["kid"]?.stringValue == kid {
                seenAfter = ScaleOutTests.seconds(since: start)
                break
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        let seconds = try #require(seenAfter, "gateway B still signed with the old key 6 s after the rotation")
        #expect(seconds < TimeBounds.seconds(2), "gateway B signed with the new key \(seconds) s after the rotation")
    }
}

@Suite("PostgreSQL faults under the gateway", .serialized, .enabled(if: TestPostgres.enabled, "PostgreSQL is not installed (apt-get install postgresql)"))
struct PostgresFaultTests {
    /// `portcullis users add NAME` (password "correct horse battery") on `database`, as an operator would.
    static func addUser(_ name: String, directory: String, database: String) async throws {
        let (status, output) = try await runPortcullis(
            ["users", "add", name, "--tenant", "default", "--password-stdin"], directory: directory, environment: ["STORAGE_POSTGRES_URL": database],
            input: "correct horse battery")
        try #require(status == 0, "\(output)")
    }

    @Test("PostgreSQL stopped for over a minute: readiness answers at once naming the store (its address on the admin listener only), requests that need it are 503 at once with Retry-After, and all serves again within 2 s of its return with nothing acknowledged lost")
    func databaseStopped() async throws {
        let server = try TestPostgres()
        defer { server.stop() }
        let database = try await server.createDatabase()
        let directory = NSTemporaryDirectory() + "portcullis-pgdown-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (port, adminPort) = (try TestPostgres.freePort(), try TestPostgres.freePort())
        // A route to an upstream: proxied requests need nothing from the store once the token is verified.
        let upstream = try await RecordingUpstream.start()
        try FileManager.default.createDirectory(atPath: directory + "/config", withIntermediateDirectories: true)
        try "gateway:\n  routes: [\"/api/v1=http://127.0.0.1:\(upstream.port)\"]\n".write(toFile: directory + "/config/portcullis.yaml", atomically: true, encoding: .utf8)
        try await Self.addUser("alice", directory: directory, database: database)
        let serve = try PortcullisProcess(
            ["serve"], directory: directory,
            environment: [
                "STORAGE_POSTGRES_URL": database, "GATEWAY_PORT": "\(port)", "ADMIN_ENABLED": "true", "ADMIN_PORT": "\(adminPort)", "RUNTIME_PORT": "0",
                "STORAGE_POSTGRES_CONNECT_TIMEOUT_SECONDS": "1", "STORAGE_POSTGRES_QUERY_TIMEOUT_SECONDS": "2",
            ], name: "serve")
        defer { serve.terminate() }
        let base = "http://127.0.0.1:\(port)"
        try await serve.waitUntilReady(base + "/readyz")
        let cluster = ScaleOutClient()
        var acknowledged: [String] = []
        for _ in 0..<5 {
            let created = try await cluster.send(.POST, base + "/api/session/create-anonymous")
            acknowledged.append(try #require(created["session_id"]))
        }
        let login = try await cluster.send(.POST, base + "/api/auth/login", ["username": "alice", "password": "correct horse battery"])
        let token = try #require(login["access_token"], "\(login.raw)")
        #expect(try await cluster.send(.GET, base + "/api/v1/orders", bearer: token).status == 200)

        server.stop()
        let outage = ContinuousClock.now
        var slowest = (readiness: 0.0, login: 0.0)
        // Readiness turns within a round of the background checks, and every answer comes at once.
        var ready = try await cluster.send(.GET, base + "/readyz")
        while ready.status != 503, ContinuousClock.now - outage < .seconds(TimeBounds.seconds(15)) {
            let asked = ContinuousClock.now
            ready = try await cluster.send(.GET, base + "/readyz")
            slowest.readiness = max(slowest.readiness, ScaleOutTests.seconds(since: asked))
            // Generous beside the whole suite on two cores; alone it answers in milliseconds.
            #expect(ScaleOutTests.seconds(since: asked) < TimeBounds.seconds(3), "readiness answered in \(ScaleOutTests.seconds(since: asked)) s")
        }
        let turned = ScaleOutTests.seconds(since: outage)
        #expect(ready.status == 503 && ready["error"] == "unavailable", "\(ready.raw)")
        #expect(ready.raw.contains(#""store":"unavailable""#), "readiness names the store: \(ready.raw)")
        let named = "postgresql://127.0.0.1:\(server.port)/"
        #expect(!ready.raw.contains(named), "the public listener never says where the database is: \(ready.raw)")
        let detailed = try await cluster.send(.GET, "http://127.0.0.1:\(adminPort)/readyz")
        #expect(detailed.status == 503 && detailed.raw.contains(named), "the admin listener names the database: \(detailed.raw)")

        // Over a minute of outage: every request that needs the store is refused at once, the whole time.
        repeat {
            let asked = ContinuousClock.now
            let login = try await cluster.send(.POST, base + "/api/auth/login", ["username": "nobody", "password": "whatever it is"])
            slowest.login = max(slowest.login, ScaleOutTests.seconds(since: asked))
            #expect(ScaleOutTests.seconds(since: asked) < TimeBounds.seconds(3), "a login while the store is down took \(ScaleOutTests.seconds(since: asked)) s (it waited 6 s and more before the circuit)")
            #expect(login.status == 503 && login["error"] == "store_unavailable", "a login while the store is down: \(login.status) \(login.raw)")
            #expect(login.headers.first(name: "Retry-After") != nil)
            #expect(!login.raw.contains(named))
            let refused = try await cluster.send(.POST, base + "/api/session/create-anonymous")
            #expect(refused.status == 503 && ["unavailable", "upstream_unavailable"].contains(refused["error"]), "\(refused.status) \(refused.raw)")
            #expect(!refused.raw.contains(named), "a public answer does not name the internal database")
            // What does not need the store keeps working: a proxied request with a verified token (the revocation
            // mirror answers through the outage, tokens.revocation_outage_grace_seconds), JWKS and discovery.
            let proxied = try await cluster.send(.GET, base + "/api/v1/orders", bearer: token)
            #expect(proxied.status == 200, "a proxied request during the outage: \(proxied.status) \(proxied.raw)")
            #expect(try await cluster.send(.GET, base + "/.well-known/jwks.json").status == 200)
            #expect(try await cluster.send(.GET, base + "/.well-known/oauth-authorization-server").status == 200)
            try await Task.sleep(for: .seconds(5))
        } while ContinuousClock.now - outage < .seconds(65)
        let metrics = try await cluster.send(.GET, "http://127.0.0.1:\(adminPort)/metrics")
        #expect(metrics.raw.contains(#"portcullis_circuit_open{dependency="store"} 1"#), "the store's circuit is open in the metrics")

        try server.start()
        let returned = ContinuousClock.now
        var recovered = false
        while !recovered, ScaleOutTests.seconds(since: returned) < TimeBounds.seconds(10) {
            recovered = (try? await cluster.send(.GET, base + "/readyz"))?.status == 200
            if !recovered { try await Task.sleep(for: .milliseconds(50)) }
        }
        let recovery = ScaleOutTests.seconds(since: returned)
        if ProcessInfo.processInfo.environment["PORTCULLIS_REPORT"] != nil {
            print("outage: readiness 503 \(turned) s after pg_ctl stop returned; slowest readiness answer \(slowest.readiness) s, slowest login \(slowest.login) s; ready \(recovery) s after pg_ctl start returned")
        }
        #expect(recovered && recovery < TimeBounds.seconds(2), "ready again \(recovery) s after PostgreSQL's return (at most 2 s)")
        #expect(try await cluster.send(.POST, base + "/api/session/create-anonymous").status == 201)
        for id in acknowledged {
            #expect(try await cluster.send(.GET, base + "/api/session/\(id)").status == 200, "acknowledged session \(id) is there")
        }
        try await upstream.stop()
    }

    @Test("the gateway and the Runtime as separate processes on PostgreSQL: once PostgreSQL refuses connections, every session read and login is answered 503 JSON within a second (never 504), from the first request on, and both serve again when it returns")
    func separateProcessesAnswerWithinASecond() async throws {
        let server = try TestPostgres()
        defer { server.stop() }
        let database = try await server.createDatabase()
        let directory = NSTemporaryDirectory() + "portcullis-split-outage-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = try KeyDirectory(path: directory + "/keys").generate(algorithm: .es256)
        let (gatewayPort, runtimePort) = (try TestPostgres.freePort(), try TestPostgres.freePort())
        let issuer = "http://portcullis.test"
        // The defaults for the timeouts (5 s connect, 1 s query): what an operator runs.
        let common = ["STORAGE_POSTGRES_URL": database, "LOGGING_LEVEL": "warning"]
        let runtime = try PortcullisProcess(
            ["runtime", "--host", "127.0.0.1", "--port", "\(runtimePort)", "--issuer", issuer], directory: directory, environment: common, name: "runtime")
        defer { runtime.terminate() }
        let gateway = try PortcullisProcess(
            ["gateway"], directory: directory,
            environment: common.merging([
                "GATEWAY_PORT": "\(gatewayPort)", "GATEWAY_ISSUER": issuer, "ADMIN_ENABLED": "false", "RUNTIME_URL": "http://127.0.0.1:\(runtimePort)",
                // Every login here is asked of the store, not stopped by the login limits first.
                "RATE_LIMITS_LOGIN_PER_CLIENT_PER_MINUTE": "100000", "RATE_LIMITS_LOGIN_PER_CLIENT_BURST": "100000",
                "RATE_LIMITS_LOGIN_PER_USERNAME_PER_MINUTE": "100000", "RATE_LIMITS_LOGIN_PER_USERNAME_BURST": "100000",
            ]) { $1 },
            name: "gateway")
        defer { gateway.terminate() }
        let base = "http://127.0.0.1:\(gatewayPort)"
        try await gateway.waitUntilReady(base + "/readyz")
        try await Self.addUser("alice", directory: directory, database: database)
        let client = ScaleOutClient()
        let created = try await client.send(.POST, base + "/api/session/create-anonymous")
        let session = try #require(created["session_id"], "\(created.raw)")
        #expect(try await client.send(.GET, base + "/api/session/\(session)").status == 200)

        server.stop()
        // From the first request after PostgreSQL went away: reads through the Runtime's store, logins through the gateway's.
        var answers: [(what: String, status: Int, error: String?, seconds: Double)] = []
        let outage = ContinuousClock.now
        // Four seconds of asking, stretched as the answers' bound is (a sanitized run answers slower):
        // at least four rounds of the two requests, whatever the build.
        while ContinuousClock.now - outage < .seconds(TimeBounds.seconds(4)) {
            for (what, method, path, body) in [
                ("session read", HTTPMethod.GET, "/api/session/\(session)", nil as JSONValue?),
                ("login", .POST, "/api/auth/login", ["username": "alice", "password": "correct horse battery"]),
            ] {
                let asked = ContinuousClock.now
                let answer = try await client.send(method, base + path, body)
                answers.append((what, answer.status, answer.error, ScaleOutTests.seconds(since: asked)))
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let slowest = answers.map(\.seconds).max() ?? 0
        if ProcessInfo.processInfo.environment["PORTCULLIS_REPORT"] != nil {
            print("split outage: \(answers.count) answers in 4 s, slowest \(slowest) s, statuses \(Set(answers.map(\.status)).sorted())")
        }
        for answer in answers {
            #expect(answer.seconds < TimeBounds.seconds(1), "a \(answer.what) took \(answer.seconds) s")
            #expect(answer.status == 503, "a \(answer.what) was \(answer.status) \(answer.error ?? "")")
            #expect(answer.error != nil, "a \(answer.what)'s 503 has no JSON error code")
        }
        #expect(answers.count >= 8)

        try server.start()
        var back = 0
        let returned = ContinuousClock.now
        while back != 200, ScaleOutTests.seconds(since: returned) < TimeBounds.seconds(10) {
            back = (try? await client.send(.GET, base + "/api/session/\(session)"))?.status ?? 0
            if back != 200 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(back == 200, "the session is read again once PostgreSQL is back")
    }

    @Test("PostgreSQL (the gateway's store) stopped while an agent socket is open and the Runtime's own store is up: the socket stays open and its intents are answered through the outage; a new login is 503 store_unavailable")
    func agentSocketThroughDatabaseOutage() async throws {
        let server = try TestPostgres()
        defer { server.stop() }
        let database = try await server.createDatabase()
        let directory = NSTemporaryDirectory() + "portcullis-pgdown-socket-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = try KeyDirectory(path: directory + "/keys").generate(algorithm: .es256)
        try await Self.addUser("alice", directory: directory, database: database)
        let (port, runtimePort) = (try TestPostgres.freePort(), try TestPostgres.freePort())
        let issuer = "http://127.0.0.1:\(port)"
        // The Runtime on its own SQLite file (data/portcullis.sqlite), the gateway on PostgreSQL; one keys directory.
        let runtime = try PortcullisProcess(["runtime", "--host", "127.0.0.1", "--port", "\(runtimePort)", "--issuer", issuer], directory: directory, environment: [:], name: "runtime")
        defer { runtime.terminate() }
        let gateway = try PortcullisProcess(
            ["gateway"], directory: directory,
            environment: [
                "STORAGE_POSTGRES_URL": database, "GATEWAY_PORT": "\(port)", "GATEWAY_ISSUER": issuer, "ADMIN_ENABLED": "false",
                "RUNTIME_URL": "http://127.0.0.1:\(runtimePort)", "STORAGE_POSTGRES_CONNECT_TIMEOUT_SECONDS": "1", "STORAGE_POSTGRES_QUERY_TIMEOUT_SECONDS": "2",
            ], name: "gateway")
        defer { gateway.terminate() }
        let base = "http://127.0.0.1:\(port)"
        try await gateway.waitUntilReady(base + "/readyz")
        let cluster = ScaleOutClient()
        let login = try await cluster.send(.POST, base + "/api/auth/login", ["username": "alice", "password": "correct horse battery"])
        let token = try #require(login["access_token"], "\(login.raw)")
        let session = try #require(login["session_id"])

        let answered = Mutex(0)
        let url = "ws://127.0.0.1:\(port)/api/runtime/agent"
        let transcript = try await AgentRelayTests.session(url, headers: [("Authorization", "Bearer " + token), ("X-Session-Id", session)]) { outbound, iterator, transcript in
            try await outbound.write(.text(#"{"type":"intent","request_id":"before","intent_type":"echo","payload":{"n":0}}"#))
            let first = try await AgentRelayTests.nextJSON(&iterator)
            #expect(first["request_id"] == "before" && first["status"] == "completed", "\(first)")

            server.stop()
            // The outage as the gateway sees it: its store's circuit opens (readiness names the store).
            let down = try await Answer.eventually(within: TimeBounds.seconds(15)) { try await cluster.send(.GET, base + "/readyz") } until: {
                $0.status == 503 && $0.raw.contains(#""store":"unavailable""#)
            }
            #expect(down.status == 503, "\(down.raw)")
            let refused = try await cluster.send(.POST, base + "/api/auth/login", ["username": "alice", "password": "correct horse battery"])
            #expect(refused.status == 503 && refused["error"] == "store_unavailable", "\(refused.raw)")
            // Intents on the open socket for several seconds of the outage (past the revocation mirror's
            // 5-second freshness, so the grace is what answers the token's checks).
            for index in 1...8 {
                try await outbound.write(.text(#"{"type":"intent","request_id":"during-\#(index)","intent_type":"echo","payload":{"n":\#(index)}}"#))
                let result = try await AgentRelayTests.nextJSON(&iterator)
                #expect(result["request_id"] == .string("during-\(index)") && result["status"] == "completed", "\(result)")
                if result["status"] == "completed" { answered.withLock { $0 += 1 } }
                try await Task.sleep(for: .seconds(1))
            }
            try await outbound.close(.normalClosure, reason: "done")
        }
        #expect(answered.withLock { $0 } == 8, "every intent during the outage was answered")
        #expect(transcript.close == nil || transcript.close?.closeCode == .normalClosure, "the socket was not closed by the gateway: \(String(describing: transcript.close))")
        #expect(!gateway.log.contains(token) && !runtime.log.contains(token))
    }

    @Test("kill -9 of PostgreSQL in the middle of a burst of logins, refreshes and logouts: after it restarts, every login answered 200 has its session and refresh token, every logout answered 204 stays logged out")
    func databaseKilledUnderBurst() async throws {
        let server = try TestPostgres()
        defer { server.stop() }
        let database = try await server.createDatabase()
        let directory = NSTemporaryDirectory() + "portcullis-pgkill-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let users = ["u0", "u1", "u2", "u3"]
        for user in users { try await Self.addUser(user, directory: directory, database: database) }
        let port = try TestPostgres.freePort()
        let serve = try PortcullisProcess(
            ["serve"], directory: directory,
            environment: [
                "STORAGE_POSTGRES_URL": database, "GATEWAY_PORT": "\(port)", "ADMIN_ENABLED": "false", "RUNTIME_PORT": "0",
                "STORAGE_POSTGRES_CONNECT_TIMEOUT_SECONDS": "1", "STORAGE_POSTGRES_QUERY_TIMEOUT_SECONDS": "2",
                "RATE_LIMITS_LOGIN_PER_CLIENT_PER_MINUTE": "100000", "RATE_LIMITS_LOGIN_PER_CLIENT_BURST": "100000",
                "RATE_LIMITS_LOGIN_PER_USERNAME_PER_MINUTE": "100000", "RATE_LIMITS_LOGIN_PER_USERNAME_BURST": "100000",
            ], name: "serve")
        defer { serve.terminate() }
        let base = "http://127.0.0.1:\(port)"
        try await serve.waitUntilReady(base + "/readyz")

        let tally = BurstTally()
        let client = ScaleOutClient()
        let workers = Task {
            await withTaskGroup(of: Void.self) { group in
                for user in users {
                    group.addTask {
                        while !tally.stop.load(ordering: .relaxed) {
                            guard let login = try? await client.send(.POST, base + "/api/auth/login", ["username": .string(user), "password": "correct horse battery"]),
                                login.status == 200, let session = login["session_id"], let access = login["access_token"], let refresh = login["refresh_token"]
                            else { try? await Task.sleep(for: .milliseconds(50)); continue }
                            var chain = BurstTally.Chain(sessionID: session, accessToken: access, refreshToken: refresh)
                            let index = tally.chains.withLock { $0.append(chain); return $0.count - 1 }
                            // A refresh: only an answered one moves the chain on; after any other outcome it stops here.
                            guard let refreshed = try? await client.send(.POST, base + "/api/auth/refresh", ["refresh_token": .string(refresh)]) else { continue }
                            guard refreshed.status == 200, let next = refreshed["refresh_token"], let nextAccess = refreshed["access_token"] else {
                                if refreshed.status != 503 { tally.chains.withLock { $0.remove(at: index) } }  // refused for another reason: not this test's
                                else { tally.chains.withLock { $0[index].refreshToken = "" } }  // unknown outcome: its token is not checked
                                continue
                            }
                            chain.refreshToken = next
                            chain.accessToken = nextAccess
                            tally.chains.withLock { $0[index] = chain }
                            // Every other chain is logged out.
                            guard index % 2 == 0 else { continue }
                            let logout = try? await client.send(.POST, base + "/api/auth/logout", bearer: nextAccess, ["session_id": .string(session)])
                            if logout?.status == 204 {
                                tally.chains.withLock { $0[index].loggedOut = true }
                            } else {
                                tally.chains.withLock { $0[index].refreshToken = "" }  // unknown outcome
                            }
                        }
                    }
                }
            }
        }
        let began = ContinuousClock.now
        let report = ProcessInfo.processInfo.environment["PORTCULLIS_REPORT"] != nil
        // 24 acknowledged logins before the kill (slower under the sanitizer: the wait stretches with TimeBounds).
        for _ in 0..<Int(TimeBounds.seconds(12) * 50) where tally.chains.withLock({ $0.count }) < 24 { try await Task.sleep(for: .milliseconds(20)) }
        if report { print("burst: \(tally.chains.withLock { $0.count }) logins acknowledged after \(ContinuousClock.now - began); kill -9") }
        try server.kill9()
        try await Task.sleep(for: .seconds(1))
        tally.stop.store(true, ordering: .relaxed)
        await workers.value
        var restarted = false
        for _ in 0..<20 where !restarted {
            restarted = (try? server.start()) != nil
            if !restarted { try await Task.sleep(for: .milliseconds(500)) }
        }
        try #require(restarted, "PostgreSQL restarts after kill -9 (crash recovery)")
        if report { print("burst: restarted after \(ContinuousClock.now - began)") }
        try await serve.waitUntilReady(base + "/readyz")
        if report { print("burst: ready after \(ContinuousClock.now - began)") }

        let chains = tally.chains.withLock { $0 }
        #expect(chains.count >= 8, "enough logins acknowledged before the kill to check: \(chains.count)")
        var checkedActive = 0
        var checkedLoggedOut = 0
        for chain in chains {
            if chain.loggedOut {
                let refreshed = try await client.send(.POST, base + "/api/auth/refresh", ["refresh_token": .string(chain.refreshToken)])
                #expect(refreshed.status == 401, "a logout answered 204 stays logged out: refresh \(refreshed.status) \(refreshed.raw)")
                let read = try await client.send(.GET, base + "/api/session/\(chain.sessionID)", bearer: chain.accessToken)
                #expect(read.status == 401 || read.status == 404, "a logged-out session's token: \(read.status) \(read.raw)")
                checkedLoggedOut += 1
            } else if !chain.refreshToken.isEmpty {
                let read = try await client.send(.GET, base + "/api/session/\(chain.sessionID)", bearer: chain.accessToken)
                #expect(read.status == 200, "a login answered 200 has its session: \(read.status) \(read.raw)")
                let refreshed = try await client.send(.POST, base + "/api/auth/refresh", ["refresh_token": .string(chain.refreshToken)])
                #expect(refreshed.status == 200, "and its last refresh token answered: \(refreshed.status) \(refreshed.raw)")
                checkedActive += 1
            }
        }
        if report { print(serve.log.split(separator: "\n").suffix(40).joined(separator: "\n")) }
        if report { print("burst: checked \(checkedActive) active and \(checkedLoggedOut) logged-out chains after \(ContinuousClock.now - began)") }
        #expect(checkedActive > 0 && checkedLoggedOut > 0, "both kinds checked: \(checkedActive) active, \(checkedLoggedOut) logged out")
    }

    @Test("kill -9 of one gateway under load: the other carries on, and every session either acknowledged is there")
    func gatewayKilledUnderLoad() async throws {
        let cluster = try await ScaleOut()
        defer { cluster.stop() }
        let tally = LoadTally()
        let load = Task {
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        let base = worker % 2 == 0 ? cluster.a : cluster.b
                        for _ in 0..<150 {
                            guard let answer = try? await cluster.send(.POST, base + "/api/session/create-anonymous"), answer.status == 201,
                                let id = answer["session_id"]
                            else {
                                // A refused: it died (its workers stop). B must not refuse anything.
                                if base == cluster.a { return }
                                tally.failuresOnB.withLock { $0 += 1 }
                                continue
                            }
                            tally.acknowledged.withLock { $0.append(id) }
                        }
                    }
                }
            }
        }
        for _ in 0..<600 where tally.acknowledged.withLock({ $0.count }) < 40 { try await Task.sleep(for: .milliseconds(20)) }
        cluster.processes[2].kill9()  // gateway A
        await load.value
        #expect(tally.failuresOnB.withLock { $0 } == 0, "gateway B failed requests while A died")
        let ids = tally.acknowledged.withLock { $0 }
        #expect(ids.count >= 300, "B answered all of its 300 after A died (\(ids.count) sessions acknowledged)")
        for id in ids {
            let read = try await cluster.send(.GET, cluster.b + "/api/session/\(id)")
            #expect(read.status == 200, "acknowledged session \(id) is missing")
        }
    }
}

/// What a burst of logins, refreshes and logouts was told, chain by chain.
final class BurstTally: Sendable {
    /// One login's chain, up to its last answered step (an empty `refreshToken`: an unanswered step, not checked).
    struct Chain: Sendable {
        var sessionID: String
        var accessToken: String
        var refreshToken: String
        var loggedOut = false
    }

    let chains = Mutex<[Chain]>([])
    let stop = Atomic<Bool>(false)
}

/// What a load against two gateways saw.
final class LoadTally: Sendable {
    let acknowledged = Mutex<[String]>([])
    let failuresOnB = Mutex(0)
}

/// Plain requests to any instance.
struct ScaleOutClient {
    func send(_ method: HTTPMethod, _ url: String, bearer: String? = nil, _ body: JSONValue? = nil) async throws -> Answer {
        try await Answer.request(method, url, bearer: bearer, body: body.map(JSONWriter.string))
    }
}
