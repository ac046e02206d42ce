import DataPlane
import EdgeHTTP
import Foundation
import Gateway
import PortcullisTestSupport
import Testing

/// The data plane relays an upstream's answer as bytes with its own framing: what reaches the
/// client for each framing the upstream uses, and what is refused, through the real gateway.
@Suite("Upstream answers reach the client framed for it, or are refused 502")
struct UpstreamFramingTests {
    static let chunkedBody = "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"
    static let answers: [String: ScriptedUpstream.Answer] = [
        "/early": .init(
            "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Request-Id: upstream-id\r\nConnection: X-Secret\r\nX-Secret: s\r\n"
                + "Keep-Alive: timeout=5\r\nX-Kept: k\r\n\r\n" + chunkedBody),
        "/sized": .init("HTTP/1.1 200 OK\r\nContent-Length: 9\r\nContent-Type: text/plain\r\n\r\nsized-end"),
        "/until-close": .init("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil-the-close-end", close: true),
        "/head": .init("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"),
        "/folded": .init("HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n"),
        "/two-lengths": .init("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde"),
        "/cut-chunked": .init("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", reset: true),
        "/cut-until-close": .init("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npartial", reset: true),
        "/cut-sized": .init("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", close: true),
        "/echoes": .init(
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Portcullis-Assertion: eyJ.echoed.sig\r\nX_Portcullis_User: u\r\nX-Forwarded-For: 10.0.0.1\r\n"
                + "X-Auth-Request-User: alice\r\nX-Session-Id: ses_x\r\nX-Kept: k\r\nVary: Accept-Encoding\r\n\r\nok"),
        "/vary-origin": .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nVary: accept-encoding, ORIGIN\r\n\r\nok"),
        "/big": .init("HTTP/1.1 200 OK\r\nContent-Length: 300000\r\n\r\n" + String(repeating: "0123456789", count: 30_000)),
    ]

    struct World {
        let fixture: GatewayFixture
        let upstream: ScriptedUpstream
        let token: String

        static func start(_ configure: @escaping (inout GatewayConfiguration) -> Void = { _ in }) async throws -> World {
            let upstream = try ScriptedUpstream(answers: UpstreamFramingTests.answers)
            let fixture = try await GatewayFixture {
                $0.routes = [ProxyRoute(prefix: "/api/s", upstream: "http://127.0.0.1:\(upstream.port)")]
                configure(&$0)
            }
            try await fixture.addUser("alice")
            let login = try await fixture.login("alice")
            return World(fixture: fixture, upstream: upstream, token: login.accessToken)
        }

        func request(_ path: String, method: String = "GET", version: String = "1.1", close: Bool = false) -> String {
            "\(method) /api/s\(path) HTTP/\(version)\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\(close ? "Connection: close\r\n" : "")\r\n"
        }

        func stop() async throws {
            try await fixture.stop()
            upstream.stop()
        }
    }

    /// The head of an answer (through its blank line) and what follows it.
    static func split(_ text: String) -> (head: String, rest: String) {
        guard let end = text.range(of: "\r\n\r\n") else { return (text, "") }
        return (String(text[..<end.upperBound]), String(text[end.upperBound...]))
    }

    /// A chunked body decoded; `nil` when it is not valid chunked framing ending in the last chunk.
    static func dechunk(_ text: String) -> String? {
        var rest = Substring(text)
        var body = ""
        while let lineEnd = rest.range(of: "\r\n") {
            guard let size = Int(rest[..<lineEnd.lowerBound], radix: 16) else { return nil }
            rest = rest[lineEnd.upperBound...]
            if size == 0 { return rest == "\r\n" ? body : nil }
            guard rest.utf8.count >= size + 2 else { return nil }
            let dataEnd = rest.utf8.index(rest.startIndex, offsetBy: size)
            body += rest[..<dataEnd]
            guard rest[dataEnd...].hasPrefix("\r\n") else { return nil }
            rest = rest[rest.utf8.index(dataEnd, offsetBy: 2)...]
        }
        return nil
    }

    @Test("a chunked answer after 103 Early Hints reaches an HTTP/1.1 client chunked, without the 103, hop-by-hop fields or the upstream's request id; the upstream connection is reused")
    func chunkedAnswer() async throws {
        let world = try await World.start()
        let (first, second) = try await onOwnThread { [world] () -> (String, String) in
            let connection = try RawConnection(port: world.fixture.gatewayPort, receiveTimeout: 5)
            defer { connection.close() }
            connection.send(world.request("/early"))
            let first = connection.readUntil("0\r\n\r\n").text
            connection.send(world.request("/sized"))
            return (first, connection.readUntil("sized-end").text)
        }
        let (head, body) = Self.split(first)
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(head)")
        #expect(!first.contains("103"))
        #expect(head.contains("Transfer-Encoding: chunked\r\n"))
        #expect(head.contains("X-Kept: k\r\n"))
        for dropped in ["X-Secret", "Keep-Alive", "upstream-id", "Connection: X-Secret"] { #expect(!head.contains(dropped), "\(dropped)") }
        #expect(head.components(separatedBy: "X-Request-Id: ").count == 2)
        #expect(Self.dechunk(body) == "hello, world", "\(body.debugDescription)")
        #expect(second.hasPrefix("HTTP/1.1 200 OK\r\n") && second.contains("Content-Length: 9\r\n") && second.hasSuffix("\r\n\r\nsized-end"))
        #expect(world.upstream.connectionsAccepted == 1)
        // The request head the gateway wrote as bytes: request line, Host, the assertion, no credential.
        let heard = try #require(world.upstream.requestHeads.first)
        #expect(heard.hasPrefix("GET /early HTTP/1.1\r\n"), "\(heard.prefix(40))")
        #expect(heard.contains("\r\nHost: 127.0.0.1:\(world.upstream.port)\r\n") && heard.contains("\r\nX-Portcullis-Assertion: "))
        #expect(!heard.lowercased().contains("authorization") && heard.hasSuffix("\r\n\r\n"))
        try await world.stop()
    }

    @Test("an answer read until the upstream closes reaches an HTTP/1.1 client chunked (its connection kept), an HTTP/1.0 client as it came with Connection: close")
    func untilCloseAnswer() async throws {
        let world = try await World.start()
        let (chunked, following, plain, plainClosed) = try await onOwnThread { [world] () -> (String, String, String, Bool) in
            let connection = try RawConnection(port: world.fixture.gatewayPort, receiveTimeout: 5)
            defer { connection.close() }
            connection.send(world.request("/until-close"))
            let chunked = connection.readUntil("0\r\n\r\n").text
            connection.send(world.request("/sized"))
            let following = connection.readUntil("sized-end").text
            let old = try RawConnection(port: world.fixture.gatewayPort, receiveTimeout: 5)
            defer { old.close() }
            old.send(world.request("/until-close", version: "1.0"))
            let plain = old.readAll().text
            return (chunked, following, plain, old.isClosedByPeer)
        }
        #expect(Self.dechunk(Self.split(chunked).rest) == "until-the-close-end", "\(chunked.debugDescription)")
        #expect(following.hasSuffix("sized-end"))
        let (head, body) = Self.split(plain)
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n") && head.contains("Connection: close\r\n") && !head.contains("Transfer-Encoding"), "\(head)")
        #expect(body == "until-the-close-end")
        #expect(plainClosed)
        try await world.stop()
    }

    @Test("an answer to HEAD has no body and keeps the upstream's Content-Length; a large body arrives whole")
    func headAndLargeBody() async throws {
        let world = try await World.start()
        let (head, big) = try await onOwnThread { [world] () -> (String, [UInt8]) in
            let connection = try RawConnection(port: world.fixture.gatewayPort, receiveTimeout: 5)
            defer { connection.close() }
            connection.send(world.request("/head", method: "HEAD"))
            let head = connection.readUntil("\r\n\r\n").text
            connection.send(world.request("/big", close: true))
            return (head, connection.readAll())
        }
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n") && head.contains("Content-Length: 1234\r\n") && head.hasSuffix("\r\n\r\n"))
        let (bigHead, bigBody) = Self.split(big.text)
        #expect(bigHead.contains("Content-Length: 300000\r\n") && bigHead.contains("Connection: close\r\n"))
        #expect(bigBody == String(repeating: "0123456789", count: 30_000), "\(bigBody.utf8.count) bytes")
        try await world.stop()
    }

    @Test("an answer that could be read two ways (a folded field, two lengths) is 502 upstream_unavailable, and its connection is not used again", arguments: ["/folded", "/two-lengths"])
    func malformedAnswer(path: String) async throws {
        let world = try await World.start()
        let refused = try await world.fixture.send(.GET, "/api/s\(path)", bearer: world.token)
        #expect(refused.status == 502)
        #expect(refused.error == "upstream_unavailable")
        let next = try await world.fixture.send(.GET, "/api/s/sized", bearer: world.token)
        #expect(next.status == 200)
        #expect(world.upstream.connectionsAccepted == 2)
        let lines = await world.fixture.log.lines(containing: "upstream answer refused", atLeast: 1)
        #expect(lines.count == 1)
        try await world.stop()
    }

    @Test(
        "an answer the upstream cuts off mid-body (a reset in a chunked or read-until-close body, a sized body short at the close) ends the client's connection without the last chunk, and is logged",
        arguments: ["/cut-chunked", "/cut-until-close", "/cut-sized"])
    func cutOffAnswer(path: String) async throws {
        let world = try await World.start()
        let text = try await onOwnThread { [world] () -> String in
            let connection = try RawConnection(port: world.fixture.gatewayPort, receiveTimeout: 5)
            defer { connection.close() }
            connection.send(world.request(path))
            return connection.readAll().text  // returns at the close (a 5 s timeout would leave the checks below failing)
        }
        let (head, body) = Self.split(text)
        #expect(head.hasPrefix("HTTP/1.1 200"), "\(head.prefix(40))")
        #expect(!body.hasSuffix("0\r\n\r\n"), "the cut body was ended as if whole: \(body.debugDescription)")
        if head.lowercased().contains("transfer-encoding: chunked") {
            #expect(Self.dechunk(body) == nil, "a complete chunked body: \(body.debugDescription)")
        } else {
            #expect(body.utf8.count < 100)
        }
        #expect(await world.fixture.log.lines(containing: "upstream answer cut off").count == 1)
        try await world.stop()
    }

    @Test("identity fields an upstream echoes (the assertion, X-Forwarded-*, X-Auth-Request-*, X-Session-Id, in any spelling) never reach the client; other fields do")
    func identityFieldsStrippedFromAnswers() async throws {
        let world = try await World.start()
        let text = try await onOwnThread { [world] () -> String in
            let connection = try RawConnection(port: world.fixture.gatewayPort, receiveTimeout: 5)
            defer { connection.close() }
            connection.send(world.request("/echoes", close: true))
            return connection.readAll().text
        }
        let head = Self.split(text).head.lowercased()
        #expect(head.hasPrefix("http/1.1 200"))
        for name in ["x-portcullis-assertion", "x_portcullis_user", "x-forwarded-for", "x-auth-request-user", "x-session-id"] {
            #expect(!head.contains(name + ":"), "\(name) came back")
        }
        #expect(head.contains("x-kept: k"))
        #expect(head.contains("x-request-id:"))  // the gateway's own
        try await world.stop()
    }

    @Test("with an allowed Origin, the upstream's Vary is kept and Origin added to it (once, not when it is listed already); without one, Vary passes as it came")
    func varyKeepsTheUpstreams() async throws {
        let origin = "https://app.example.com"
        let world = try await World.start { $0.allowedOrigins = [origin] }
        let heads = try await onOwnThread { [world] () -> [String] in
            var heads: [String] = []
            for (path, sendOrigin) in [("/echoes", true), ("/vary-origin", true), ("/echoes", false)] {
                let connection = try RawConnection(port: world.fixture.gatewayPort, receiveTimeout: 5)
                defer { connection.close() }
                let request = world.request(path, close: true)
                connection.send(sendOrigin ? request.replacingOccurrences(of: "Host: x\r\n", with: "Host: x\r\nOrigin: \(origin)\r\n") : request)
                heads.append(Self.split(connection.readAll().text).head.lowercased())
            }
            return heads
        }
        func varies(_ head: String) -> [String] {
            head.components(separatedBy: "\r\n").filter { $0.hasPrefix("vary:") }.map { String($0.dropFirst(5)).trimmingCharacters(in: .whitespaces) }
        }
        #expect(heads.count == 3)
        guard heads.count == 3 else { return }
        #expect(heads[0].contains("access-control-allow-origin: \(origin)"))
        #expect(varies(heads[0]) == ["accept-encoding", "origin"])
        #expect(varies(heads[1]) == ["accept-encoding, origin"])
        #expect(varies(heads[2]) == ["accept-encoding"])
        try await world.stop()
    }
}
