import DataPlane
import EdgeHTTP
import Foundation
import Gateway
import Hummingbird
import Logging
import PortcullisTestSupport
import Testing
@testable import portcullis_probes

/// Every answer on a connection is framed for its own request (issue 35): relayed answers,
/// the gateway's refusals, Hummingbird's answers, to GET and to HEAD, one by one and pipelined,
/// on the front and after NIO's decoder, read by a strict parser told each request's method.
@Suite("Every answer is framed for its own request, in any mix on one connection")
struct AnswerFramingTests {
    /// The upstream `MixedRequest` expects (the fuzz target's, run here in-process).
    static func startUpstream() async throws -> BackgroundServer {
        try await BackgroundServer.start { onPort in
            Application(
                router: Probes.FramingUpstream.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.framing-upstream"))
        }
    }

    struct World {
        let fixture: GatewayFixture
        let upstream: BackgroundServer
        let token: String

        static func start() async throws -> World {
            let upstream = try await AnswerFramingTests.startUpstream()
            let fixture = try await GatewayFixture { $0.routes = [ProxyRoute(prefix: "/api/svc", upstream: "http://127.0.0.1:\(upstream.port)")] }
            try await fixture.addUser("alice")
            let login = try await fixture.login("alice")
            return World(fixture: fixture, upstream: upstream, token: login.accessToken)
        }

        func stop() async throws {
            try await fixture.stop()
            try await upstream.stop()
        }

        /// Sends `sequence` on one new connection and reads every answer strictly; the first problem, or `nil`.
        func problem(with sequence: MixedSequence) async throws -> String? {
            let (port, token) = (fixture.gatewayPort, self.token)
            return try await onOwnThread { () -> String? in
                let connection = try RawConnection(port: port, receiveTimeout: 10)
                defer { connection.close() }
                return sequence.problem(sentOn: connection.descriptor, token: token)
            }
        }
    }

    @Test(
        "the issue's two cases: after a request through NIO's decoder, a relayed answer (to HEAD, to GET) leaves the next refusal (to GET, to HEAD) and /healthz framed for their own requests",
        arguments: [[MixedRequest.badLogin, .relayedHEAD, .refusedGET], [.badLogin, .relayedGET, .refusedHEAD]])
    func issueCases(requests: [MixedRequest]) async throws {
        let world = try await World.start()
        for pipelined in [false, true] {
            let sequence = MixedSequence(requests: requests, ending: .close, pipelined: pipelined)
            let problem = try await world.problem(with: sequence)
            #expect(problem == nil, "\(sequence): \(problem ?? "")")
        }
        try await world.stop()
    }

    @Test(
        "every kind of request, after every other kind, one by one and pipelined, ended each way: each answer framed for its own request",
        arguments: MixedEnding.allCases)
    func everyPairInTurn(ending: MixedEnding) async throws {
        let world = try await World.start()
        // Each kind follows each other kind at least once: a walk through all pairs.
        var walk: [MixedRequest] = []
        for first in MixedRequest.allCases {
            for second in MixedRequest.allCases { walk += [first, second] }
        }
        for pipelined in [false, true] {
            // In pieces of 32, so a failure names a short sequence.
            for start in stride(from: 0, to: walk.count, by: 32) {
                let sequence = MixedSequence(requests: Array(walk[start..<min(start + 32, walk.count)]), ending: ending, pipelined: pipelined)
                let problem = try await world.problem(with: sequence)
                #expect(problem == nil, "\(sequence): \(problem ?? "")")
                if problem != nil { break }
            }
        }
        try await world.stop()
    }

    @Test("property: random sequences of mixed requests on one connection, one by one or pipelined, get every answer framed for its own request")
    func randomSequences() async throws {
        let world = try await World.start()
        let seed = UInt64(ProcessInfo.processInfo.environment["PORTCULLIS_FRAMING_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max)
        var generator = SeededGenerator(seed: seed)
        for round in 0..<60 {
            let sequence = MixedSequence(using: &generator)
            let problem = try await world.problem(with: sequence)
            #expect(problem == nil, "seed \(seed) (PORTCULLIS_FRAMING_SEED), round \(round), \(sequence): \(problem ?? "")")
            if problem != nil { break }
        }
        try await world.stop()
    }

    @Test(
        "HEAD on every GET route of the gateway itself answers as GET does, without the body",
        arguments: ["/healthz", "/readyz", "/.well-known/jwks.json", "/.well-known/oauth-authorization-server", "/.well-known/openapi.yaml", "/client/portcullis.js", "/demo/"])
    func headOnGatewayRoutes(path: String) async throws {
        let fixture = try await GatewayFixture()
        let port = fixture.gatewayPort
        let (get, head) = try await onOwnThread { () throws -> (StrictAnswerReader.Answer, StrictAnswerReader.Answer) in
            let connection = try RawConnection(port: port, receiveTimeout: 10)
            defer { connection.close() }
            connection.send("GET \(path) HTTP/1.1\r\nHost: gw\r\n\r\nHEAD \(path) HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
            let answers = try StrictAnswerReader.readAll(connection.readAll(), methods: ["GET", "HEAD"])
            guard answers.count == 2 else { throw StrictAnswerReader.Failure(message: "\(answers.count) answers", offset: 0) }
            return (answers[0], answers[1])
        }
        #expect(get.status == 200 && head.status == 200, "GET \(get.status), HEAD \(head.status)")
        #expect(!get.body.isEmpty)
        #expect(head.body.isEmpty)
        #expect(head.field("content-type") == get.field("content-type"), "\(head.field("content-type") ?? "none") vs \(get.field("content-type") ?? "none")")
        #expect(head.field("content-length") == get.field("content-length") || get.field("transfer-encoding") != nil)
        try await fixture.stop()
    }

    @Test("a HEAD refused on the data plane's front (the connection's first request, no token) is answered 401 without a body, and the request after it in turn")
    func headRefusedOnTheFront() async throws {
        let world = try await World.start()
        let sequence = MixedSequence(requests: [.refusedHEAD, .relayedGET, .refusedHEAD, .relayedChunkedHEAD, .relayedGET], ending: .close, pipelined: true)
        let problem = try await world.problem(with: sequence)
        #expect(problem == nil, "\(sequence): \(problem ?? "")")
        try await world.stop()
    }

    @Test(
        "a request asking for an upgrade the gateway does not perform (h2c on /healthz, a WebSocket to a proxied route), first on its connection or after another, is answered as plain HTTP/1.1 and the connection then closes, never left silent",
        arguments: [MixedEnding.upgradeH2C, .upgradeWebSocketToRoute], [false, true])
    func unperformedUpgradeAnswered(upgrade: MixedEnding, afterAnother: Bool) async throws {
        let world = try await World.start()
        let port = world.fixture.gatewayPort
        let before = afterAnother ? MixedRequest.healthGET.bytes(token: "") : ""
        let started = ContinuousClock.now
        let (bytes, closed) = try await onOwnThread { () throws -> ([UInt8], Bool) in
            let connection = try RawConnection(port: port, receiveTimeout: 8)
            defer { connection.close() }
            // A request pipelined behind it: not read (NIO's parser reads nothing after an upgrade request).
            connection.send(before + upgrade.bytes + "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
            let bytes = connection.readAll()
            return (bytes, connection.isClosedByPeer)
        }
        let answers = try StrictAnswerReader.readAll(bytes, methods: afterAnother ? ["GET", "GET"] : ["GET"])
        #expect(answers.map(\.status) == (afterAnother ? [200] : []) + [upgrade.statuses.first ?? 0], "\(upgrade): \(answers.map(\.status))")
        #expect(answers.last?.field("connection")?.lowercased() == "close" || closed, "the answer closes the connection")
        #expect(closed && ContinuousClock.now - started < .seconds(6), "closed by the gateway, not left open until a timeout")
        try await world.stop()
    }

    @Test(
        "an unperformed upgrade whose Connection lists Content-Length or Transfer-Encoding keeps its framing: the body goes upstream as the body, never as a second request",
        arguments: [
            "Connection: Upgrade, content-length\r\nContent-Length: LENGTH\r\n\r\nBODY",
            "Connection: Upgrade, Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\nHEX\r\nBODY\r\n0\r\n\r\n",
        ])
    func unperformedUpgradeKeepsItsFraming(framing: String) async throws {
        let targets = RecordingUpstream.Targets()
        let upstream = try await RecordingUpstream.start(recording: targets)
        let fixture = try await GatewayFixture { $0.routes = [ProxyRoute(prefix: "/api/svc", upstream: "http://127.0.0.1:\(upstream.port)")] }
        try await fixture.addUser("alice")
        let token = try await fixture.login("alice").accessToken
        let smuggled = "GET /smuggled HTTP/1.1\r\nHost: gw\r\n\r\n"
        let request = "POST /api/svc/item HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer \(token)\r\nUpgrade: x\r\n"
            + framing.replacingOccurrences(of: "LENGTH", with: "\(smuggled.utf8.count)").replacingOccurrences(of: "HEX", with: String(smuggled.utf8.count, radix: 16))
            .replacingOccurrences(of: "BODY", with: smuggled)
        let port = fixture.gatewayPort
        let bytes = try await onOwnThread { () throws -> [UInt8] in
            let connection = try RawConnection(port: port, receiveTimeout: 8)
            defer { connection.close() }
            connection.send(request)
            return connection.readAll()
        }
        let answers = try StrictAnswerReader.readAll(bytes, methods: ["POST"])
        #expect(answers.count == 1 && answers.first?.status == 200, "\(answers.map(\.status))")
        // A moment for a smuggled request to arrive, were there one.
        try await Task.sleep(for: .milliseconds(300))
        #expect(targets.all.allSatisfy { !$0.contains("smuggled") }, "the upstream received: \(targets.all)")
        #expect(targets.all.count == 1, "\(targets.all)")
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test(
        "a request answered before its body has ended, whose rest is then malformed, has that one answer and the connection closes: never a second answer (a 400) for one request",
        arguments: [
            "POST /healthz HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
            "POST /nowhere HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
            "POST /api/svc/item HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        ])
    func malformedBodyAfterItsAnswer(start: String) async throws {
        let world = try await World.start()
        let port = world.fixture.gatewayPort
        let (first, rest, closed) = try await onOwnThread { () throws -> ([UInt8], [UInt8], Bool) in
            let connection = try RawConnection(port: port, receiveTimeout: 5)
            defer { connection.close() }
            connection.send(start)
            let first = connection.readUntil("}")
            // The rest of the body, malformed: a chunk size that is not hexadecimal.
            connection.send("zz\r\nnot a chunk\r\n0\r\n\r\n")
            let rest = connection.readAll()
            return (first, rest, connection.isClosedByPeer)
        }
        let answers = try StrictAnswerReader.readAll(first + rest, methods: ["POST"])
        #expect(answers.count == 1, "\(start.prefix(20)): \(answers.map(\.status)), then \(String(decoding: rest, as: UTF8.self))")
        #expect(rest.isEmpty && closed, "nothing after the one answer, and the connection closed: \(String(decoding: rest, as: UTF8.self))")
        try await world.stop()
    }

    @Test("found by the property test (seed 5145563922295242127): an unparsable head pipelined behind relayed and API requests is answered 400 after every earlier answer, and the rest of its read does not close the connection under them")
    func unparsableBehindRelayedRequests() async throws {
        let world = try await World.start()
        let sequence = MixedSequence(
            requests: [.jwksHEAD, .relayedGET, .badLogin, .relayedHEAD, .methodNotAllowed, .healthHEAD, .relayedHEAD, .methodNotAllowed, .notFoundGET, .badLogin],
            ending: .unparsable, pipelined: true)
        for attempt in 0..<5 {
            let problem = try await world.problem(with: sequence)
            #expect(problem == nil, "attempt \(attempt): \(problem ?? "")")
        }
        try await world.stop()
    }
}
