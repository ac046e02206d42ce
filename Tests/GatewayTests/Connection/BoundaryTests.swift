import Foundation
import GRDB
import Gateway
import Glibc
import HummingbirdWSClient
import JOSE
import PortcullisTestSupport
import SocketGuard
import Testing
import TrafficCop

/// Runs blocking socket work on a thread of its own. Not on GCD's global queue:
/// its few threads are shared with GRDB's queues, which the server under test
/// needs to answer, so blocked reads there can starve the very answer they wait for.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            continuation.resume(with: Result { try body() })
        }.start()
    }
}

/// One HTTP/1.1 request written byte for byte (no client library normalises the
/// path), answered status and body.
func rawHTTP(port: Int, _ method: String, _ target: String, bearer: String, body: String = "{}") async throws -> (status: Int, body: String) {
    try await onOwnThread {
        let connection = try RawConnection(port: port)
        defer { connection.close() }
        connection.send(
            "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(bearer)\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
        let text = connection.readAll().text
        let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
        return (status, text.components(separatedBy: "\r\n\r\n").dropFirst().joined())
    }
}

@Suite("The edge's boundary: only admitted operations reach the Runtime; accounts and limits hold")
struct BoundaryTests {
    /// Rows in the Runtime's sessions table (read straight from the file, as an auditor would).
    static func sessionRows(_ fixture: GatewayFixture) throws -> Int {
        try DatabaseQueue(path: fixture.state.path).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sessions") ?? 0 }
    }

    @Test("the Runtime's internal API is not public: every path that once reached it answers 404, in every spelling, and changes nothing")
    func runtimeAPIIsNotForwarded() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let alice = try await fixture.login("alice")
        let anonymous = try await fixture.createAnonymousSession()
        let before = try Self.sessionRows(fixture)
        let variants: [(String, String)] = [
            ("POST", "/api/runtime/sessions"), ("POST", "//api/runtime/sessions"), ("POST", "/api/runtime//sessions"),
            ("POST", "/api/./runtime/sessions"), ("POST", "/api/runtime/./sessions"), ("POST", "/api/x/../runtime/sessions"),
            ("POST", "/api/%72untime/sessions"), ("POST", "/api/runtime/%73essions"), ("POST", "/api/runtime/sessions%2F"),
            ("POST", "/API/RUNTIME/SESSIONS"), ("POST", "/api/Runtime/Sessions"), ("POST", "/api/runtime/sessions/"),
            ("POST", "/api/runtime/%2e/sessions"), ("POST", "/api/runtime/%2E%2E/runtime/sessions"),
            ("POST", "/api/intent/../runtime/sessions"), ("POST", "/api/intent/..%2fruntime%2fsessions"), ("POST", "/api/intent/x"),
            ("POST", "/api/runtime/sessions/\(anonymous)/upgrade"), ("POST", "/api/runtime/sessions/\(anonymous)/revoke"),
            ("POST", "/api/runtime/sessions/\(alice.sessionID)/revoke"), ("POST", "//api//runtime//sessions//\(alice.sessionID)//revoke"),
            ("GET", "/api/runtime/sessions/\(alice.sessionID)"), ("GET", "/api/runtime/health"), ("POST", "/api/runtime/intents"),
            ("POST", "/api/runtime/ended-sessions"), ("GET", "/api/runtime/executions/..%2Fsessions%2F\(alice.sessionID)"),
            ("GET", "/api/runtime/executions/%2e%2e/sessions/\(alice.sessionID)"), ("GET", "/api/runtime/executions/../sessions/\(alice.sessionID)"),
            ("POST", "/runtime/v1/sessions"), ("GET", "/runtime/v1/sessions/\(alice.sessionID)"), ("POST", "/runtime/v1/sessions/\(anonymous)/upgrade"),
        ]
        for (method, target) in variants {
            // 404 for a path that names no public route; 400 for one the normaliser refuses (an encoded slash).
            let answer = try await rawHTTP(port: fixture.gatewayPort, method, target, bearer: alice.accessToken)
            let expected = target.lowercased().contains("%2f") ? 400 : 404
            #expect(answer.status == expected, "\(method) \(target) answered \(answer.status): \(answer.body)")
        }
        // The admitted operations with other methods: refused (405 on a listed path), never forwarded.
        for (method, target) in [("DELETE", "/api/intent"), ("PUT", "/api/intent"), ("GET", "/api/intent"), ("POST", "/api/runtime/executions/exe_x"),
            ("DELETE", "/api/runtime/executions/exe_x")]
        {
            let answer = try await rawHTTP(port: fixture.gatewayPort, method, target, bearer: alice.accessToken)
            #expect([404, 405].contains(answer.status), "\(method) \(target) answered \(answer.status): \(answer.body)")
        }
        #expect(try Self.sessionRows(fixture) == before, "no session was created")
        #expect(try await fixture.send(.GET, "/api/session/\(anonymous)").json["state"] == "anonymous", "not upgraded")
        #expect(try await fixture.send(.GET, "/api/session/\(alice.sessionID)", bearer: alice.accessToken).status == 200, "not revoked")
        try await fixture.stop()
    }

    @Test("sessions per user cannot exceed the contract by any route: create, login with or without a session, and racing creates")
    func sessionsPerUser() async throws {
        let fixture = try await GatewayFixture {
            $0.contract.maximumSessionsPerUser = 3
            $0.rateLimits.sessionCreatePerUser = RateLimit(perMinute: 6_000, burst: 100)
            $0.rateLimits.loginPerUsername = RateLimit(perMinute: 6_000, burst: 100)
        }
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        let alice = try await fixture.login("alice")
        #expect(try await fixture.post("/api/session/create", bearer: alice.accessToken).status == 201)
        #expect(try await fixture.post("/api/session/create", bearer: alice.accessToken).status == 201)
        let fourth = try await fixture.post("/api/session/create", bearer: alice.accessToken)
        #expect(fourth.status == 429)
        #expect(fourth.error == "limit_reached")
        let anonymous = try await fixture.createAnonymousSession()
        let upgrade = try await fixture.loginAnswer("alice", password: "correct horse battery", sessionID: anonymous)
        #expect(upgrade.status == 429)
        #expect(upgrade.error == "limit_reached")
        #expect(try await fixture.send(.GET, "/api/session/\(anonymous)").json["state"] == "anonymous", "the refused login left the session as it was")
        let patch = try await fixture.send(.PATCH, "/api/session/\(anonymous)/upgrade", bearer: alice.accessToken)
        #expect(patch.status == 429)
        #expect(try await fixture.loginAnswer("alice", password: "correct horse battery").status == 429)
        // Logging in again with a session the user already owns is not a new session.
        #expect(try await fixture.loginAnswer("alice", password: "correct horse battery", sessionID: alice.sessionID).status == 200)

        // Racing: bob holds 1; twelve concurrent creations may add exactly 2.
        let bob = try await fixture.login("bob")
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<12 { group.addTask { try await fixture.post("/api/session/create", bearer: bob.accessToken).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == 201 }.count == 2, "\(statuses)")
        #expect(statuses.filter { $0 == 429 }.count == 10, "\(statuses)")
        try await fixture.stop()
    }

    @Test("users disable while serving, from another process: socket closed 1008 within a second, refresh and old tokens 401, login 401 like a wrong password; enable: login works, old tokens stay dead")
    func disableWhileServing() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let wrongPassword = try await fixture.loginAnswer("alice", password: "not the password")
        let url = "ws://127.0.0.1:\(fixture.gatewayPort)/api/runtime/agent"
        let headers = [("Authorization", "Bearer \(login.accessToken)"), ("X-Session-Id", login.sessionID)]
        let transcript = try await AgentRelayTests.session(url, headers: headers) { outbound, iterator, _ in
            try await outbound.write(.text(#"{"type":"ping"}"#))
            #expect(try await AgentRelayTests.nextJSON(&iterator)["type"] == "pong")
            let disabled = try await runPortcullis(["users", "disable", "alice", "--tenant", "default", "--database", fixture.state.path])
            #expect(disabled.status == 0, "\(disabled.output)")
            #expect(disabled.output.contains("1 session(s) ended"), "\(disabled.output)")
        }
        #expect(transcript.close?.closeCode == .policyViolation)
        #expect(transcript.close?.reason == "account disabled")
        // Two sync periods of 0.5 s bound it once the command has committed; the time counts the command's
        // own start too (a process of the debug build), which took 3.03 s on CI's two loaded cores.
        #expect(transcript.secondsToClose < TimeBounds.seconds(5), "closed \(transcript.secondsToClose) s after the disable")

        let refresh = try await fixture.refresh(login.refreshToken)
        #expect(refresh.status == 401)
        let old = try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken)
        #expect(old.status == 401)
        #expect(old.error == "token_revoked")
        let refused = try await fixture.loginAnswer("alice", password: "correct horse battery")
        #expect(refused.status == 401)
        #expect(refused.raw == wrongPassword.raw, "a disabled account's login is indistinguishable from a wrong password")

        let enabled = try await runPortcullis(["users", "enable", "alice", "--tenant", "default", "--database", fixture.state.path])
        #expect(enabled.status == 0, "\(enabled.output)")
        try await Task.sleep(for: .milliseconds(1_100))  // a token issued in the disable's second is refused too (documented)
        let again = try await fixture.login("alice")
        #expect(try await fixture.send(.GET, "/api/session/\(again.sessionID)", bearer: again.accessToken).status == 200)
        #expect(try await fixture.send(.GET, "/api/session/\(again.sessionID)", bearer: login.accessToken).status == 401, "old tokens stay dead")
        #expect(try await runPortcullis(["users", "disable", "nobody", "--tenant", "default", "--database", fixture.state.path]).status != 0)
        try await fixture.stop()
    }

    @Test("users passwd while serving, from another process: the socket closes 1008 \"password changed\" (not \"account disabled\"), and the new password logs in")
    func passwordChangeWhileServing() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let url = "ws://127.0.0.1:\(fixture.gatewayPort)/api/runtime/agent"
        let headers = [("Authorization", "Bearer \(login.accessToken)"), ("X-Session-Id", login.sessionID)]
        let newPassword = "a new and longer password"
        let transcript = try await AgentRelayTests.session(url, headers: headers) { outbound, iterator, _ in
            try await outbound.write(.text(#"{"type":"ping"}"#))
            #expect(try await AgentRelayTests.nextJSON(&iterator)["type"] == "pong")
            let changed = try await runPortcullis(
                ["users", "passwd", "alice", "--tenant", "default", "--password-stdin", "--database", fixture.state.path], input: newPassword + "\n")
            #expect(changed.status == 0, "\(changed.output)")
        }
        #expect(transcript.close?.closeCode == .policyViolation)
        #expect(transcript.close?.reason == "password changed")
        #expect(try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken).status == 401)
        try await Task.sleep(for: .milliseconds(1_100))  // a token issued in the change's second is refused too
        #expect(try await fixture.loginAnswer("alice", password: newPassword).status == 200)
        try await fixture.stop()
    }

    @Test("users delete while serving, from another process: the socket closes 1008 \"account deleted\", and the action's line names the person by id alone (their names are forgotten)")
    func deletionWhileServing() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let url = "ws://127.0.0.1:\(fixture.gatewayPort)/api/runtime/agent"
        let headers = [("Authorization", "Bearer \(login.accessToken)"), ("X-Session-Id", login.sessionID)]
        let transcript = try await AgentRelayTests.session(url, headers: headers) { outbound, iterator, _ in
            try await outbound.write(.text(#"{"type":"ping"}"#))
            #expect(try await AgentRelayTests.nextJSON(&iterator)["type"] == "pong")
            let deleted = try await runPortcullis(["users", "delete", "alice", "--tenant", "default", "--database", fixture.state.path])
            #expect(deleted.status == 0, "\(deleted.output)")
        }
        #expect(transcript.close?.closeCode == .policyViolation)
        #expect(transcript.close?.reason == "account deleted")
        #expect(try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken).status == 401)
        // The action's line names the id that stays, never the tombstone's `deleted:` name.
        let applied = await fixture.log.lines(containing: "administrative action applied", "account deleted", within: 5)
        #expect(applied.count == 1 && applied[0].contains(#""user_name":"-""#) && !applied[0].contains("deleted:usr_"), "\(applied)")
        try await fixture.stop()
    }

    /// Sends an upgrade and reads its answer's head on a thread of its own; the connection stays open.
    static func upgrade(port: Int, headers: [(String, String)]) async throws -> (status: Int, descriptor: Int32) {
        try await onOwnThread {
            let descriptor = try RawUpgrade.connectAndRequest(port: port, target: WebSocketGuard.path, headers: headers)
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !received.text.contains("\r\n\r\n") {
                let count = read(descriptor, &buffer, buffer.count)
                if count <= 0 { break }
                received.append(contentsOf: buffer[0..<count])
            }
            return (Int(received.text.split(separator: " ").dropFirst().first ?? "") ?? 0, descriptor)
        }
    }

    @Test("contracts.sockets_per_session is one step: 16 upgrades racing on one session with the limit at 4 leave exactly 4 open and 12 refused with 429 (three rounds)")
    func socketLimitRace() async throws {
        let fixture = try await GatewayFixture { $0.contract.maximumSocketsPerSession = 4 }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let headers = [("Authorization", "Bearer \(login.accessToken)"), ("X-Session-Id", login.sessionID)]
        let sockets = fixture.server.services.sockets
        for round in 1...3 {
            let answers = try await withThrowingTaskGroup(of: (status: Int, descriptor: Int32).self) { group in
                for _ in 0..<16 { group.addTask { try await Self.upgrade(port: fixture.gatewayPort, headers: headers) } }
                return try await group.reduce(into: [(status: Int, descriptor: Int32)]()) { $0.append($1) }
            }
            #expect(answers.filter { $0.status == 101 }.count == 4, "round \(round): \(answers.map(\.status))")
            #expect(answers.filter { $0.status == 429 }.count == 12, "round \(round): \(answers.map(\.status))")
            #expect(sockets.count(sessionID: login.sessionID) == 4)
            // Admitted sockets say goodbye with a (masked, empty) close frame, as a client does.
            try await onOwnThread {
                for answer in answers {
                    if answer.status == 101 {
                        let close: [UInt8] = [0x88, 0x80, 0, 0, 0, 0]
                        _ = close.withUnsafeBufferPointer { write(answer.descriptor, $0.baseAddress, $0.count) }
                        _ = RawConnection(descriptor: answer.descriptor).readAll()  // until the gateway closes
                    }
                    Glibc.close(answer.descriptor)
                }
            }
            for _ in 0..<200 where sockets.count(sessionID: login.sessionID) > 0 { try await Task.sleep(for: .milliseconds(25)) }
            #expect(sockets.count(sessionID: login.sessionID) == 0, "round \(round): every slot is given back when the sockets close")
        }
        // Every relay has finished with its Runtime side before the gateway stops.
        for _ in 0..<400 where fixture.log.text.components(separatedBy: "agent socket closed").count - 1 < 12 { try await Task.sleep(for: .milliseconds(25)) }
        try await fixture.stop()
    }
}
