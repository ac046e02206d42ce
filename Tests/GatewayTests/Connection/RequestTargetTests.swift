import DataPlane
import EdgeHTTP
import Foundation
import Gateway
import JOSE
import PortcullisTestSupport
import Testing

/// One normalised path for routing and forwarding (issue 20): every spelling an
/// attacker or a careless client sends, against upstreams that record the exact
/// request target they receive, on both proxy paths.
@Suite("Request targets: routes match the normalised path and upstreams receive it")
struct RequestTargetTests {
    /// One request written byte for byte on its own connection: status, headers and body of the answer.
    static func raw(
        _ port: Int, _ method: String, _ target: String, bearer: String?, extra: String = "", body: String = ""
    ) async throws -> (status: Int, head: String, body: String) {
        try await onOwnThread {
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            let authorization = bearer.map { "Authorization: Bearer \($0)\r\n" } ?? ""
            connection.send("\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(authorization)\(extra)Connection: close\r\n\r\n\(body)")
            let text = connection.readAll().text
            let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
            let parts = text.components(separatedBy: "\r\n\r\n")
            return (status, parts.first ?? "", parts.dropFirst().joined(separator: "\r\n\r\n"))
        }
    }

    /// A gateway with three routes to recording upstreams: `/api/v1` (no base path), `/api/v2` on a port
    /// whose digits continue `/api/v1`'s upstream port (the crash glued a prefix's last character onto
    /// the port), and `/api/billing` with a base path.
    struct Setup {
        let fixture: GatewayFixture
        let upstreams: [BackgroundServer]
        /// What the first upstream (`/api/v1`, `/api/billing`) and the second (`/api/v2`) received.
        let targets: RecordingUpstream.Targets
        let secondTargets: RecordingUpstream.Targets
        let token: String

        static func start() async throws -> Setup {
            let targets = RecordingUpstream.Targets()
            let secondTargets = RecordingUpstream.Targets()
            let first = try await RecordingUpstream.start(recording: targets)
            let second = try await RecordingUpstream.start(recording: secondTargets)
            let fixture = try await GatewayFixture {
                $0.routes = [
                    ProxyRoute(prefix: "/api/v1", upstream: "http://127.0.0.1:\(first.port)"),
                    ProxyRoute(prefix: "/api/v2", upstream: "http://127.0.0.1:\(second.port)"),
                    ProxyRoute(prefix: "/api/billing", upstream: "http://127.0.0.1:\(first.port)/base/"),
                ]
            }
            try await fixture.addUser("alice")
            let login = try await fixture.login("alice")
            fixture.remember(login.accessToken)
            return Setup(fixture: fixture, upstreams: [first, second], targets: targets, secondTargets: secondTargets, token: login.accessToken)
        }

        var received: [String] { targets.all + secondTargets.all }

        func stop() async throws {
            try await fixture.stop()
            for upstream in upstreams { try await upstream.stop() }
        }
    }

    /// (sent, the target the upstream must receive): proxied with the normalised path.
    static let forwarded: [(String, String)] = [
        ("/api/v1/x", "/x"), ("//api/v1/x", "/x"), ("/api//v1/x", "/x"), ("/api/v1//x//y", "/x/y"), ("///api/v1/x", "/x"),
        ("/api/v1/x/../y", "/y"), ("/api/v1/./x", "/x"), ("/api/v1/%2E%2e/v1/x", "/x"), ("/API/../api/v1/x", "/x"),
        ("/api/v1/%252e%252e/admin", "/%252e%252e/admin"), ("/api/v1/%61dmin", "/admin"), ("/api/v1/caf%c3%a9", "/caf%C3%A9"),
        ("/api/v1", "/"), ("/api/v1/", "/"), ("/api/v1/x/", "/x/"), ("/api/v1/x/..", "/"),
        ("//api/billing/x", "/base/x"), ("/api/billing/./x", "/base/x"), ("/api/billing", "/base"),
        ("/api/v1/x?a=1&access_token=T&b=2", "/x?a=1&b=2"), ("/api/v1/x?%61ccess_token=T&access%5Ftoken=T&ACCESS_TOKEN=T&c=3", "/x?c=3"),
        ("/api/v1/x?a=%2F..%2F&b=c+d", "/x?a=%2F..%2F&b=c+d"),
    ]

    @Test(
        "every spelling of a path under a route reaches that route's upstream with the normalised path, never another port or base, on both proxy paths",
        arguments: ["GET", "OPTIONS"])  // OPTIONS once took a second proxy path; both now take the data plane
    func forwardedNormalised(method: String) async throws {
        let setup = try await Setup.start()
        for (sent, expected) in Self.forwarded {
            let answer = try await Self.raw(setup.fixture.gatewayPort, method, sent, bearer: setup.token)
            #expect(answer.status == 200, "\(method) \(sent): \(answer.status) \(answer.body)")
            let object = try? StrictJSONReader().parseObject(Array(answer.body.utf8))
            #expect(object?["target"]?.stringValue == expected, "\(method) \(sent) reached the upstream as \(object?["target"]?.stringValue ?? "nothing")")
        }
        #expect(setup.targets.all.count == Self.forwarded.count)
        #expect(setup.secondTargets.all.isEmpty)
        // The second upstream (the port a glued digit once pointed at) sees only what is meant for it.
        let second = try await Self.raw(setup.fixture.gatewayPort, method, "//api/v2/internal", bearer: setup.token)
        #expect(second.status == 200)
        #expect(setup.secondTargets.all == ["\(method) /internal"])
        #expect(await !setup.fixture.log.lines(containing: "\"status\":200").isEmpty)
        try await setup.stop()
    }

    /// (sent, status): refused (400) or routed nowhere (404); the upstreams receive nothing.
    static let refused: [(String, Int)] = [
        ("/api/v1/../admin", 404), ("/api/v1/../../etc/passwd", 404), ("/api/v1/../../../etc/passwd", 400), ("/api/v1/%2E%2E/%2E%2E/admin", 404), ("/api/v1/%2e%2e/admin", 404),
        ("/api/v1/.%2e/admin", 404), ("/api/v1/%2e./admin", 404), ("/api/v1/x/../../admin", 404), ("/api/v1/..%2fadmin", 400),
        ("/api/v1/..%2Fadmin", 400), ("/api/v1/..%5cadmin", 400), ("/api/v1/x%5C..%5Cadmin", 400), ("/api/v1/..;/admin", 400),
        ("/api/v1/%2e%2e;x/admin", 400), ("/api/v1/x%00", 400), ("/api/v1/x%zz", 400), ("/./.././", 400), ("/..", 400), ("/api/v1x", 404),
        ("/api/v1/%2e%2e%2f%2e%2e%2fadmin", 400), ("/api/v1/%%32%65", 400),
        // A query byte that must be percent-encoded (U+037E is canonically `;`: a server that normalises
        // raw UTF-8 before splitting would read an access_token parameter the gateway never saw).
        ("/api/v1/x?a=caf\u{e9}", 400), ("/api/v1/x?a=1&access_token\u{37E}=T", 400), ("/api/v1/x?a=\u{7f}", 400),
    ]

    @Test(
        "paths that leave their route or cannot be routed safely are 400 or 404 with the reason, and no upstream hears of them, on both proxy paths",
        arguments: ["GET", "OPTIONS"])
    func refusedNeverForwarded(method: String) async throws {
        let setup = try await Setup.start()
        for (sent, status) in Self.refused {
            let answer = try await Self.raw(setup.fixture.gatewayPort, method, sent, bearer: setup.token)
            #expect(answer.status == status, "\(method) \(sent): \(answer.status) \(answer.body)")
            let object = try? StrictJSONReader().parseObject(Array(answer.body.utf8))
            #expect(object?["error"]?.stringValue == (status == 400 ? "invalid_request" : "not_found"), "\(method) \(sent): \(answer.body)")
            #expect(object?["message"]?.stringValue?.isEmpty == false)
        }
        #expect(setup.received.isEmpty, "an upstream received \(setup.received)")
        try await setup.stop()
    }

    @Test("a raw backslash in the target is answered 400 invalid_request, not a dropped connection")
    func rawBackslash() async throws {
        let setup = try await Setup.start()
        for sent in ["/api/v1/..\\admin", "/api/v1\\x", "/\\api/v1/x"] {
            let answer = try await Self.raw(setup.fixture.gatewayPort, "GET", sent, bearer: setup.token)
            #expect(answer.status == 400, "GET \(sent): \(answer.status) \(answer.head)")
            #expect(answer.body.contains("invalid_request"))
        }
        #expect(setup.received.isEmpty)
        try await setup.stop()
    }

    @Test("the gateway's own API routes match the normalised path too")
    func apiRoutesNormalised() async throws {
        let setup = try await Setup.start()
        for path in ["//healthz", "/x/../healthz", "/%68ealthz", "/.well-known//../healthz"] {
            let answer = try await Self.raw(setup.fixture.gatewayPort, "GET", path, bearer: nil)
            #expect(answer.status == 200 && answer.body.contains("\"ok\""), "GET \(path): \(answer.status)")
        }
        let escaped = try await Self.raw(setup.fixture.gatewayPort, "GET", "/..%2fhealthz", bearer: nil)
        #expect(escaped.status == 400)
        try await setup.stop()
    }

    @Test("a very long path is normalised and forwarded whole, or refused as too large, never cut")
    func longPath() async throws {
        let setup = try await Setup.start()
        let segments = Array(repeating: "segment", count: 1_000).joined(separator: "/")  // 8 KB: under the 16 KB head limit
        let answer = try await Self.raw(setup.fixture.gatewayPort, "GET", "/api/v1//" + segments + "/./x/..", bearer: setup.token)
        #expect(answer.status == 200)
        let object = try? StrictJSONReader().parseObject(Array(answer.body.utf8))
        #expect(object?["target"]?.stringValue == "/" + segments + "/")
        let huge = "/api/v1/" + String(repeating: "a/", count: 20_000)
        let tooLarge = try await Self.raw(setup.fixture.gatewayPort, "GET", huge, bearer: setup.token)
        #expect(tooLarge.status == 431, "\(tooLarge.status)")
        #expect(setup.targets.all.count == 1)
        try await setup.stop()
    }

    @Test("methods outside the forwarded list are 405 with Allow on a route, and never reach the upstream")
    func methods() async throws {
        let setup = try await Setup.start()
        for method in ["TRACE", "PROPFIND", "MKCOL", "LINK"] {
            let answer = try await Self.raw(setup.fixture.gatewayPort, method, "/api/v1/x", bearer: setup.token)
            #expect(answer.status == 405, "\(method): \(answer.status) \(answer.body)")
            #expect(answer.head.lowercased().contains("allow: delete, get, head, options, patch, post, put"), "\(answer.head)")
            #expect(answer.body.contains("method_not_allowed"), "\(method): \(answer.head) \(answer.body)")
        }
        // CONNECT is refused before routing and its connection closed (an answer to CONNECT carries no body,
        // and the parser reads nothing after it): a later request on it is never served.
        let connect = try await Self.raw(
            setup.fixture.gatewayPort, "CONNECT", "/api/v1/x", bearer: setup.token, body: "GET /api/v1/after HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(connect.status == 400 && connect.head.lowercased().contains("connection: close"), "\(connect.head)")
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            #expect(try await Self.raw(setup.fixture.gatewayPort, method, "/api/v1/x", bearer: setup.token, extra: "Content-Length: 0\r\n").status == 200, "\(method)")
        }
        #expect(setup.received.count == 5, "\(setup.received)")
        try await setup.stop()
    }

    @Test("a request transfer coding other than chunked is 400 on a route and on the API; chunked alone still works")
    func transferCodings() async throws {
        let setup = try await Setup.start()
        for coding in ["gzip, chunked", "chunked, chunked", "deflate,chunked", "identity, chunked"] {
            for path in ["/api/v1/x", "/api/auth/login"] {
                let answer = try await Self.raw(
                    setup.fixture.gatewayPort, "POST", path, bearer: setup.token, extra: "Transfer-Encoding: \(coding)\r\n", body: "5\r\nhello\r\n0\r\n\r\n")
                #expect(answer.status == 400, "\(coding) on \(path): \(answer.status) \(answer.body)")
            }
        }
        let chunked = try await Self.raw(
            setup.fixture.gatewayPort, "POST", "/api/v1/x", bearer: setup.token, extra: "Transfer-Encoding: Chunked\r\n", body: "5\r\nhello\r\n0\r\n\r\n")
        #expect(chunked.status == 200 && chunked.body.contains("\"body_bytes\":5"), "\(chunked.status) \(chunked.body)")
        #expect(setup.targets.all == ["POST /x"])
        try await setup.stop()
    }

    @Test("an absolute-form target is routed and forwarded as its path; a request with two Host headers is 400 on a route and on the API")
    func absoluteFormAndHosts() async throws {
        let setup = try await Setup.start()
        let port = setup.fixture.gatewayPort
        for (sent, expected) in [("http://127.0.0.1/api/v1/x/../y?q=1", "GET /y?q=1"), ("HTTPS://example.com/api/billing//z", "GET /base/z")] {
            let answer = try await Self.raw(port, "GET", sent, bearer: setup.token)
            #expect(answer.status == 200, "\(sent): \(answer.status) \(answer.body.prefix(120))")
            #expect(setup.received.last == expected, "\(sent) reached \(setup.received.last ?? "nothing")")
        }
        let heard = setup.received.count
        for path in ["/api/v1/x", "/healthz"] {
            let answer = try await Self.raw(port, "GET", path, bearer: setup.token, extra: "Host: other.example\r\n")
            #expect(answer.status == 400 && answer.body.contains("\"invalid_request\"") && answer.body.contains("Host"), "\(path): \(answer.status) \(answer.body)")
        }
        #expect(setup.received.count == heard, "no upstream heard a request with two Host headers")
        try await setup.stop()
    }

    @Test("a refused request after an accepted one on the same connection is answered in turn, then the connection closes")
    func refusalInTurn() async throws {
        let setup = try await Setup.start()
        let token = setup.token
        let port = setup.fixture.gatewayPort
        let bytes = try await onOwnThread { () -> [UInt8] in
            let connection = try RawConnection(port: port, receiveTimeout: 5)
            defer { connection.close() }
            connection.send(
                "GET /api/v1/first HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n" + "GET /api/v1/../../../x HTTP/1.1\r\nHost: x\r\n\r\n"
                    + "GET /api/v1/never HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n")
            return connection.readAll()
        }
        let answers = DataPlaneTests.answers(bytes, count: 3)
        #expect(answers.map(\.status) == [200, 400], "\(answers.map(\.status))")
        #expect(setup.targets.all == ["GET /first"])
        try await setup.stop()
    }
}

@Suite("gateway.routes may not cover the gateway's own paths")
struct ReservedRouteTests {
    @Test("a route prefix over, or under, any path the router answers itself is refused, naming both")
    func everyBuiltInPathIsReserved() async throws {
        let fixture = try await GatewayFixture { $0.demo = .on }
        let router = GatewayServer.makeRouter(services: fixture.server.services)
        for route in router.routes {
            // The literal part of the route's path, and the path itself with its captures filled in.
            let literal = route.path.description.split(separator: "/").prefix { !$0.hasPrefix(":") && !$0.hasPrefix("*") }
            for prefix in ["/" + literal.joined(separator: "/"), "/" + literal.prefix(1).joined(separator: "/")] {
                let problem = ProxyRoute(prefix: prefix, upstream: "http://127.0.0.1:9000").problem
                #expect(problem?.contains("overlaps the gateway's own") == true, "\(prefix) (for \(route.path)) was accepted")
            }
        }
        try await fixture.stop()
    }

    @Test(
        "routes that take the gateway's paths, or that no normalised path could reach, are refused; ordinary ones and the catch-all / (under which the gateway's paths win) are accepted",
        arguments: [
            ("/", true), ("/api", false), ("/api/auth", false), ("/api/session/x", false), ("/api/runtime", false), ("/.well-known/acme", false),
            ("/demo/x", false), ("/client", false), ("/healthz", false), ("/api/./v1", false), ("/api//v1", false), ("/api/v1/..", false),
            ("/api/%76%31", false), ("/api/v1", true), ("/api/v1/", true), ("/api/sessions", true), ("/apix", true), ("/billing", true),
        ])
    func prefixes(_ pair: (String, Bool)) {
        let problem = ProxyRoute(prefix: pair.0, upstream: "http://127.0.0.1:9000").problem
        #expect((problem == nil) == pair.1, "\(pair.0): \(problem ?? "accepted")")
    }

    @Test("upstreams carry no credentials, query or fragment", arguments: [
        ("http://127.0.0.1:9000/base", true), ("https://billing.internal", true), ("http://user:pw@127.0.0.1:9000", false),
        ("http://127.0.0.1:9000/?a=1", false), ("http://127.0.0.1:9000/#x", false), ("ftp://127.0.0.1", false), ("http://", false),
    ])
    func upstreams(_ pair: (String, Bool)) {
        let problem = ProxyRoute(prefix: "/api/v1", upstream: pair.0).problem
        #expect((problem == nil) == pair.1, "\(pair.0): \(problem ?? "accepted")")
    }
}

@Suite("Pipelined requests are bounded per connection", .serialized)
struct PipeliningBoundTests {
    static let port = 18_492

    /// Resident memory of a process, in KB (`VmRSS` in /proc).
    static func residentKB(_ pid: pid_t) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    @Test("a client that pipelines requests and streams a body without reading the answers is not read further: the gateway's memory stays flat")
    func pipelinedWithoutReading() async throws {
        let directory = NSTemporaryDirectory() + "portcullis-pipeline-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = try KeyDirectory(path: directory + "/keys").generate(algorithm: .es256)
        // A route makes the data plane part of every connection (the attack needs no upstream to answer).
        try Data("gateway:\n  routes: [\"/api/v1=http://127.0.0.1:9\"]\n".utf8).write(to: URL(fileURLWithPath: directory + "/pipeline.yaml"))
        let serve = try PortcullisProcess(
            ["serve", "--config", "pipeline.yaml"], directory: directory,
            environment: ["GATEWAY_PORT": String(Self.port), "ADMIN_ENABLED": "false", "RUNTIME_PORT": "0"], name: "serve")
        defer { serve.terminate() }
        try await serve.waitUntilReady("http://127.0.0.1:\(Self.port)/readyz")
        let pid = serve.child.pid
        let before = Self.residentKB(pid)

        let port = Self.port
        let accepted = try await onOwnThread { () -> Int in
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            var timeout = timeval(tv_sec: 3, tv_usec: 0)
            setsockopt(connection.descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var head = String(repeating: "GET /.well-known/openapi.yaml HTTP/1.1\r\nHost: x\r\n\r\n", count: 400)
            head += "POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 600000000\r\n\r\n"
            var sent = 0
            var chunk = Array(head.utf8)
            let filler = [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 16)
            // Stops when the gateway stops reading (a write blocks past the timeout) or after 200 MB.
            while sent < 200 << 20 {
                let count = chunk.withUnsafeBytes { write(connection.descriptor, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                sent += count
                chunk = filler
            }
            return sent
        }
        let after = Self.residentKB(pid)
        #expect(accepted < 32 << 20, "the gateway kept reading: \(accepted >> 20) MB accepted on one connection")
        #expect(after - before < 64 << 10, "RSS grew from \(before >> 10) MB to \(after >> 10) MB")
        // Still serving others.
        let (_, status) = try await httpGet("http://127.0.0.1:\(Self.port)/healthz")
        #expect(status == 200)
    }
}
