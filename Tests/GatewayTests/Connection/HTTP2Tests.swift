import DataPlane
import EdgeHTTP
import Foundation
import Gateway
import JOSE
import NIOHTTP1
import PortcullisTestSupport
import Testing

/// What curl made of one exchange: the answer, and the HTTP version it spoke ("1.1", "2").
struct CurlExchange {
    let answer: Answer
    let version: String
}

/// curl, the real client, for one request: `-D -` prints the head before the body, `-w` the status and version after.
func curl(_ arguments: [String]) async throws -> CurlExchange {
    let run = try await onOwnThread {
        try ChildProcess.run("/usr/bin/curl", ["-s", "-S", "--max-time", "20", "-D", "-", "-w", "\n%{http_code} %{http_version}"] + arguments, within: 30)
    }
    // The arguments as the failure shows them: never a token.
    let shown = arguments.map { $0.hasPrefix("Authorization: Bearer ") ? "Authorization: Bearer <redacted>" : $0 }.joined(separator: " ")
    #expect(run.status == 0, "curl \(shown): \(run.output.suffix(400))")
    let trailer = run.output.split(separator: "\n", omittingEmptySubsequences: false).last.map(String.init) ?? ""
    let parts = trailer.split(separator: " ")
    let rest = run.output.dropLast(trailer.count + 1)
    let headEnd = rest.range(of: "\r\n\r\n")
    var headers = HTTPHeaders()
    for line in (headEnd.map { rest[..<$0.lowerBound] } ?? "").split(separator: "\r\n").dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers.add(name: String(line[..<colon]), value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }
    let body = headEnd.map { String(rest[$0.upperBound...]) } ?? ""
    let json = (try? StrictJSONReader().parseObject(Array(body.utf8))) ?? JSONObject()
    return CurlExchange(
        answer: Answer(status: parts.first.flatMap { Int($0) } ?? 0, headers: headers, json: json, raw: body),
        version: parts.count > 1 ? String(parts[1]) : "")
}

@Suite("HTTP/2 at the edge: every stream through the same decisions as an HTTP/1.1 request")
struct HTTP2Tests {
    static let password = "correct horse battery"

    /// A gateway with `gateway.tls` (a self-signed certificate for 127.0.0.1) and the route `/open`
    /// (`auth: none`) to a recording upstream; `body` gets it and the certificate's files.
    static func withTLSGateway(_ body: (GatewayFixture, TLSFiles) async throws -> Void) async throws {
        let certificates = NSTemporaryDirectory() + "portcullis-tls-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: certificates) }
        let files = try TLSTests.makeCertificate(in: certificates)
        let upstream = try await RecordingUpstream.start()
        let fixture = try await GatewayFixture {
            $0.tls = files
            $0.routes = [ProxyRoute(prefix: "/open", upstream: "http://127.0.0.1:\(upstream.port)", requiresToken: false)]
        }
        try await body(fixture, files)
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("over h2c with prior knowledge, the API and a route answer as over HTTP/1.1: the same statuses and error codes, the upstream reached with the same fields and the body whole")
    func priorKnowledgeServesLikeHTTP1() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await GatewayFixture {
            $0.routes = [ProxyRoute(prefix: "/api/echo", upstream: "http://127.0.0.1:\(upstream.port)")]
            $0.maximumBodyBytes = 400_000
        }
        try await fixture.addUser("alice")
        let base = fixture.baseURL
        let tooLarge = NSTemporaryDirectory() + "portcullis-h2-large-" + UUID().uuidString
        try String(repeating: "y", count: 500_000).write(toFile: tooLarge, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: tooLarge) }
        let body = String(repeating: "x", count: 300_000)
        let bodyFile = NSTemporaryDirectory() + "portcullis-h2-body-" + UUID().uuidString
        try body.write(toFile: bodyFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: bodyFile) }
        for flag in ["--http1.1", "--http2-prior-knowledge"] {
            let expectedVersion = flag == "--http1.1" ? "1.1" : "2"
            let health = try await curl([flag, base + "/healthz"])
            #expect(health.version == expectedVersion && health.answer.status == 200)
            let login = try await curl([
                flag, "-X", "POST", base + "/api/auth/login", "-H", "Content-Type: application/json",
                "-d", #"{"username":"alice","password":"\#(Self.password)"}"#,
            ])
            #expect(login.version == expectedVersion && login.answer.status == 200, "\(flag): \(login.answer.raw)")
            let token = try #require(login.answer["access_token"])
            fixture.remember(token)

            let missing = try await curl([flag, base + "/api/echo/hello"])
            #expect(missing.answer.status == 401 && missing.answer.error == "token_missing", "\(flag): \(missing.answer.raw)")
            let bad = try await curl([flag, base + "/api/echo/hello", "-H", "Authorization: Bearer not.a.token"])
            #expect(bad.answer.status == 401 && bad.answer.error == "token_invalid", "\(flag): \(bad.answer.raw)")

            let echoed = try await curl([flag, base + "/api/echo/a/../hello?x=1&access_token=secret", "-H", "Authorization: Bearer " + token, "--path-as-is"])
            #expect(echoed.version == expectedVersion && echoed.answer.status == 200, "\(flag): \(echoed.answer.raw)")
            #expect(echoed.answer["path"] == "/hello", "the path normalised, the prefix stripped: \(echoed.answer.raw)")
            #expect(echoed.answer["query"] == "x=1", "access_token never travels upstream")
            let received = echoed.answer.receivedHeaders
            #expect(received["authorization"] == nil, "the token never reaches the upstream")
            #expect(received["x-portcullis-assertion"]?.count == 1)
            #expect(received["x-forwarded-for"] == ["127.0.0.1"])
            #expect(received["x-forwarded-host"] == ["127.0.0.1:\(fixture.gatewayPort)"], "the :authority, as Host was")
            #expect(echoed.answer.headers.first(name: "x-request-id") != nil)
            #expect(echoed.answer.headers.first(name: "x-upstream") == "recording")

            let posted = try await curl([
                flag, "-X", "POST", base + "/api/echo/upload", "-H", "Authorization: Bearer " + token, "-H", "Content-Type: text/plain",
                "--data-binary", "@" + bodyFile,
            ])
            #expect(posted.answer.status == 200 && posted.answer.json["body_bytes"]?.numberValue == 300_000, "\(flag): \(posted.answer.raw.prefix(300))")
            // Over the limit: the 413 reaches the client, whose upload is stopped (HTTP/2: RST_STREAM NO_ERROR, not CANCEL).
            let refused = try await curl([
                flag, "-X", "POST", base + "/api/echo/upload", "-H", "Authorization: Bearer " + token, "-H", "Content-Type: text/plain",
                "--data-binary", "@" + tooLarge,
            ])
            #expect(refused.answer.status == 413 && refused.answer.error == "payload_too_large", "\(flag): \(refused.answer.raw.prefix(300))")
        }
        // The access log names the protocol, for the data plane's requests and the API's alike.
        let logins = await fixture.log.lines(containing: "/api/auth/login")
        for version in ["HTTP/1.1", "HTTP/2"] {
            #expect(await !fixture.log.lines(containing: #""protocol":"\#(version)""#, #""route":"/api/echo/**""#).isEmpty, "\(version) on a route")
            #expect(logins.contains { $0.contains(#""protocol":"\#(version)""#) }, "\(version) on the API: \(logins)")
        }
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("many streams at once on one HTTP/2 connection (ALPN h2), answered out of order by the upstream: each answer reaches its own stream")
    func concurrentStreamsEachGetTheirAnswer() async throws {
        try await Self.withTLSGateway { fixture, files in
            let directory = NSTemporaryDirectory() + "portcullis-h2-streams-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            // curl 7.88 reuses a prior-knowledge connection wrongly (against nginx too): ALPN here.
            var arguments = ["-s", "-S", "--max-time", "30", "--http2", "--cacert", files.certificatePath, "--parallel", "--parallel-max", "20",
                             "-w", "%{http_version} %{num_connects}\n"]
            for index in 0..<20 {
                // The first asked answers last.
                arguments += ["-o", "\(directory)/\(index).json", "https://127.0.0.1:\(fixture.gatewayPort)/open/item?n=\(index)&delay_ms=\((20 - index) * 15)"]
            }
            let allArguments = arguments
            let run = try await onOwnThread { try ChildProcess.run("/usr/bin/curl", allArguments, within: 40) }
            #expect(run.status == 0, "\(run.output)")
            let lines = run.output.split(separator: "\n").filter { $0.hasPrefix("2 ") }
            #expect(lines.count == 20 && lines.filter { $0 == "2 1" }.count == 1, "all twenty over HTTP/2, on one connection: \(run.output)")
            for index in 0..<20 {
                let text = try String(contentsOfFile: "\(directory)/\(index).json", encoding: .utf8)
                let json = try StrictJSONReader().parseObject(Array(text.utf8))
                #expect(json["query"]?.stringValue == "n=\(index)&delay_ms=\((20 - index) * 15)", "stream \(index) got \(text.prefix(200))")
            }
        }
    }

    @Test("with gateway.tls, ALPN offers h2 then http/1.1: curl --http2 speaks HTTP/2, --http1.1 HTTP/1.1, and both reach the API and a route")
    func tlsNegotiatesByALPN() async throws {
        try await Self.withTLSGateway { fixture, files in
            let base = "https://127.0.0.1:\(fixture.gatewayPort)"
            for (flag, version) in [("--http2", "2"), ("--http1.1", "1.1")] {
                let health = try await curl([flag, "--cacert", files.certificatePath, base + "/healthz"])
                #expect(health.version == version && health.answer.status == 200, "\(flag)")
                let routed = try await curl([flag, "--cacert", files.certificatePath, base + "/open/x"])
                #expect(routed.version == version && routed.answer.status == 200 && routed.answer["path"] == "/x", "\(flag): \(routed.answer.raw)")
                #expect(routed.answer.receivedHeaders["x-forwarded-proto"] == ["https"])
            }
        }
    }

    @Test("gateway.http2 false: the HTTP/2 preface is answered as HTTP/1.1 (400), never served as HTTP/2; HTTP/1.1 works")
    func http2Off() async throws {
        let fixture = try await GatewayFixture { $0.http2 = false }
        let port = fixture.gatewayPort
        let answer = try await onOwnThread { () -> String in
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            connection.send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            return connection.readAll().text
        }
        #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer.prefix(200))")
        #expect(try await curl(["--http1.1", fixture.baseURL + "/healthz"]).answer.status == 200)
        try await fixture.stop()
    }

    @Test("a client that sends the HTTP/2 preface up to its first blank line and stops is closed at limits.request_head_timeout_seconds, not held")
    func stalledPrefaceIsClosed() async throws {
        let fixture = try await GatewayFixture { $0.limits.requestHeadTimeout = 1 }
        let port = fixture.gatewayPort
        let seconds = try await onOwnThread { () -> Double in
            let connection = try RawConnection(port: port, receiveTimeout: 20)
            defer { connection.close() }
            let started = Date()
            connection.send("PRI * HTTP/2.0\r\n\r\n")
            _ = connection.readAll()
            return Date().timeIntervalSince(started)
        }
        #expect(seconds >= 0.9 && seconds < TimeBounds.seconds(5), "closed after \(seconds) s")
        try await fixture.stop()
    }

    @Test("Upgrade: h2c (deprecated by RFC 9113) is answered over HTTP/1.1 as a plain request, never a 101 and never a silent close")
    func upgradeToH2CIsAnsweredInHTTP1() async throws {
        let fixture = try await GatewayFixture()
        let port = fixture.gatewayPort
        let answer = try await onOwnThread { () -> String in
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            connection.send(
                "GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n")
            return connection.readAll().text
        }
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
        #expect(answer.contains(#"{"status":"ok"}"#))
        try await fixture.stop()
    }

    @Test("a route bound to a host is chosen by the stream's :authority, as by Host over HTTP/1.1")
    func hostRoutesByAuthority() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await GatewayFixture {
            var route = ProxyRoute(prefix: "/", upstream: "http://127.0.0.1:\(upstream.port)", requiresToken: false)
            route.host = RouteHost(configured: "app.test")
            $0.routes = [route]
        }
        let port = fixture.gatewayPort
        let routed = try await curl(["--http2-prior-knowledge", "--resolve", "app.test:\(port):127.0.0.1", "http://app.test:\(port)/page"])
        #expect(routed.version == "2" && routed.answer.status == 200 && routed.answer["path"] == "/page", "\(routed.answer.raw)")
        let gateway = try await curl(["--http2-prior-knowledge", "http://127.0.0.1:\(port)/page"])
        #expect(gateway.answer.status == 404, "another authority is not the route's: \(gateway.answer.raw)")
        try await fixture.stop()
        try await upstream.stop()
    }
}
