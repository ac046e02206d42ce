import Foundation
import GRDB
import Gateway
import JOSE
import Synchronization
import Testing

@Suite("Faults: the store locked, keys rotated under load")
struct FaultTests {
    @Test("SQLite locked by another process: writes wait up to the busy timeout, then 503 (never 401/403, never a crash); service resumes when the lock goes")
    func storeLocked() async throws {
        let fixture = try await GatewayFixture(busyTimeout: 1)
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        // Another connection takes the write lock and holds it.
        let other = try DatabaseQueue(path: fixture.directory + "/portcullis.sqlite")
        let release = Mutex(false)
        let locked = Mutex(false)
        let held = Task.detached {
            try await other.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN IMMEDIATE")
                locked.withLock { $0 = true }
                while !release.withLock({ $0 }) { Thread.sleep(forTimeInterval: 0.02) }
                try db.execute(sql: "COMMIT")
            }
        }
        while !locked.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(20)) }
        let started = ContinuousClock.now
        let create = try await fixture.post("/api/session/create-anonymous")
        let waited = ContinuousClock.now - started
        #expect(create.status == 503, "\(create.raw)")
        #expect(create.error == "upstream_unavailable" || create.error == "unavailable")
        #expect(waited >= .milliseconds(800), "the write waited for the busy timeout first (\(waited))")
        let refresh = try await fixture.refresh(login.refreshToken)
        #expect(refresh.status == 503, "\(refresh.raw)")
        // Reads still work in WAL mode: an authenticated read is served.
        #expect(try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken).status == 200)
        release.withLock { $0 = true }
        try await held.value
        #expect(try await fixture.post("/api/session/create-anonymous").status == 201)
        let again = try await fixture.refresh(login.refreshToken)
        #expect(again.status == 200, "the refresh token was not spent by the failed attempt")
        try await fixture.stop()
    }

    @Test("keys rotated under load: no request with a valid token is refused during or after the rotation")
    func rotationUnderLoad() async throws {
        let fixture = try await GatewayFixture {
            $0.rateLimits.loginPerUsername = .init(perMinute: 6_000, burst: 500)
            $0.rateLimits.loginPerClient = .init(perMinute: 6_000, burst: 500)
            $0.contract.maximumSessionsPerUser = 1_000
        }
        try await fixture.addUser("alice")
        let directory = KeyDirectory(path: fixture.directory + "/keys")
        _ = try directory.generate(algorithm: .es256, status: .next)
        try fixture.keys.reloadIfChanged()
        let before = try await fixture.login("alice")
        let refused = Counter()
        let served = Counter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    for round in 0..<30 {
                        // Old tokens, and tokens minted as the rotation happens.
                        let token = round % 3 == 0 ? try await fixture.login("alice").accessToken : before.accessToken
                        let answer = try await fixture.send(.GET, "/api/session/\(before.sessionID)", bearer: token)
                        if answer.status == 200 { served.increment() } else { refused.increment(); Issue.record("refused during the rotation: \(answer.status) \(answer.raw)") }
                        if worker == 0 && round == 10 {
                            try directory.rotate()
                            try fixture.keys.reloadIfChanged()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(refused.count == 0)
        #expect(served.count == 120)
        let after = try await fixture.login("alice")
        let verified = try AccessTokenVerifier(keys: fixture.keys, policy: .gateway(issuer: "http://127.0.0.1:8080", audience: "portcullis")).verify(after.accessToken)
        #expect(verified.keyID != (try AccessTokenVerifier(keys: fixture.keys, policy: .gateway(issuer: "http://127.0.0.1:8080", audience: "portcullis")).verify(before.accessToken).keyID))
        try await fixture.stop()
    }
}

final class Counter: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}
