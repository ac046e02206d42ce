@testable import DataPlane
@testable import EdgeHTTP
import Foundation
@testable import Gateway
import Glibc
import JOSE
import Logging
import PortcullisTestSupport
import Runtime
import RuntimeAPI
@testable import RuntimeAccess
import ServiceLifecycle
import StateSurface
import Testing

/// A server run in its own service group on a loopback port, so a test can stop
/// and restart it under a live gateway.
struct BackgroundServer {
    let group: ServiceGroup
    let task: Task<Void, any Error>
    let port: Int

    /// Starts the service `make` builds (handing it the callback that reports its port) and waits for the port.
    /// Throws if the server stops before it listens (its port taken, say), rather than waiting forever.
    static func start(_ make: (@escaping @Sendable (Int) async -> Void) -> any Service) async throws -> BackgroundServer {
        let start = ServiceGroupStart<String>()
        let service = make { start.report("server", $0) }
        var configuration = ServiceGroupConfiguration(services: [.init(service: service)], logger: Logger(label: "test.server"))
        // As limits.shutdown_timeout_seconds bounds `portcullis runtime`'s: a connection the gateway
        // opened just as the stop began (its first request not yet read) is not told to quiesce.
        configuration.maximumGracefulShutdownDuration = .seconds(10)
        let group = ServiceGroup(configuration: configuration)
        let (task, ports) = try await start.run(group, expected: 1)
        return BackgroundServer(group: group, task: task, port: ports["server", default: 0])
    }

    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }
}

/// A Runtime run on its own, on the fixture's store and keys.
enum StandaloneRuntime {
    /// - Parameter port: 0 for any; a given port (a restart on the port the gateway knows) is
    ///   tried again for up to 20 s while another socket holds it, as an operator's restart would.
    static func start(directory: String, port: Int = 0) async throws -> BackgroundServer {
        let state = try SQLiteStateSurface(path: directory + "/portcullis.sqlite")
        let keys = try LiveKeyRing(directory: KeyDirectory(path: directory + "/keys"))
        var configuration = RuntimeConfiguration()
        configuration.port = port
        let deadline = ContinuousClock.now + .seconds(20)
        while true {
            do {
                return try await BackgroundServer.start { onPort in
                    RuntimeServer.makeApplication(
                        configuration: configuration, state: state, keys: keys, logger: Logger(label: "test.runtime"), onServerRunning: onPort)
                }
            } catch where port != 0 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }
}

/// A listening TCP socket that never accepts: connections complete in the
/// kernel's backlog and requests are never read (a hung upstream, for real).
struct SilentListener {
    let descriptor: Int32
    let port: Int

    init() throws {
        (descriptor, port) = try LoopbackSocket.listen(backlog: 16)
    }

    func close() { _ = Glibc.close(descriptor) }
}

@Suite("The gateway when the Runtime goes away")
struct ResilienceTests {
    @Test("Runtime stopped: /readyz turns 503 and session calls answer 503 JSON, never 401/403; both recover when it returns")
    func runtimeStopped() async throws {
        let directory = NSTemporaryDirectory() + "portcullis-resilience-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        _ = try KeyDirectory(path: directory + "/keys").generate(algorithm: .es256)
        var runtime = try await StandaloneRuntime.start(directory: directory)
        let port = runtime.port
        let fixture = try await GatewayFixture(directory: directory, runtimeURL: "http://127.0.0.1:\(port)")
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        #expect(try await fixture.send(.GET, "/readyz").status == 200)

        try await runtime.stop()
        // Readiness answers from the background checks: it turns within a round (0.5 s while failing, 2 s otherwise).
        let ready = try await Answer.eventually(within: TimeBounds.seconds(15)) { try await fixture.send(.GET, "/readyz") } until: { $0.status == 503 }
        #expect(ready.status == 503)
        #expect(ready.json["checks"]?.objectValue?["runtime"] == "upstream_unavailable")
        #expect(ready.json["checks"]?.objectValue?["store"] == "ok")
        let read = try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken)
        #expect(read.status == 503)
        // The first call that finds the Runtime gone opens its circuit; later ones are refused at once.
        #expect(["upstream_unavailable", "runtime_unavailable"].contains(read.error))
        let create = try await fixture.post("/api/session/create-anonymous")
        #expect(create.status == 503)
        #expect(create.headers.first(name: "Content-Type") == "application/json")
        let relogin = try await fixture.loginAnswer("alice", password: "correct horse battery")
        #expect(relogin.status == 503)
        let intent = #"{"session_id":"\#(login.sessionID)","intent_type":"echo","payload":{}}"#
        let proxied = try await fixture.send(.POST, "/api/intent", bearer: login.accessToken, body: intent)
        #expect(proxied.status == 503)
        #expect(proxied.error == "runtime_unavailable", "refused at once while the circuit is open: \(proxied.raw)")
        #expect(proxied.headers.first(name: "Retry-After") != nil)
        #expect(try await fixture.send(.GET, "/healthz").status == 200)

        runtime = try await StandaloneRuntime.start(directory: directory, port: port)
        // Within 2 s when the machine is not busy (the PostgreSQL outage test holds that bound); generous here beside the whole suite.
        let back = try await Answer.eventually(within: TimeBounds.seconds(15)) { try await fixture.send(.GET, "/readyz") } until: { $0.status == 200 }
        #expect(back.status == 200, "ready again after the Runtime's return")
        let again = try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken)
        #expect(again.status == 200)
        #expect(again["session_id"] == login.sessionID)
        #expect(try await fixture.post("/api/session/create-anonymous").status == 201)
        #expect(try await fixture.send(.POST, "/api/intent", bearer: login.accessToken, body: intent).status == 200)
        try await fixture.stop(keepFiles: true)
        try await runtime.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test("Runtime stopped: a refresh of a session this gateway saw live is answered from its view (rotated, the spent token refused); login and an unknown session stay 503; runtime.outage_refresh_grace_seconds 0 turns it off")
    func refreshDuringRuntimeOutage() async throws {
        for grace in [300.0, 0] {
            let directory = NSTemporaryDirectory() + "portcullis-outage-refresh-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            _ = try KeyDirectory(path: directory + "/keys").generate(algorithm: .es256)
            let runtime = try await StandaloneRuntime.start(directory: directory)
            let fixture = try await GatewayFixture(directory: directory, runtimeURL: "http://127.0.0.1:\(runtime.port)") { $0.runtimeOutageRefreshGrace = grace }
            try await fixture.addUser("alice")
            try await fixture.addUser("bob")
            let alice = try await fixture.login("alice")
            let bob = try await fixture.login("bob")
            // Bob's session as if another gateway had made it: this one never saw it.
            fixture.server.services.sessionOwners.forget([bob.sessionID])

            try await runtime.stop()
            _ = try await Answer.eventually(within: TimeBounds.seconds(15)) { try await fixture.send(.GET, "/readyz") } until: { $0.status == 503 }
            // The first call that finds the Runtime gone opens its circuit (its own answer may be the slow one).
            _ = try await fixture.send(.GET, "/api/session/\(alice.sessionID)", bearer: alice.accessToken)

            let refreshed = try await fixture.refresh(alice.refreshToken)
            let unknown = try await fixture.refresh(bob.refreshToken)
            #expect(unknown.status == 503 && unknown.error == "runtime_unavailable", "a session this gateway never saw needs the Runtime: \(unknown.raw)")
            #expect(unknown.headers.first(name: "Retry-After") != nil)
            let relogin = try await fixture.loginAnswer("alice", password: "correct horse battery")
            #expect(relogin.status == 503 && relogin.error == "runtime_unavailable", "login makes or upgrades a session, which only the Runtime can: \(relogin.raw)")
            if grace > 0 {
                #expect(refreshed.status == 200, "\(refreshed.raw)")
                #expect(refreshed["session_id"] == alice.sessionID)
                let next = try #require(refreshed["refresh_token"])
                #expect(next != alice.refreshToken, "the refresh token is rotated as always")
                let access = try #require(refreshed["access_token"])
                // The new access token verifies: the read gets past authentication and is refused only for the Runtime's absence.
                let read = try await fixture.send(.GET, "/api/session/\(alice.sessionID)", bearer: access)
                #expect(read.status == 503 && read.error == "runtime_unavailable", "\(read.raw)")
                let spent = try await fixture.refresh(alice.refreshToken)
                #expect(spent.status == 401 && spent["reason"] == "refresh_reused", "the spent token is refused as reuse: \(spent.raw)")
                #expect(fixture.log.text.contains("refresh answered from the last known session"))
            } else {
                #expect(refreshed.status == 503 && refreshed.error == "runtime_unavailable", "grace 0: a refresh needs the Runtime: \(refreshed.raw)")
            }
            try await fixture.stop()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    @Test("a Runtime that accepts the connection but never answers: a call past runtime.timeout_seconds is 504 upstream_timeout and opens the circuit; then every call is 503 runtime_unavailable at once")
    func runtimeTimeout() async throws {
        let silent = try SilentListener()
        defer { silent.close() }
        let fixture = try await GatewayFixture(runtimeURL: "http://127.0.0.1:\(silent.port)") { $0.runtimeTimeout = 1 }
        // The background health check may have timed out first (and opened the circuit) while the fixture waited.
        let first = try await fixture.post("/api/session/create-anonymous")
        #expect((first.status, first.error) == (504, "upstream_timeout") || (first.status, first.error) == (503, "runtime_unavailable"), "\(first.raw)")
        let asked = ContinuousClock.now
        let answer = try await fixture.post("/api/session/create-anonymous")
        let elapsed = ContinuousClock.now - asked
        #expect(answer.status == 503 && answer.error == "runtime_unavailable", "\(answer.raw)")
        #expect(answer.headers.first(name: "Retry-After") == "5")
        #expect(elapsed < .milliseconds(Int64(TimeBounds.seconds(0.9) * 1000)), "refused at once, not after the 1 s timeout: \(elapsed)")
        try await fixture.stop()
    }

    @Test("a Runtime that refuses the gateway's assertion (other keys) is a 503, not a 401")
    func assertionRefusedIsInfrastructure() async throws {
        let runtimeDirectory = NSTemporaryDirectory() + "portcullis-otherkeys-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: runtimeDirectory, withIntermediateDirectories: true)
        _ = try KeyDirectory(path: runtimeDirectory + "/keys").generate(algorithm: .es256)
        let runtime = try await StandaloneRuntime.start(directory: runtimeDirectory)
        let fixture = try await GatewayFixture(runtimeURL: "http://127.0.0.1:\(runtime.port)")
        let answer = try await fixture.post("/api/session/create-anonymous")
        #expect(answer.status == 503)
        #expect(answer.error == "upstream_unavailable")
        #expect(answer["message"]?.contains("assertion") == true)
        try await fixture.stop()
        try await runtime.stop()
        try? FileManager.default.removeItem(atPath: runtimeDirectory)
    }
}

@Suite("The session ownership view during a Runtime outage")
struct SessionOwnershipViewTests {
    static func session(_ id: String, user: String = "u1", expiresIn: Double = 3_600) -> SessionView {
        SessionView(
            sessionID: id, state: .authenticated, userID: user, tenantID: "t", createdAt: SystemClock().now(), upgradedAt: nil,
            expiresAt: SystemClock().now() + expiresIn, metadata: JSONObject())
    }

    @Test("lastKnownOwnership answers from a view checked within the given staleness only, never for an expired session, and says false for another owner")
    func lastKnownOwnershipHasItsBounds() {
        let clock = ShiftedClock()
        let view = SessionOwnershipView(clock: clock, maximumStaleness: 2)
        view.remember(Self.session("s1"))
        view.remember(Self.session("s2", expiresIn: 100))
        #expect(view.lastKnownOwnership("s1", by: "u1", tenantID: "t", within: 300) == nil, "never checked: nothing to stand on")
        view.validated(at: clock.now())
        #expect(view.isOwned("s1", by: "u1", tenantID: "t") == true)
        #expect(view.lastKnownOwnership("s1", by: "u2", tenantID: "t", within: 300) == false)
        clock.advance(by: 60)
        #expect(view.isOwned("s1", by: "u1", tenantID: "t") == nil, "the usual answer needs a check within 2 s")
        #expect(view.lastKnownOwnership("s1", by: "u1", tenantID: "t", within: 300) == true)
        clock.advance(by: 60)
        #expect(view.lastKnownOwnership("s2", by: "u1", tenantID: "t", within: 300) == nil, "expired sessions are never vouched for")
        clock.advance(by: 200)
        #expect(view.lastKnownOwnership("s1", by: "u1", tenantID: "t", within: 300) == nil, "past the grace")
        #expect(view.lastKnownOwnership("nope", by: "u1", tenantID: "t", within: 300) == nil)
    }
}
