import AsyncHTTPClient
import Foundation
import Gateway
import HummingbirdWSClient
import JOSE
import Logging
import NIOCore
import PortcullisTestSupport
import SecurityGuard
import StateSurface
import Testing

@Suite("Faults with real processes and kill -9", .serialized)
struct ProcessFaultTests {
    static let ports = (gateway: 18_480, runtime: 18_481)

    func workspace() async throws -> String {
        let directory = NSTemporaryDirectory() + "portcullis-kill-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        _ = try KeyDirectory(path: directory + "/keys").generate(algorithm: .es256)
        let added = try await runPortcullis(
            ["users", "add", "alice", "--tenant", "default", "--password-stdin"], directory: directory, input: "correct horse battery")
        guard added.status == 0 else { throw FixtureError("users add alice failed: \(added.output)") }
        return directory
    }

    static let environment = ["GATEWAY_PORT": String(ports.gateway), "ADMIN_ENABLED": "false", "RUNTIME_PORT": "0"]

    @Test("the gateway killed with -9 during a burst of logins and session creations: after restart every acknowledged session and refresh token is there, and the database passes its integrity check")
    func gatewayKilled() async throws {
        let directory = try await workspace()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var serve = try PortcullisProcess(["serve"], directory: directory, environment: Self.environment, name: "serve1")
        let base = "http://127.0.0.1:\(Self.ports.gateway)"
        try await serve.waitUntilReady(base + "/readyz")

        let acknowledged = Acknowledged()
        let burst = Task {
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<6 {
                    group.addTask {
                        for _ in 0..<200 {
                            var request = HTTPClientRequest(url: base + (worker % 2 == 0 ? "/api/auth/login" : "/api/session/create-anonymous"))
                            request.method = .POST
                            if worker % 2 == 0 { request.body = .bytes(ByteBuffer(string: #"{"username":"alice","password":"correct horse battery"}"#)) }
                            guard let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(5)),
                                let body = try? await response.body.collect(upTo: 1 << 16),
                                let object = try? StrictJSONReader().parseObject(Array(body.readableBytesView))
                            else { return }
                            if (200..<300).contains(Int(response.status.code)), let session = object["session_id"]?.stringValue {
                                acknowledged.add(session: session, refresh: object["refresh_token"]?.stringValue)
                            }
                        }
                    }
                }
            }
        }
        // Kill once a few answers are in, while the rest of the burst is in flight
        // (waiting on a count, not a time: sanitized builds are slow).
        for _ in 0..<600 where acknowledged.snapshot.0.count < 10 { try await Task.sleep(for: .milliseconds(50)) }
        serve.kill9()
        await burst.value
        let (sessions, refreshTokens) = acknowledged.snapshot
        #expect(sessions.count > 5, "the burst got answers before the kill (\(sessions.count))")

        serve = try PortcullisProcess(["serve"], directory: directory, environment: Self.environment, name: "serve2")
        defer { serve.terminate() }
        try await serve.waitUntilReady(base + "/readyz")
        let state = try SQLiteStateSurface(path: directory + "/data/portcullis.sqlite")
        #expect(try await state.integrityCheck() == "ok")
        for session in sessions {
            #expect(try await state.session(id: session) != nil, "acknowledged session \(session) is missing")
        }
        for token in refreshTokens {
            #expect(try await state.refreshToken(hash: try RefreshTokenService.hash(token)) != nil, "an acknowledged refresh token is missing")
        }
    }

    @Test("the Runtime killed with -9 while a socket is open and requests arrive: 1011 with a reason, 503 JSON, /readyz 503, the gateway stays up; all recovers when it returns")
    func runtimeKilled() async throws {
        let directory = try await workspace()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The same environment as serve: the Runtime derives the gateway's issuer (its port) as the gateway does.
        let runtimeArguments = ["runtime", "--port", String(Self.ports.runtime)]
        var runtime = try PortcullisProcess(runtimeArguments, directory: directory, environment: Self.environment, name: "runtime1")
        // Stopped whatever fails below (the second Runtime replaces it once this one is killed).
        let first = runtime
        defer { first.terminate() }
        var environment = Self.environment
        environment["RUNTIME_URL"] = "http://127.0.0.1:\(Self.ports.runtime)"
        let serve = try PortcullisProcess(["serve"], directory: directory, environment: environment, name: "serve")
        defer { serve.terminate() }
        let base = "http://127.0.0.1:\(Self.ports.gateway)"
        try await serve.waitUntilReady(base + "/readyz")

        var login = HTTPClientRequest(url: base + "/api/auth/login")
        login.method = .POST
        login.body = .bytes(ByteBuffer(string: #"{"username":"alice","password":"correct horse battery"}"#))
        let answer = try await HTTPClient.shared.execute(login, timeout: .seconds(10))
        let tokens = try StrictJSONReader().parseObject(Array(try await answer.body.collect(upTo: 1 << 16).readableBytesView))
        let token = try #require(tokens["access_token"]?.stringValue)
        let sessionID = try #require(tokens["session_id"]?.stringValue)
        let url = "ws://127.0.0.1:\(Self.ports.gateway)/api/runtime/agent?access_token=\(token)&session_id=\(sessionID)"

        let killer = runtime
        let transcript = try await AgentRelayTests.session(url) { outbound, iterator, _ in
            try await outbound.write(.text(#"{"type":"ping"}"#))
            _ = try await iterator.next()
            killer.kill9()
        }
        #expect(transcript.close?.closeCode == .unexpectedServerError, "\(String(describing: transcript.close))")
        #expect(transcript.close?.reason?.isEmpty == false)

        let ready = try await Answer.eventually(within: TimeBounds.seconds(15)) { try await Answer.request(.GET, base + "/readyz") } until: { $0.status == 503 }
        #expect(ready.status == 503)
        #expect(ready.raw.contains("upstream_unavailable"))
        var read = HTTPClientRequest(url: base + "/api/session/\(sessionID)")
        read.headers.add(name: "Authorization", value: "Bearer \(token)")
        let down = try await HTTPClient.shared.execute(read, timeout: .seconds(10))
        #expect(down.status.code == 503)
        #expect(String(buffer: try await down.body.collect(upTo: 1 << 16)).contains(#""error":"runtime_unavailable""#), "the Runtime's circuit is open")
        #expect(try await httpGet(base + "/healthz").1 == 200, "the gateway stays up")
        // A client asking why its socket closed hears 503, not 426 ("would be admitted"), while the Runtime is away.
        let diagnose = { try await Answer.request(.GET, base + "/api/runtime/agent", bearer: token, headers: [("X-Session-Id", sessionID)]) }
        let why = try await diagnose()
        #expect(why.status == 503, "the socket path's diagnosis while the Runtime is down: \(why.status)")
        #expect(why.raw.contains(#""error":"runtime_unavailable""#))

        runtime = try PortcullisProcess(runtimeArguments, directory: directory, environment: Self.environment, name: "runtime2")
        defer { runtime.terminate() }
        try await serve.waitUntilReady(base + "/readyz")
        let up = try await HTTPClient.shared.execute(read, timeout: .seconds(10))
        #expect(up.status.code == 200)
        #expect(try await diagnose().status == 426, "would be admitted again")
        let again = try await AgentRelayTests.session(url) { outbound, iterator, transcript in
            try await outbound.write(.text(#"{"type":"ping"}"#))
            if case .text(let text)? = try await iterator.next() { transcript.messages.append(try StrictJSONReader().parseObject(Array(text.utf8))) }
            try await outbound.close(.normalClosure, reason: nil)
        }
        #expect(again.messages.first?["type"] == "pong")
        // The gateway keeps its agent link open; SIGTERM must still stop the Runtime.
        #expect(runtime.terminate(within: 15), "the Runtime did not stop within 15 s of SIGTERM with the gateway's agent link open")
    }
}

final class Acknowledged: @unchecked Sendable {
    private let lock = NSLock()
    private var sessions: [String] = []
    private var refreshTokens: [String] = []

    func add(session: String, refresh: String?) {
        lock.withLock {
            sessions.append(session)
            if let refresh { refreshTokens.append(refresh) }
        }
    }

    var snapshot: ([String], [String]) { lock.withLock { (sessions, refreshTokens) } }
}
