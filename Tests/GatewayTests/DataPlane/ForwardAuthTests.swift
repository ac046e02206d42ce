import DataPlane
import Foundation
import Gateway
import JOSE
import NIOHTTP1
import PortcullisTestSupport
import Testing
import TrafficCop

/// Forward-auth (issue 38): `/api/auth/verify` answers, for a request a proxy in front
/// describes, what the route itself would answer, and the identity to pass on.
@Suite("Forward-auth: /api/auth/verify decides for a proxy in front")
struct ForwardAuthTests {
    static let upstream = "http://billing.internal:8443"

    /// A gateway with a scoped route and an `auth: none` one, answering forward-auth for the
    /// proxies in `trusted` with `family`'s names.
    static func gateway(_ provider: FakeProvider, family: ForwardAuthHeaderFamily = .nginx, trusted: [String] = ["127.0.0.1"]) async throws -> GatewayFixture {
        try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            configuration.routes = [
                ProxyRoute(prefix: "/api/billing", upstream: upstream, methods: [.get, .head, .post], policy: RoutePolicy(scopes: ["billing:read"])),
                ProxyRoute(prefix: "/public", upstream: "http://status.internal:8080", requiresToken: false),
                ProxyRoute(prefix: "/api/plain", upstream: "http://plain.internal:8080"),
            ]
            configuration.trustedProxies = trusted.compactMap(IPNetwork.init)
            configuration.forwardAuthHeaders = family
        })
    }

    @Test("an allowed caller gets 200 with the assertion (aud = the route's upstream) and oauth2-proxy's X-Auth-Request-* headers; a wrong scope is 403, no token 401, a .. above the root or a token in the URI 400, an unknown path 404, a method off the route 405; every answer is no-store")
    func decisions() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let upstream = Self.upstream
        let fixture = try await Self.gateway(provider)
        let allowed = try provider.token(claims: ["scope": "billing:read", "email": "ann@example.com", "email_verified": true, "groups": ["finance", "ops"]])
        func verify(_ headers: [(String, String)], bearer: String? = nil, method: HTTPMethod = .GET) async throws -> Answer {
            try await fixture.send(method, "/api/auth/verify", bearer: bearer, headers: headers)
        }
        let ok = try await verify([("X-Original-URI", "/api/billing/invoices?page=2"), ("X-Original-Method", "POST")], bearer: allowed)
        #expect(ok.status == 200, "\(ok.raw)")
        #expect(ok.headers["Cache-Control"].first == "no-store")
        #expect(ok.headers["X-Auth-Request-Tenant"].first == "acme" && ok.headers["X-Auth-Request-User"].first?.hasPrefix("ext_") == true)
        #expect(ok.headers["X-Auth-Request-Email"].first == "ann@example.com" && ok.headers["X-Auth-Request-Groups"].first == "finance,ops")
        let assertion = try #require(ok.headers["X-Portcullis-Assertion"].first)
        fixture.remember(assertion)
        let claims = try StrictJSONReader().parseObject(try JWSCompact.parse(assertion).payload)
        #expect(claims["aud"] == .string(upstream) && claims["idp_sub"] == "user-1")
        // Any method of the subrequest itself.
        let posted = try await verify([("X-Original-URI", "/api/billing/x"), ("X-Original-Method", "GET")], bearer: allowed, method: .POST)
        #expect(posted.status == 200, "\(posted.raw)")
        let refusals: [(String, [(String, String)], String?, Int, String?)] = [
            ("wrong scope", [("X-Original-URI", "/api/billing/x")], try provider.token(claims: ["scope": "openid"]), 403, "insufficient_scope"),
            ("no token", [("X-Original-URI", "/api/billing/x")], nil, 401, "token_missing"),
            ("climbs above /", [("X-Original-URI", "/api/billing/../../../etc/passwd")], allowed, 400, "invalid_request"),
            ("token in the URI", [("X-Original-URI", "/api/billing/x?access_token=\(allowed)")], nil, 400, "token_in_url"),
            ("token in the URI, other case", [("X-Original-URI", "/api/billing/x?%61ccess_TOKEN=abc")], allowed, 400, "token_in_url"),
            ("unknown path", [("X-Original-URI", "/api/other")], allowed, 404, "not_found"),
            (".. into another prefix", [("X-Original-URI", "/public/../api/billing/x")], nil, 400, "original_uri_not_canonical"),
            ("method off the route", [("X-Original-URI", "/api/billing/x"), ("X-Original-Method", "DELETE")], allowed, 405, "method_not_allowed"),
            ("no original URI", [], allowed, 400, "invalid_request"),
        ]
        for (name, headers, token, status, error) in refusals {
            let answer = try await verify(headers, bearer: token)
            #expect(answer.status == status && answer.error == error, "\(name): \(answer.status) \(answer.raw)")
            #expect(answer.headers["X-Portcullis-Assertion"].isEmpty && answer.headers["Cache-Control"].first == "no-store", "\(name)")
        }
        let scope = try await verify([("X-Original-URI", "/api/billing/x")], bearer: try provider.token(claims: ["scope": "openid"]))
        #expect(scope.headers["WWW-Authenticate"].first?.contains("scope=\"billing:read\"") == true)
        let method = try await verify([("X-Original-URI", "/api/billing/x"), ("X-Original-Method", "DELETE")], bearer: allowed)
        #expect(method.headers["Allow"].first == "GET, HEAD, POST")
        // auth: none: 200 without a token, with an assertion naming no user and every identity field empty.
        let open = try await verify([("X-Original-URI", "/public/status")])
        #expect(open.status == 200, "\(open.raw)")
        for name in ["X-Auth-Request-User", "X-Auth-Request-Tenant", "X-Auth-Request-Email", "X-Auth-Request-Groups"] {
            #expect(open.headers[name] == [""], "\(name) is answered, empty, when there is no identity: \(open.headers[name])")
        }
        // A token without email or groups: both fields answered, empty.
        let plain = try await verify([("X-Original-URI", "/api/plain/x")], bearer: try provider.token(claims: [:]))
        #expect(plain.status == 200 && plain.headers["X-Auth-Request-Email"] == [""] && plain.headers["X-Auth-Request-Groups"] == [""], "\(plain.raw)")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("an email address is an identity field only when the issuer verified it (email_verified true, or the string \"true\"); with emails_verified on the issuer, one without email_verified counts as verified, an explicit false never does")
    func onlyVerifiedEmailIsAnIdentityField() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        for vouched in [false, true] {
            let fixture = try await TrustedIssuerTests.gateway([provider], configure: { configuration in
                configuration.routes = [ProxyRoute(prefix: "/api/plain", upstream: "http://plain.internal:8080")]
                configuration.trustedProxies = [IPNetwork("127.0.0.1")!]
                configuration.trust.issuers[0].emailsVerified = vouched
            })
            let cases: [(JSONObject, Bool)] = [
                (["email": "ann@example.com", "email_verified": true], true),
                (["email": "ann@example.com", "email_verified": "true"], true),
                (["email": "ann@example.com"], vouched),
                (["email": "ann@example.com", "email_verified": false], false),
                (["email": "ann@example.com", "email_verified": "True"], false),
            ]
            for (claims, shown) in cases {
                let answer = try await fixture.send(.GET, "/api/auth/verify", bearer: try provider.token(claims: claims), headers: [("X-Original-URI", "/api/plain/x")])
                #expect(answer.status == 200 && answer.headers["X-Auth-Request-Email"] == [shown ? "ann@example.com" : ""], "emails_verified \(vouched), \(claims): \(answer.raw)")
            }
            try await fixture.stop()
        }
        try await provider.stop()
    }

    /// Sends `requests` on one raw connection at once and reads their answers in order, on a thread
    /// of its own (a blocking read on the concurrency pool would starve Hummingbird's routes).
    static func rawAnswers(port: Int, _ requests: [String], methods: [String]) async throws -> [StrictAnswerReader.Answer] {
        try await onOwnThread {
            let connection = try RawConnection(port: port)
            defer { connection.close() }
            connection.send(requests.joined())
            var bytes: [UInt8] = []
            return Self.readAnswers(connection, methods: methods, into: &bytes)
        }
    }

    /// Whether answers read on one connection were all made by the data plane's front: its request
    /// ids share the connection's random prefix and count up (Hummingbird's are random each).
    static func answeredOnTheLoop(_ answers: [StrictAnswerReader.Answer]) -> Bool {
        let ids = answers.compactMap { $0.field("x-request-id") }
        return ids.count == answers.count && ids.count > 1 && Set(ids.map { $0.prefix(8) }).count == 1 && Set(ids).count == ids.count
    }

    static func verifyRequest(_ method: String = "GET", bearer: String?, _ fields: [(String, String)], extra: String = "") -> String {
        var text = "\(method) /api/auth/verify HTTP/1.1\r\nHost: gw\r\n"
        if let bearer { text += "Authorization: Bearer \(bearer)\r\n" }
        for (name, value) in fields { text += "\(name): \(value)\r\n" }
        return text + extra + "\r\n"
    }

    /// A gateway whose only route needs no token (decisions without a provider), heads timed at 1 s.
    static func noTokenGateway() async throws -> GatewayFixture {
        try await GatewayFixture { configuration in
            configuration.routes = [ProxyRoute(prefix: "/public", upstream: "http://status.internal:8080", requiresToken: false)]
            configuration.trustedProxies = ["127.0.0.1"].compactMap(IPNetwork.init)
            configuration.limits.requestHeadTimeout = 1
        }
    }

    /// Reads from `connection` until an answer to each of `methods` is whole (or the connection ends).
    static func readAnswers(_ connection: RawConnection, methods: [String], into bytes: inout [UInt8]) -> [StrictAnswerReader.Answer] {
        while true {
            if let answers = try? StrictAnswerReader.readAll(bytes, methods: methods), answers.count == methods.count { return answers }
            let more = connection.readSome()
            if more.isEmpty { return (try? StrictAnswerReader.readAll(bytes, methods: methods)) ?? [] }
            bytes += more
        }
    }

    @Test("a head that comes in pieces (cut in its method, in a field name, in a value, with pauses; the connection's first and a later one) is decided on the event loop, and so is the next; nothing is handed to the router")
    func splitHeadsStayOnTheLoop() async throws {
        let fixture = try await Self.noTokenGateway()
        // Past the 2 KiB of a connection's first read, as a browser's cookies can be.
        let request = Self.verifyRequest(bearer: nil, [("X-Original-URI", "/public/status"), ("X-Padding", String(repeating: "p", count: 3_000))])
        let answers = try await onOwnThread { () -> [StrictAnswerReader.Answer] in
            let connection = try RawConnection(port: fixture.gatewayPort)
            defer { connection.close() }
            var bytes: [UInt8] = []
            // Cut at byte offsets (a cut may fall between CR and LF).
            let whole = Array(request.utf8)
            func sendInPieces(_ cuts: [Int]) {
                var start = 0
                for cut in cuts {
                    _ = connection.send(bytes: Array(whole[start..<cut]))
                    Thread.sleep(forTimeInterval: 0.15)
                    start = cut
                }
                _ = connection.send(bytes: Array(whole[start...]))
            }
            sendInPieces([2, 40])
            _ = Self.readAnswers(connection, methods: ["GET"], into: &bytes)
            sendInPieces([40, 2_000, request.utf8.count - 2])
            _ = Self.readAnswers(connection, methods: ["GET", "GET"], into: &bytes)
            connection.send(request)
            return Self.readAnswers(connection, methods: ["GET", "GET", "GET"], into: &bytes)
        }
        #expect(answers.map(\.status) == [200, 200, 200])
        #expect(Self.answeredOnTheLoop(answers), "\(answers.map { $0.field("x-request-id") ?? "" })")
        try await fixture.stop()
    }

    @Test("a head that comes in pieces is held to limits.max_header_bytes as NIO's decoder holds one: within it decided on the loop, past it 431 headers_too_large")
    func splitHeadsWithinTheHeadBound() async throws {
        let fixture = try await Self.noTokenGateway()
        let field = String(repeating: "q", count: 7_000)
        // Two fields: about 14 KB, within the default 16 KiB. Three: past it.
        let within = Self.verifyRequest(bearer: nil, [("X-Original-URI", "/public/status"), ("X-A", field), ("X-B", field)])
        let past = Self.verifyRequest(bearer: nil, [("X-Original-URI", "/public/status"), ("X-A", field), ("X-B", field), ("X-C", field)])
        let (answers, refusal) = try await onOwnThread { () -> ([StrictAnswerReader.Answer], String) in
            let connection = try RawConnection(port: fixture.gatewayPort)
            defer { connection.close() }
            var bytes: [UInt8] = []
            for request in [within, within, past] {
                let whole = Array(request.utf8)
                _ = connection.send(bytes: Array(whole[..<1_500]))
                Thread.sleep(forTimeInterval: 0.1)
                _ = connection.send(bytes: Array(whole[1_500...]))
                if request == past { break }
                _ = Self.readAnswers(connection, methods: Array(repeating: "GET", count: bytes.isEmpty ? 1 : 2), into: &bytes)
            }
            let answers = Self.readAnswers(connection, methods: ["GET", "GET"], into: &bytes)
            return (answers, String(decoding: bytes + connection.readAll(), as: UTF8.self))
        }
        #expect(answers.map(\.status) == [200, 200])
        #expect(Self.answeredOnTheLoop(answers), "\(answers.map { $0.field("x-request-id") ?? "" })")
        let third = refusal.components(separatedBy: "HTTP/1.1 ").dropFirst(3).first ?? ""
        #expect(third.hasPrefix("431"), "\(refusal.suffix(300))")
        #expect(third.contains(#""error":"headers_too_large""#))
        try await fixture.stop()
    }

    @Test("a later head past limits.max_header_bytes with no blank line yet is 431 headers_too_large at once, not 408 at its deadline; so is a target that long when max_header_field_bytes is above max_header_bytes")
    func laterHeadPastTheBoundAtOnce() async throws {
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [ProxyRoute(prefix: "/public", upstream: "http://status.internal:8080", requiresToken: false)]
            configuration.trustedProxies = ["127.0.0.1"].compactMap(IPNetwork.init)
            configuration.limits.requestHeadTimeout = 5
            configuration.limits.maximumHeaderBytes = 4_096
            configuration.limits.maximumHeaderFieldBytes = 65_536
        }
        let request = Self.verifyRequest(bearer: nil, [("X-Original-URI", "/public/status")])
        let fields = "GET /api/auth/verify HTTP/1.1\r\n" + (0..<40).map { "X-Pad-\($0): \(String(repeating: "p", count: 120))\r\n" }.joined()
        let target = "GET /api/auth/verify?" + String(repeating: "t", count: 6_000)
        for later in [fields, target] {
            let (text, seconds) = try await onOwnThread { () -> (String, Double) in
                let connection = try RawConnection(port: fixture.gatewayPort, receiveTimeout: 20)
                defer { connection.close() }
                var bytes: [UInt8] = []
                connection.send(request)
                _ = Self.readAnswers(connection, methods: ["GET"], into: &bytes)
                let started = Date()
                // In pieces, as a slow client would: no blank line ever comes.
                let whole = Array(later.utf8)
                for start in stride(from: 0, to: whole.count, by: 1_000) {
                    _ = connection.send(bytes: Array(whole[start..<min(start + 1_000, whole.count)]))
                    Thread.sleep(forTimeInterval: 0.05)
                }
                bytes += connection.readAll()
                return (String(decoding: bytes, as: UTF8.self), Date().timeIntervalSince(started))
            }
            let second = text.components(separatedBy: "HTTP/1.1 ").dropFirst(2).first ?? ""
            #expect(second.hasPrefix("431"), "\(later.prefix(30)): \(text.suffix(200))")
            #expect(second.contains(#""error":"headers_too_large""#))
            #expect(seconds < TimeBounds.seconds(3), "\(later.prefix(30)): answered \(seconds) s after it began, not at once")
        }
        try await fixture.stop()
    }

    @Test("a later head left unfinished, or trickled on past limits.request_head_timeout_seconds (also one begun in the read that ended the first head), gets 408 request_timeout from when it began, and the connection closes")
    func unfinishedLaterHeadsTimeOut() async throws {
        let fixture = try await Self.noTokenGateway()
        let request = Self.verifyRequest(bearer: nil, [("X-Original-URI", "/public/status")])
        // The third: the later head begins in the same write as the first, which is answered at once.
        for (trickle, sameWrite) in [(false, false), (true, false), (true, true)] {
            let (text, seconds) = try await onOwnThread { () -> (String, Double) in
                let connection = try RawConnection(port: fixture.gatewayPort)
                defer { connection.close() }
                var bytes: [UInt8] = []
                let later = "GET /api/auth/verify HTTP/1.1\r\nHost: gw\r\n"
                let started: Date
                if sameWrite {
                    started = Date()
                    connection.send(request + later)
                } else {
                    connection.send(request)
                    _ = Self.readAnswers(connection, methods: ["GET"], into: &bytes)
                    started = Date()
                    connection.send(later)
                }
                if trickle {
                    for index in 0..<8 {
                        Thread.sleep(forTimeInterval: 0.25)
                        connection.send("X-Slow-\(index): 1\r\n")
                    }
                }
                bytes += connection.readAll()
                return (String(decoding: bytes, as: UTF8.self), Date().timeIntervalSince(started))
            }
            let second = text.components(separatedBy: "HTTP/1.1 ").dropFirst(2).first ?? ""
            #expect(second.hasPrefix("408"), "trickled \(trickle), same write \(sameWrite): \(text.suffix(300))")
            #expect(text.contains(#""error":"request_timeout""#))
            // 1 s from the head's first byte: not reset by each trickled line, and it fires.
            #expect(seconds >= 0.9 && seconds < 10, "trickled \(trickle), same write \(sameWrite): answered \(seconds) s after the head began")
        }
        try await fixture.stop()
    }

    @Test("a decision made on the event loop answers as Hummingbird's route does (status, error, every field but the request id and the assertion's own signature), for an allowed caller, a policy refusal, a method off the route, an unknown path, a mixed family, no token and auth: none")
    func eventLoopDecisionsAnswerAsTheRouteDoes() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let fixture = try await Self.gateway(provider)
        let allowed = try provider.token(claims: ["scope": "billing:read", "email": "ann@example.com", "email_verified": true, "groups": ["finance", "ops"]])
        let unscoped = try provider.token(claims: ["scope": "openid"])
        // Warm: the token is verified once (the store's path), so both ways below decide from memory.
        #expect(try await fixture.send(.GET, "/api/auth/verify", bearer: allowed, headers: [("X-Original-URI", "/api/billing/x")]).status == 200)
        let cases: [(String, String?, [(String, String)], Int)] = [
            ("allowed", allowed, [("X-Original-URI", "/api/billing/x?page=2"), ("X-Original-Method", "POST"), ("Cookie", "theme=dark")], 200),
            ("policy refusal", unscoped, [("X-Original-URI", "/api/billing/x")], 403),
            ("method off the route", allowed, [("X-Original-URI", "/api/billing/x"), ("X-Original-Method", "DELETE")], 405),
            ("unknown path", allowed, [("X-Original-URI", "/api/other")], 404),
            ("mixed family", allowed, [("X-Original-URI", "/api/billing/x"), ("X-Forwarded-Uri", "/public/x")], 400),
            ("no token", nil, [("X-Original-URI", "/api/billing/x")], 401),
            ("auth: none", nil, [("X-Original-URI", "/public/status")], 200),
            ("a session_id as the token", "ses_0123456789abcdef0123456789abcdef", [("X-Original-URI", "/api/billing/x")], 401),
        ]
        let volatile: Set<String> = ["x-request-id", "x-portcullis-assertion", "date", "server", "content-length"]
        for (name, bearer, fields, status) in cases {
            // Plain: decided on the loop (sent twice on one connection, both answered under that connection's
            // request-id prefix: the data plane's, not Hummingbird's random ids). With Content-Length: 0 it is
            // not plain, and Hummingbird's route decides it.
            let twice = try await Self.rawAnswers(port: fixture.gatewayPort, [Self.verifyRequest(bearer: bearer, fields), Self.verifyRequest(bearer: bearer, fields)], methods: ["GET", "GET"])
            #expect(Self.answeredOnTheLoop(twice), "\(name): \(twice.map { $0.field("x-request-id") ?? "" })")
            let onLoop = try #require(twice.first, "\(name)")
            let onRoute = try #require(
                try await Self.rawAnswers(port: fixture.gatewayPort, [Self.verifyRequest(bearer: bearer, fields, extra: "Content-Length: 0\r\n")], methods: ["GET"]).first, "\(name)")
            #expect(onLoop.status == status && onRoute.status == status, "\(name): \(onLoop.status) and \(onRoute.status)")
            let loopBody = (try? StrictJSONReader().parseObject(onLoop.body)) ?? JSONObject()
            let routeBody = (try? StrictJSONReader().parseObject(onRoute.body)) ?? JSONObject()
            #expect(loopBody == routeBody, "\(name): \(StrictAnswerReader.printable(onLoop.body)) and \(StrictAnswerReader.printable(onRoute.body))")
            let loopFields = onLoop.fields.filter { !volatile.contains($0.name) }.map { "\($0.name): \($0.value)" }.sorted()
            let routeFields = onRoute.fields.filter { !volatile.contains($0.name) }.map { "\($0.name): \($0.value)" }.sorted()
            #expect(loopFields == routeFields, "\(name): \(loopFields) and \(routeFields)")
            #expect((onLoop.field("x-portcullis-assertion") == nil) == (status != 200) && (onRoute.field("x-portcullis-assertion") == nil) == (status != 200), "\(name)")
            #expect(onLoop.field("x-request-id") != nil && onRoute.field("x-request-id") != nil, "\(name)")
        }
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("decisions pipelined on one connection are answered in order, each framed for its own request (a HEAD without a body), all on the event loop (one connection's request ids); a token whose session ends is refused by the very next decision")
    func pipelinedDecisionsAndRevocation() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let fixture = try await Self.gateway(provider)
        let allowed = try provider.token(claims: ["scope": "billing:read"])
        #expect(try await fixture.send(.GET, "/api/auth/verify", bearer: allowed, headers: [("X-Original-URI", "/api/billing/x")]).status == 200)
        let requests = [
            Self.verifyRequest(bearer: allowed, [("X-Original-URI", "/api/billing/a")]),
            Self.verifyRequest("HEAD", bearer: nil, [("X-Original-URI", "/api/billing/b")]),
            Self.verifyRequest(bearer: try provider.token(claims: ["scope": "openid"]), [("X-Original-URI", "/api/billing/c")]),
            Self.verifyRequest("HEAD", bearer: allowed, [("X-Original-URI", "/api/billing/d")]),
            "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n",
        ]
        let answers = try await Self.rawAnswers(port: fixture.gatewayPort, requests, methods: ["GET", "HEAD", "GET", "HEAD", "GET"])
        #expect(answers.map(\.status) == [200, 401, 403, 200, 200], "\(answers.map(\.status))")
        #expect(answers.count == 5 && answers[1].body.isEmpty && answers[3].body.isEmpty)
        // The data plane numbers a connection's requests after one random prefix; Hummingbird's ids are random each.
        #expect(Self.answeredOnTheLoop(Array(answers.prefix(4))), "\(answers.map { $0.field("x-request-id") ?? "" })")

        // A decision that waits for the store (a key the gateway has not fetched yet): the requests pipelined
        // behind it wait, and all are answered in order, framed for their own.
        let later = try JWSKey.generate(algorithm: .es256, kid: "ec-2")
        provider.publish(provider.keys + [later])
        let waiting = [
            Self.verifyRequest(bearer: try provider.token(key: later, claims: ["scope": "billing:read"]), [("X-Original-URI", "/api/billing/e")]),
            Self.verifyRequest("HEAD", bearer: nil, [("X-Original-URI", "/api/billing/f")]),
            Self.verifyRequest(bearer: allowed, [("X-Original-URI", "/api/billing/g")]),
            "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n",
        ]
        let behind = try await Self.rawAnswers(port: fixture.gatewayPort, waiting, methods: ["GET", "HEAD", "GET", "GET"])
        #expect(behind.map(\.status) == [200, 401, 200, 200], "\(behind.map(\.status))")
        #expect(Self.answeredOnTheLoop(Array(behind.prefix(3))), "\(behind.map { $0.field("x-request-id") ?? "" })")
        // A proxy that leaves while its decision waits: nothing is written to it, and the gateway serves on.
        let third = try JWSKey.generate(algorithm: .es256, kid: "ec-3")
        provider.publish(provider.keys + [third])
        let leaving = try RawConnection(port: fixture.gatewayPort)
        leaving.send(Self.verifyRequest(bearer: try provider.token(key: third, claims: ["scope": "billing:read"]), [("X-Original-URI", "/api/billing/h")]))
        leaving.close()
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await fixture.send(.GET, "/api/auth/verify", bearer: allowed, headers: [("X-Original-URI", "/api/billing/i")]).status == 200)

        // The gateway's own token: its session ended (logout), the next decision is 401 token_revoked.
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let ownFields = [("X-Original-URI", "/api/plain/x")]
        #expect(try await Self.rawAnswers(port: fixture.gatewayPort, [Self.verifyRequest(bearer: login.accessToken, ownFields)], methods: ["GET"]).first?.status == 200)
        #expect(try await fixture.post("/api/auth/logout", bearer: login.accessToken, ["session_id": .string(login.sessionID)]).status == 204)
        let after = try #require(try await Self.rawAnswers(port: fixture.gatewayPort, [Self.verifyRequest(bearer: login.accessToken, ownFields)], methods: ["GET"]).first)
        let error = (try? StrictJSONReader().parseObject(after.body))?["error"]?.stringValue
        #expect(after.status == 401 && error == "token_revoked", "\(StrictAnswerReader.printable(after.body))")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("a decision asked with a Content-Length body is answered once, by the router's path (the front decides only bodyless ones), and its body, though it spells a decision, is never read as a request")
    func decisionWithBodyIsNotSplit() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let fixture = try await Self.gateway(provider)
        let allowed = try provider.token(claims: ["scope": "billing:read"])
        let smuggled = Self.verifyRequest(bearer: nil, [("X-Original-URI", "/api/billing/smuggled")])
        let asked = Self.verifyRequest(bearer: allowed, [("X-Original-URI", "/api/billing/a")], extra: "Content-Length: \(smuggled.utf8.count)\r\n") + smuggled
        let port = fixture.gatewayPort
        let text = try await onOwnThread { () -> String in
            let connection = try RawConnection(port: port, receiveTimeout: 5)
            defer { connection.close() }
            connection.send(asked + "GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
            return connection.readAll().text
        }
        let statuses = text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
        #expect(statuses == ["200", "200"], "\(statuses)")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("forward-auth reads one header family: with nginx's, any X-Forwarded-Uri or -Method is 400 forward_auth_headers_mixed, never read; with forwarded (Caddy, Traefik), any X-Original-URI or -Method is")
    func oneHeaderFamily() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let unscoped = try provider.token(claims: ["scope": "openid"])
        let nginx = try await Self.gateway(provider, family: .nginx)
        let caddy = try await Self.gateway(provider, family: .forwarded)
        // The issue's three spoofing attempts, the client's copy beside the proxy's own field.
        let attempts: [(String, [(String, String)], String?)] = [
            ("a scope-less token steered to another route", [("X-Original-URI", "/api/plain/x"), ("X-Forwarded-Uri", "/api/billing/invoices")], unscoped),
            ("no token, steered to an auth: none route", [("X-Original-URI", "/public/x"), ("X-Forwarded-Uri", "/api/billing/invoices")], nil),
            ("DELETE named GET", [("X-Original-Method", "GET"), ("X-Forwarded-Method", "DELETE"), ("X-Forwarded-Uri", "/api/billing/invoices")], unscoped),
        ]
        for (fixture, name) in [(nginx, "nginx"), (caddy, "forwarded")] {
            for (attempt, headers, token) in attempts {
                let answer = try await fixture.send(.GET, "/api/auth/verify", bearer: token, headers: headers)
                #expect(answer.status == 400 && answer.error == "forward_auth_headers_mixed", "\(name), \(attempt): \(answer.status) \(answer.raw)")
                #expect(answer.headers["X-Portcullis-Assertion"].isEmpty)
            }
        }
        // Each family alone works where it is the one read, and is refused where it is not.
        let allowed = try provider.token(claims: ["scope": "billing:read"])
        let viaCaddy = try await caddy.send(.GET, "/api/auth/verify", bearer: allowed, headers: [("X-Forwarded-Uri", "/api/billing/x"), ("X-Forwarded-Method", "POST")])
        #expect(viaCaddy.status == 200, "\(viaCaddy.raw)")
        let deleteViaCaddy = try await caddy.send(.GET, "/api/auth/verify", bearer: allowed, headers: [("X-Forwarded-Uri", "/api/billing/x"), ("X-Forwarded-Method", "DELETE")])
        #expect(deleteViaCaddy.status == 405, "\(deleteViaCaddy.raw)")
        let nginxNamesAtCaddy = try await caddy.send(.GET, "/api/auth/verify", bearer: allowed, headers: [("X-Original-URI", "/api/billing/x")])
        #expect(nginxNamesAtCaddy.status == 400 && nginxNamesAtCaddy.error == "forward_auth_headers_mixed", "\(nginxNamesAtCaddy.raw)")
        let twice = try await nginx.send(.GET, "/api/auth/verify", bearer: allowed, headers: [("X-Original-URI", "/api/billing/x"), ("X-Original-URI", "/api/plain/x")])
        #expect(twice.status == 400 && twice.error == "invalid_request", "the URI field twice: \(twice.raw)")
        let lowercase = try await nginx.send(.GET, "/api/auth/verify", bearer: allowed, headers: [("X-Original-URI", "/api/billing/x"), ("X-Original-Method", "delete")])
        #expect(lowercase.status == 405, "a method is case-sensitive: \(lowercase.raw)")
        try await nginx.stop()
        try await caddy.stop()
        try await provider.stop()
    }

    @Test("forward-auth answers only peers in gateway.trusted_proxies: 403 forward_auth_untrusted_peer for any other, and with none listed")
    func trustedPeersOnly() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let allowed = try provider.token(claims: ["scope": "billing:read"])
        for trusted in [[], ["10.0.0.0/8"], ["::1"]] {
            let fixture = try await Self.gateway(provider, trusted: trusted)
            let answer = try await fixture.send(.GET, "/api/auth/verify", bearer: allowed, headers: [("X-Original-URI", "/api/billing/x")])
            #expect(answer.status == 403 && answer.error == "forward_auth_untrusted_peer", "trusted \(trusted): \(answer.raw)")
            #expect(answer.headers["X-Portcullis-Assertion"].isEmpty && answer.headers["X-Auth-Request-User"].isEmpty)
            try await fixture.stop()
        }
        let fixture = try await Self.gateway(provider, trusted: ["127.0.0.0/8"])
        let answer = try await fixture.send(.GET, "/api/auth/verify", bearer: allowed, headers: [("X-Original-URI", "/api/billing/x")])
        #expect(answer.status == 200, "\(answer.raw)")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("an original URI not already in RequestTarget's one spelling is 400 original_uri_not_canonical: the proxy forwards it as it came, so it is never decided as another path")
    func canonicalSpellingOnly() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let fixture = try await Self.gateway(provider)
        // Limited to /api/plain: each spelling below would be decided as /api/plain/x if normalised.
        let plainOnly = try provider.token(claims: ["scope": "openid"])
        let spellings: [(String, String)] = [
            ("/api/billing/../plain/x", "original_uri_not_canonical"),
            ("/api/billing/%2e%2e/plain/x", "original_uri_not_canonical"),
            ("/api/billing//../plain/x", "original_uri_not_canonical"),
            ("/api/billing;/../plain/x", "original_uri_not_canonical"),
            ("/api/billing/./x", "original_uri_not_canonical"),
            ("/api//plain/x", "original_uri_not_canonical"),
            ("/api/plain/%78", "original_uri_not_canonical"),
            ("/api/plain/%3f", "original_uri_not_canonical"),
            ("/api/plain/secret#/../public/x", "invalid_request"),
            ("/api/billing/%2f../plain/x", "invalid_request"),
        ]
        for (uri, error) in spellings {
            let answer = try await fixture.send(.GET, "/api/auth/verify", bearer: plainOnly, headers: [("X-Original-URI", uri)])
            #expect(answer.status == 400 && answer.error == error, "\(uri): \(answer.status) \(answer.raw)")
        }
        // A path is matched without its query: /api/billing?x=/api/plain is /api/billing's.
        let query = try await fixture.send(.GET, "/api/auth/verify", bearer: plainOnly, headers: [("X-Original-URI", "/api/billing/x?next=/api/plain/x")])
        #expect(query.status == 403 && query.error == "insufficient_scope", "\(query.raw)")
        let noToken = try await fixture.send(.GET, "/api/auth/verify", headers: [("X-Original-URI", "/api/billing/x?r=/public/x")])
        #expect(noToken.status == 401, "\(noToken.raw)")
        let canonical = try await fixture.send(.GET, "/api/auth/verify", bearer: plainOnly, headers: [("X-Original-URI", "/api/plain/x%20y?a=1")])
        #expect(canonical.status == 200, "a canonical spelling passes: \(canonical.raw)")
        try await fixture.stop()
        try await provider.stop()
    }
    @Test("with routes bound to hosts, forward-auth decides by the original host in the family's own field (X-Original-Host, X-Forwarded-Host), required once; a host route's policy is never skipped for an any-host route's")
    func decidedByHost() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        for family in ForwardAuthHeaderFamily.allCases {
            let fixture = try await TrustedIssuerTests.gateway([provider], configure: { configuration in
                var admin = ProxyRoute(prefix: "/", upstream: "http://admin.internal:8080", policy: RoutePolicy(scopes: ["admin"]))
                admin.host = RouteHost(configured: "admin.example.com")
                configuration.routes = [admin, ProxyRoute(prefix: "/", upstream: "http://open.internal:8080", requiresToken: false)]
                configuration.trustedProxies = [IPNetwork("127.0.0.1")].compactMap { $0 }
                configuration.forwardAuthHeaders = family
            })
            let (uri, hostField) = family == .nginx ? ("X-Original-URI", "X-Original-Host") : ("X-Forwarded-Uri", "X-Forwarded-Host")
            let plain = try provider.token(claims: ["scope": "openid"])
            func verify(_ headers: [(String, String)], bearer: String? = nil) async throws -> Answer {
                try await fixture.send(.GET, "/api/auth/verify", bearer: bearer, headers: headers)
            }
            let onAdmin = try await verify([(uri, "/settings"), (hostField, "Admin.Example.com:443")])
            #expect(onAdmin.status == 401 && onAdmin.error == "token_missing", "\(family): \(onAdmin.raw)")
            let scopeless = try await verify([(uri, "/settings"), (hostField, "admin.example.com")], bearer: plain)
            #expect(scopeless.status == 403 && scopeless.error == "insufficient_scope", "\(family): \(scopeless.raw)")
            let elsewhere = try await verify([(uri, "/settings"), (hostField, "www.example.com")])
            #expect(elsewhere.status == 200, "\(family): the any-host route (auth: none) on another host: \(elsewhere.raw)")
            let missing = try await verify([(uri, "/settings")])
            #expect(missing.status == 400 && missing.error == "invalid_request", "\(family): no host named: \(missing.raw)")
            let twice = try await verify([(uri, "/settings"), (hostField, "www.example.com"), (hostField, "admin.example.com")])
            #expect(twice.status == 400, "\(family): two hosts named: \(twice.raw)")
            try await fixture.stop()
        }
        try await provider.stop()
    }
}


/// One instance behind nginx and Caddy (issue 54): each proxy bound to its family, and routes
/// decided by forward-auth only (no upstream).
@Suite("Forward-auth: a family per proxy, and routes without an upstream")
struct ForwardAuthProxyFamilyTests {
    /// The status, the error code and the head of `request` sent from `source` as raw HTTP/1.1.
    static func send(_ fixture: GatewayFixture, from source: String, _ headers: [(String, String)], bearer: String) async throws -> (status: Int, raw: String) {
        let port = fixture.gatewayPort
        return try await onOwnThread {
            let connection = try RawConnection(port: port, source: source)
            defer { connection.close() }
            let fields = (headers + [("Authorization", "Bearer " + bearer), ("Host", "127.0.0.1"), ("Connection", "close")]).map { "\($0.0): \($0.1)\r\n" }.joined()
            connection.send("GET /api/auth/verify HTTP/1.1\r\n" + fields + "\r\n")
            let raw = String(decoding: connection.readAll(), as: UTF8.self)
            let status = raw.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
            return (status, raw)
        }
    }

    @Test("each proxy speaks its own family: nginx's names from one peer, Caddy's from another, on one instance; a peer sending the other family's is refused forward_auth_headers_mixed, never read")
    func familyPerProxy() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let caddyPeer = try #require(IPNetwork("127.0.0.2"))
        let fixture = try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            configuration.routes = [ProxyRoute(prefix: "/api/billing", upstream: "http://billing.internal:8080", policy: RoutePolicy(scopes: ["billing:read"]))]
            configuration.trustedProxies = ["127.0.0.1", "127.0.0.2"].compactMap(IPNetwork.init)
            configuration.forwardAuthHeaders = .nginx
            configuration.forwardAuthProxies = [.init(network: caddyPeer, family: .forwarded)]
        })
        let token = try provider.token(claims: ["scope": "billing:read"])
        let nginx = try await Self.send(fixture, from: "127.0.0.1", [("X-Original-URI", "/api/billing/x")], bearer: token)
        #expect(nginx.status == 200, "\(nginx.raw)")
        let caddy = try await Self.send(fixture, from: "127.0.0.2", [("X-Forwarded-Uri", "/api/billing/x"), ("X-Forwarded-Method", "GET")], bearer: token)
        #expect(caddy.status == 200, "\(caddy.raw)")
        let mixedAtCaddy = try await Self.send(fixture, from: "127.0.0.2", [("X-Original-URI", "/api/billing/x")], bearer: token)
        #expect(mixedAtCaddy.status == 400 && mixedAtCaddy.raw.contains("forward_auth_headers_mixed"), "\(mixedAtCaddy.raw)")
        let mixedAtNginx = try await Self.send(fixture, from: "127.0.0.1", [("X-Forwarded-Uri", "/api/billing/x")], bearer: token)
        #expect(mixedAtNginx.status == 400 && mixedAtNginx.raw.contains("forward_auth_headers_mixed"), "\(mixedAtNginx.raw)")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("gateway.forward_auth.proxies binds proxies to a family: read per family; a proxy outside trusted_proxies, a proxy under both, or a bad address is refused naming the key")
    func familiesRead() async throws {
        let read = try await HostRouteTests.configuration(
            "  trusted_proxies: [10.0.0.0/24]\n  forward_auth:\n    headers: nginx\n    proxies: {nginx: [10.0.0.5], forwarded: [10.0.0.6]}\n")
        #expect(read.forwardAuthProxies.map(\.family) == [.nginx, .forwarded])
        let proxies = ForwardAuthProxies(defaultFamily: read.forwardAuthHeaders, bindings: read.forwardAuthProxies)
        #expect(proxies.family(for: "10.0.0.6") == .forwarded && proxies.family(for: "10.0.0.5") == .nginx && proxies.family(for: "10.0.0.7") == .nginx)
        let refused: [(String, String)] = [
            ("  trusted_proxies: [10.0.0.5]\n  forward_auth: {proxies: {forwarded: [10.0.0.6]}}\n", "gateway.forward_auth.proxies.forwarded"),
            ("  trusted_proxies: [10.0.0.0/24]\n  forward_auth: {proxies: {nginx: [10.0.0.0/25], forwarded: [10.0.0.6]}}\n", "gateway.forward_auth.proxies.forwarded"),
            ("  trusted_proxies: [10.0.0.0/24]\n  forward_auth: {proxies: {nginx: [nginx.internal]}}\n", "gateway.forward_auth.proxies.nginx"),
        ]
        for (yaml, key) in refused {
            let error = try await HostRouteTests.refusal(yaml)
            #expect(error?.key == key, "\(yaml): \(error?.message ?? "accepted")")
        }
    }

    @Test("a route without an upstream is decided by forward-auth (its assertion's aud a URN naming the route, or its audience), and a request for it straight to the gateway is 404; proxying settings on it are refused")
    func forwardAuthOnlyRoute() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let fixture = try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            var audienced = ProxyRoute(prefix: "/wiki", upstream: "")
            audienced.configuredAudience = "https://wiki.example.com"
            configuration.routes = [ProxyRoute(prefix: "/app", upstream: ""), audienced]
            configuration.trustedProxies = ["127.0.0.1"].compactMap(IPNetwork.init)
        })
        let token = try provider.token(claims: [:])
        for (path, audience) in [("/app/page", "urn:portcullis:route:/app"), ("/wiki/x", "https://wiki.example.com")] {
            let decided = try await fixture.send(.GET, "/api/auth/verify", bearer: token, headers: [("X-Original-URI", path)])
            #expect(decided.status == 200, "\(decided.raw)")
            let assertion = try #require(decided.headers["X-Portcullis-Assertion"].first)
            fixture.remember(assertion)
            let claims = try StrictJSONReader().parseObject(try JWSCompact.parse(assertion).payload)
            #expect(claims["aud"] == .string(audience))
        }
        let direct = try await fixture.send(.GET, "/app/page", bearer: token)
        #expect(direct.status == 404 && direct.error == "not_found" && direct.raw.contains("forward-auth"), "\(direct.raw)")
        let read = try await RoutePolicyTests.routes("    - {prefix: /app, audience: 'https://app.example.com'}\n")
        #expect(read[0].isForwardAuthOnly && read[0].configuredAudience == "https://app.example.com")
        for (yaml, key) in [
            ("    - {prefix: /a, audience: runtime}\n", "gateway.routes[0].audience"),
            ("    - {prefix: /a, audience: portcullis}\n", "gateway.routes[0].audience"),
        ] {
            let error = try await HostRouteTests.refusal("  routes:\n" + yaml)
            #expect(error?.key == key, "\(yaml): \(error?.message ?? "accepted")")
        }
        for setting in ["strip_prefix: false", "preserve_host: true", "protocol: h2c", "grpc: true"] {
            let error = try await HostRouteTests.refusal("  routes:\n    - {prefix: /app, \(setting)}\n")
            #expect(error?.key == "gateway.routes[0].\(setting.split(separator: ":")[0])", "\(setting): \(error?.message ?? "accepted")")
        }
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("a grpc: true route whose upstream URL has a path is refused (the service's own path would go under it)")
    func grpcUpstreamPath() async throws {
        let error = try await HostRouteTests.refusal("  routes:\n    - {prefix: /pkg.Service, upstream: 'http://127.0.0.1:9000/svc', grpc: true}\n")
        #expect(error?.key == "gateway.routes[0]" && error?.message.contains("/svc") == true, "\(error?.message ?? "accepted")")
        #expect(try await HostRouteTests.refusal("  routes:\n    - {prefix: /pkg.Service, upstream: 'http://127.0.0.1:9000/', grpc: true}\n") == nil)
    }
}
