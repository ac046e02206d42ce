import DataPlane
import EdgeHTTP
import Foundation
import GRDB
import Gateway
import Glibc
import JOSE
import NIOSSL
import PortcullisTestSupport
import Testing

/// The event-loop proxy path for `gateway.routes` (DataPlane): what it must keep
/// doing exactly as the retired general path (ProxyRoutes) did, and what it adds (the ownership view,
/// reused assertions, one in-flight request per connection).
@Suite("The data plane: gateway.routes proxied on the event loop")
struct DataPlaneTests {
    static func fixture(_ upstream: BackgroundServer, _ configure: (inout GatewayConfiguration) -> Void = { _ in }) async throws -> GatewayFixture {
        try await GatewayFixture {
            $0.routes = [ProxyRoute(prefix: "/api/echo", upstream: "http://127.0.0.1:\(upstream.port)")]
            configure(&$0)
        }
    }

    /// A gateway with the `/api/echo` route to a recording upstream, and a logged-in user's token.
    struct World {
        let fixture: GatewayFixture
        let upstream: BackgroundServer
        let targets: RecordingUpstream.Targets
        let token: String
        var port: Int { fixture.gatewayPort }

        static func start(_ configure: (inout GatewayConfiguration) -> Void = { _ in }) async throws -> World {
            let targets = RecordingUpstream.Targets()
            let upstream = try await RecordingUpstream.start(recording: targets)
            let fixture = try await DataPlaneTests.fixture(upstream, configure)
            try await fixture.addUser("alice")
            let login = try await fixture.login("alice")
            return World(fixture: fixture, upstream: upstream, targets: targets, token: login.accessToken)
        }

        func stop() async throws {
            try await fixture.stop()
            try await upstream.stop()
        }
    }

    /// The answers on one raw connection, in order: status and body of each.
    static func answers(_ bytes: [UInt8], count: Int) -> [(status: Int, body: String)] {
        var text = bytes.text[...]
        var result: [(Int, String)] = []
        while result.count < count, let headEnd = text.range(of: "\r\n\r\n") {
            let head = text[..<headEnd.lowerBound]
            let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
            var rest = text[headEnd.upperBound...]
            let lengthLine = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            let length = lengthLine.flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            let bodyEnd = rest.utf8.index(rest.startIndex, offsetBy: min(length, rest.utf8.count))
            result.append((status, String(rest[..<bodyEnd])))
            rest = rest[bodyEnd...]
            text = rest
        }
        return result
    }

    @Test("requests on one keep-alive connection are answered in order, proxied ones and the API's alike, even when sent together")
    func oneConnectionInOrder() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await Self.fixture(upstream)
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let port = fixture.gatewayPort
        let bearer = "Authorization: Bearer \(login.accessToken)\r\n"
        let bytes = try await onOwnThread { () -> [UInt8] in
            let connection = try RawConnection(port: port, receiveTimeout: 5)
            defer { connection.close() }
            // Pipelined: a proxied request, an API request, a proxied POST with a body, the last one closing.
            connection.send(
                "GET /api/echo/first HTTP/1.1\r\nHost: x\r\n\(bearer)\r\n" + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                    + "POST /api/echo/third HTTP/1.1\r\nHost: x\r\n\(bearer)Content-Length: 5\r\n\r\nhello"
                    + "GET /.well-known/jwks.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return connection.readAll()
        }
        let answers = Self.answers(bytes, count: 4)
        #expect(answers.map(\.status) == [200, 200, 200, 200])  // (bodies not printed: they quote the assertion)
        #expect(answers.count == 4 && answers[0].body.contains("\"/first\""))
        #expect(answers.count == 4 && answers[1].body.contains("\"ok\""))
        #expect(answers.count == 4 && answers[2].body.contains("\"/third\"") && answers[2].body.contains("\"body_bytes\":5"))
        #expect(answers.count == 4 && answers[3].body.contains("\"keys\""))
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("with routes, an idle keep-alive connection still closes after limits.idle_timeout_seconds, but never while its proxied request waits on a slow upstream")
    func idleTimeoutSparesProxiedRequests() async throws {
        let world = try await World.start { $0.limits.idleTimeout = 1 }
        let (port, token) = (world.port, world.token)
        let (answer, closedAfter) = try await onOwnThread { () -> (String, Double) in
            let connection = try RawConnection(port: port, receiveTimeout: 10)
            defer { connection.close() }
            // The upstream answers after 2.5 s: two and a half idle timeouts with the request in progress.
            connection.send("GET /api/echo/slow?delay_ms=2500 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n")
            let answer = connection.readUntil("\"body_bytes\"").text
            let answered = Date()
            _ = connection.readAll()  // returns when the server closes the idle connection
            return (answer, Date().timeIntervalSince(answered))
        }
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(60))")
        #expect(closedAfter >= 0.8 && closedAfter < TimeBounds.seconds(5), "closed \(closedAfter) s after the answer")
        try await world.stop()
    }

    @Test("with routes, a request body that stops coming is cut off after limits.idle_timeout_seconds of silence, answered or not")
    func stalledBodyIsCutOff() async throws {
        let world = try await World.start { $0.limits.idleTimeout = 1 }
        let port = world.port
        for bearer in ["Authorization: Bearer \(world.token)\r\n", ""] {  // admitted and forwarded; refused (401) and drained
            let closedAfter = try await onOwnThread { () -> Double in
                let connection = try RawConnection(port: port, receiveTimeout: 10)
                defer { connection.close() }
                connection.send("POST /api/echo/upload HTTP/1.1\r\nHost: x\r\n\(bearer)Content-Length: 100\r\n\r\n0123456789")
                let sent = Date()
                _ = connection.readAll()  // returns when the server closes
                return Date().timeIntervalSince(sent)
            }
            #expect(closedAfter >= 0.8 && closedAfter < TimeBounds.seconds(5), "\(bearer.isEmpty ? "refused" : "admitted"): closed \(closedAfter) s after the last byte")
        }
        try await world.stop()
    }

    @Test("a body that trickles in (a byte every 200 ms, never silent for the idle timeout), chunked (NIO's path) or of a Content-Length (the front's), gets 408 request_timeout after limits.request_timeout_seconds, on a route admitted or refused and on the API; a refused body past 64 KiB is not read to its end", arguments: [
        ("/api/echo/upload", true, true), ("/api/echo/upload", false, true), ("/api/auth/login", false, true),
        ("/api/echo/upload", true, false), ("/api/echo/upload", false, false),
    ])
    func tricklingBodyGetsRequestTimeout(path: String, bearer: Bool, chunked: Bool) async throws {
        let refusedFirst = !bearer && path.hasPrefix("/api/echo")
        let world = try await World.start {
            $0.limits.idleTimeout = 5
            $0.limits.requestTimeout = 1
        }
        let (port, token) = (world.port, world.token)
        let (answer, seconds) = try await onOwnThread { () -> (String, Double) in
            let connection = try RawConnection(port: port, receiveTimeout: 15)
            defer { connection.close() }
            let authorization = bearer ? "Authorization: Bearer \(token)\r\n" : ""
            let framing = chunked ? "Transfer-Encoding: chunked" : "Content-Length: 1000"
            connection.send("POST \(path) HTTP/1.1\r\nHost: x\r\n\(authorization)Content-Type: application/json\r\n\(framing)\r\n\r\n")
            let started = Date()
            // A route refuses a request without a token at its head, before the body: that answer first.
            var answer = refusedFirst ? connection.readUntil("}").text : ""
            // One byte a chunk, every 200 ms, for up to 10 s: the idle timeout never fires, the request deadline must.
            for _ in 0..<50 {
                if refusedFirst ? connection.isClosedByPeer : connection.isReadable() { break }
                connection.send(chunked ? "1\r\n{\r\n" : "{")
                Thread.sleep(forTimeInterval: 0.2)
            }
            if !refusedFirst { answer = connection.readAll().text }
            return (answer, Date().timeIntervalSince(started))
        }
        if refusedFirst {
            // Refused at its head (401) before the deadline: the rest is dropped, and the deadline still closes it.
            #expect(answer.hasPrefix("HTTP/1.1 401"), "\(answer.prefix(80))")
        } else {
            #expect(answer.hasPrefix("HTTP/1.1 408") && answer.contains(#""error":"request_timeout""#), "\(answer.prefix(200))")
        }
        #expect(seconds >= 0.8 && seconds < TimeBounds.seconds(5), "closed \(seconds) s after the head (deadline 1 s)")
        try await world.stop()
    }

    @Test("a refused request's body is read and dropped up to 64 KiB, then the connection is closed rather than drained")
    func refusedBodyIsNotDrainedWithoutBound() async throws {
        let world = try await World.start { $0.maximumBodyBytes = 1 << 20 }
        let port = world.port
        let (answer, closed) = try await onOwnThread { () -> (String, Bool) in
            let connection = try RawConnection(port: port, receiveTimeout: 10)
            defer { connection.close() }
            connection.send("POST /api/echo/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
            let text = connection.readUntil("}").text  // the 401, at the head
            let chunk = String(repeating: "a", count: 16 * 1024)
            for _ in 0..<32 where !connection.isClosedByPeer {
                connection.send(chunk)
                Thread.sleep(forTimeInterval: 0.05)
            }
            return (text, connection.isClosedByPeer)
        }
        #expect(answer.hasPrefix("HTTP/1.1 401"), "\(answer.prefix(80))")
        #expect(closed, "closed after at most 64 KiB of a refused body, not read to its 1 MB end")
        try await world.stop()
    }

    @Test("a repeated Authorization header is one field value (RFC 9110 §5.3) and refused 401, never one of its tokens picked; the upstream hears nothing")
    func repeatedAuthorization() async throws {
        let world = try await World.start()
        let (port, token) = (world.port, world.token)
        let answer = try await onOwnThread { () -> String in
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            connection.send("GET /api/echo/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nAuthorization: Bearer \(token)\r\nConnection: close\r\n\r\n")
            return connection.readAll().text
        }
        #expect(answer.hasPrefix("HTTP/1.1 401"), "\(answer.prefix(40))")
        #expect(world.targets.all.isEmpty)
        try await world.stop()
    }

    @Test("a graceful stop lets a proxied answer in flight finish, then closes its connection")
    func gracefulStopFinishesProxiedAnswer() async throws {
        let world = try await World.start()
        let (port, token) = (world.port, world.token)
        async let reading = onOwnThread { () -> String in
            let connection = try RawConnection(port: port, receiveTimeout: 10)
            defer { connection.close() }
            connection.send("GET /api/echo/slow?delay_ms=1500 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n")
            return connection.readAll().text  // the answer, then the close
        }
        try await Task.sleep(for: .milliseconds(500))
        try await world.fixture.stop()
        let answer = try await reading
        #expect(answer.hasPrefix("HTTP/1.1 200") && answer.contains("\"/slow?delay_ms=1500\""), "\(answer.prefix(60))")
        try await world.upstream.stop()
    }

    @Test("a graceful stop while a refused request's Content-Length body is still coming waits for the body's end (read and dropped), then closes: the refusal is not reset away by a close with bytes unread")
    func gracefulStopWaitsForDroppedBody() async throws {
        let world = try await World.start()
        let port = world.port
        let connection = try RawConnection(port: port, receiveTimeout: 10)
        defer { connection.close() }
        let refusal = try await onOwnThread { () -> String in
            connection.send("POST /api/echo/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "a", count: 10))
            return connection.readUntil("}").text  // the 401, at the head
        }
        #expect(refusal.hasPrefix("HTTP/1.1 401"), "\(refusal.prefix(60))")
        async let stopped: Void = world.fixture.stop()
        let (openDuringStop, closedAfterBody) = try await onOwnThread { () -> (Bool, Bool) in
            Thread.sleep(forTimeInterval: 0.5)  // the stop has asked every connection to close
            let open = !connection.isClosedByPeer
            connection.send(String(repeating: "b", count: 990))
            _ = connection.readAll()  // returns at the close
            return (open, connection.isClosedByPeer)
        }
        try await stopped
        #expect(openDuringStop, "closed while the refused body was still coming")
        #expect(closedAfterBody)
        try await world.upstream.stop()
    }

    @Test("the route's prefix itself, alone or with a query, reaches an upstream without a base path as / (never an empty request target)")
    func prefixItself() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await Self.fixture(upstream)
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let bare = try await fixture.send(.GET, "/api/echo", bearer: login.accessToken)
        #expect(bare.status == 200 && bare["path"] == "/", "status \(bare.status)")
        let query = try await fixture.send(.GET, "/api/echo?a=1", bearer: login.accessToken)
        #expect(query.status == 200 && query["path"] == "/" && query["query"] == "a=1", "status \(query.status)")
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("request bodies reach the upstream whole, with a length or chunked; the proxy's log line and metrics are kept")
    func bodiesStream() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await Self.fixture(upstream)
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let large = String(repeating: "0123456789", count: 6_000)
        let sized = try await fixture.send(.POST, "/api/echo/upload", bearer: login.accessToken, body: large)
        #expect(sized.status == 200)
        #expect(sized.json["body_bytes"] == .number(60_000))
        let port = fixture.gatewayPort
        let token = login.accessToken
        let chunked = try await onOwnThread { () -> [UInt8] in
            let connection = try RawConnection(port: port, receiveTimeout: 5)
            defer { connection.close() }
            connection.send(
                "POST /api/echo/chunked HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                    + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            return connection.readAll()
        }
        #expect(chunked.text.hasPrefix("HTTP/1.1 200"))
        #expect(chunked.text.contains("\"body_bytes\":11"), "\(chunked.text.suffix(200))")
        let lines = await fixture.log.lines(containing: "\"route\":\"/api/echo/**\"", "\"status\":200", atLeast: 2)
        #expect(lines.count >= 2)
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("Expect: 100-continue is answered 100 Continue once the request is admitted and never forwarded; a refused one gets its 401 and no 100; any other expectation is 417")
    func expectContinue() async throws {
        let world = try await World.start()
        let (fixture, targets, port, token) = (world.fixture, world.targets, world.port, world.token)
        let (interim, final) = try await onOwnThread { () -> (String, String) in
            let connection = try RawConnection(port: port, receiveTimeout: 5)
            defer { connection.close() }
            connection.send("POST /api/echo/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n")
            let interim = connection.readUntil("\r\n\r\n")
            connection.send("hello")
            return (interim.text, connection.readUntil("body_bytes").text)
        }
        #expect(interim == "HTTP/1.1 100 Continue\r\n\r\n", "the body is asked for before any answer: \(interim.prefix(80))")
        #expect(final.hasPrefix("HTTP/1.1 200"), "\(final.prefix(80))")
        let record = try StrictJSONReader().parseObject(Array((final.components(separatedBy: "\r\n\r\n").last ?? "").utf8))
        #expect(record["body_bytes"] == .number(5))
        guard case .array(let pairs)? = record["headers"] else { Issue.record("no headers recorded"); return }
        let names = pairs.compactMap { pair -> String? in
            guard case .array(let parts) = pair else { return nil }
            return parts.first?.stringValue?.lowercased()
        }
        #expect(!names.isEmpty && !names.contains("expect"), "the gateway answered the expectation; the upstream never sees it")

        let refused = try await onOwnThread { () -> String in
            let connection = try RawConnection(port: port, receiveTimeout: 5)
            defer { connection.close() }
            connection.send("POST /api/echo/upload HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
            return connection.readAll().text  // returns when the gateway closes
        }
        #expect(refused.hasPrefix("HTTP/1.1 401"), "\(refused.prefix(80))")
        #expect(!refused.contains("100 Continue"))
        #expect(refused.lowercased().contains("connection: close"), "the unasked body may still come: the connection ends after the answer")

        let other = try await fixture.send(.POST, "/api/echo/upload", bearer: token, headers: [("Expect", "something-else")], body: "hello")
        #expect(other.status == 417)
        #expect(other.error == "expectation_failed")
        #expect(targets.all == ["POST /upload"], "only the admitted request reached the upstream")
        try await world.stop()
    }

    @Test("an https:// upstream is proxied on the data plane over TLS with its certificate verified: trusted through gateway.upstream_ca_file it answers; without that CA it is 502 naming the certificate, and hears nothing")
    func httpsUpstream() async throws {
        let certificates = NSTemporaryDirectory() + "portcullis-upstream-tls-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: certificates) }
        let files = try TLSTests.makeCertificate(in: certificates)
        let serverTLS = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(files.certificatePath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: files.privateKeyPath, format: .pem)))
        let targets = RecordingUpstream.Targets()
        let upstream = try await RecordingUpstream.start(recording: targets, tls: serverTLS)
        let route = ProxyRoute(prefix: "/api/secure", upstream: "https://127.0.0.1:\(upstream.port)/base")

        let trusting = try await GatewayFixture {
            $0.routes = [route]
            $0.upstreamCAFile = files.certificatePath
        }
        try await trusting.addUser("alice")
        let login = try await trusting.login("alice")
        let answer = try await trusting.send(.OPTIONS, "/api/secure/things?x=1", bearer: login.accessToken)
        #expect(answer.status == 200, "\(answer.status) \(answer.raw.prefix(200))")
        #expect(answer["target"] == "/base/things?x=1")
        #expect(answer["authority"] == "127.0.0.1:\(upstream.port)")
        #expect(answer.receivedHeaders["x-portcullis-assertion"]?.count == 1)
        #expect(answer.receivedHeaders["x-forwarded-proto"] == ["http"])
        let lines = await trusting.log.lines(containing: "\"route\":\"/api/secure/**\"", "\"status\":200")
        #expect(lines.count == 1, "the data plane logged it")
        try await trusting.stop()

        let untrusting = try await GatewayFixture { $0.routes = [route] }
        try await untrusting.addUser("alice")
        let other = try await untrusting.login("alice")
        let refused = try await untrusting.send(.GET, "/api/secure/things", bearer: other.accessToken)
        #expect(refused.status == 502 && refused.error == "upstream_unavailable", "\(refused.status) \(refused.raw.prefix(200))")
        #expect(refused["message"]?.contains("TLS certificate") == true, "\(refused.raw.prefix(200))")
        #expect(await !untrusting.log.lines(containing: "upstream TLS handshake failed").isEmpty, "the operator is told why")
        try await untrusting.stop()
        #expect(targets.all == ["OPTIONS /base/things?x=1"], "the unverified upstream never received a request")
        try await upstream.stop()
    }

    @Test("X-Session-Id is vouched for from the local view; a logout here withdraws it at once, a revocation elsewhere within a second")
    func sessionView() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await Self.fixture(upstream)
        try await fixture.addUser("alice")
        let first = try await fixture.login("alice")
        let second = try await fixture.login("alice")
        let third = try await fixture.login("alice")
        for _ in 0..<2 {  // the second is answered from the view
            let named = try await fixture.send(.GET, "/api/echo/x", bearer: first.accessToken, headers: [("X-Session-Id", second.sessionID)])
            #expect(named.status == 200)
            let assertion = try #require(named.receivedHeaders["x-portcullis-assertion"]?.first)
            let claims = try StrictJSONReader().parseObject(try #require(Base64URL.decode(String(assertion.split(separator: ".")[1]))))
            #expect(claims["session_id"] == .string(second.sessionID))
        }
        // Logged out through this gateway: the view forgets at once.
        #expect(try await fixture.post("/api/auth/logout", bearer: second.accessToken, ["session_id": .string(second.sessionID)]).status == 204)
        let afterLogout = try await fixture.send(.GET, "/api/echo/x", bearer: first.accessToken, headers: [("X-Session-Id", second.sessionID)])
        #expect(afterLogout.status == 404)
        #expect(afterLogout.error == "session_not_found")
        // Revoked elsewhere (straight in the store): withdrawn once the watcher has asked the Runtime.
        #expect(try await fixture.send(.GET, "/api/echo/x", bearer: first.accessToken, headers: [("X-Session-Id", third.sessionID)]).status == 200)
        _ = try await fixture.state.revokeSession(id: third.sessionID, now: SystemClock().now())
        let revokedAt = ContinuousClock.now
        var status = 200
        while status == 200, ContinuousClock.now - revokedAt < .seconds(8) {
            try await Task.sleep(for: .milliseconds(50))
            status = try await fixture.send(.GET, "/api/echo/x", bearer: first.accessToken, headers: [("X-Session-Id", third.sessionID)]).status
        }
        #expect(status == 404)
        // One watcher tick is 0.5 s; the bound leaves room for a sanitized run beside the whole parallel suite.
        #expect(ContinuousClock.now - revokedAt < .seconds(5), "withdrawn \(ContinuousClock.now - revokedAt) after the revocation")
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("one assertion per caller, session and upstream is signed and reused; another session gets its own")
    func assertionsReused() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await Self.fixture(upstream)
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let other = try await fixture.login("alice")
        func assertion(_ headers: [(String, String)]) async throws -> String? {
            try await fixture.send(.GET, "/api/echo/x", bearer: login.accessToken, headers: headers).receivedHeaders["x-portcullis-assertion"]?.first
        }
        let plain = try await assertion([])
        #expect(plain != nil)
        #expect(try await assertion([]) == plain)
        let withSession = try await assertion([("X-Session-Id", login.sessionID)])
        #expect(withSession != nil && withSession != plain)
        #expect(try await assertion([("X-Session-Id", login.sessionID)]) == withSession)
        #expect(try await assertion([("X-Session-Id", other.sessionID)]) != withSession)
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("clients that send a routed request and reset the connection at once, 200 of them together (each needing a new upstream connection), leave the gateway serving: an upstream connection made after its client left goes back to the pool")
    func clientsGoneBeforeTheUpstreamConnects() async throws {
        let world = try await World.start()
        let (port, token) = (world.port, world.token)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask {
                    _ = try await onOwnThread {
                        let connection = try RawConnection(port: port, receiveTimeout: 5)
                        connection.send("GET /api/echo/gone-\(index) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n")
                        // A zero linger time: close sends RST at once, the gateway sees the client gone.
                        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                        setsockopt(connection.descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                        connection.close()
                    }
                }
            }
            try await group.waitForAll()
        }
        // Still serving, on a connection of its own.
        let answer = try await world.fixture.send(.GET, "/api/echo/after", bearer: token)
        #expect(answer.status == 200, "\(answer.raw)")
        try await world.stop()
    }
}
