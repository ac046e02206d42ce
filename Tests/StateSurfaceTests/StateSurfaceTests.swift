import Foundation
import JOSE
import RuntimeAPI
import Runtime
import StateSurface
import Synchronization
import Testing

/// A fresh directory for a real SQLite file, removed afterwards.
final class TemporaryDatabase: Sendable {
    let directory: String
    var path: String { directory + "/state/portcullis.sqlite" }

    init() {
        directory = NSTemporaryDirectory() + "portcullis-state-" + UUID().uuidString
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A clock the test moves by hand.
final class ManualClock: TokenClock {
    private let instant: Mutex<Double>

    init(_ start: Double = 1_800_000_000) {
        instant = Mutex(start)
    }

    func now() -> Double { instant.withLock { $0 } }

    func advance(_ seconds: Double) {
        instant.withLock { $0 += seconds }
    }
}

@Suite("State Surface (sessions), on SQLite and PostgreSQL")
struct StateSurfaceTests {
    @Test("the database is created with its directory, in WAL mode, and passes an integrity check")
    func opens() async throws {
        let temp = TemporaryDatabase()
        let state = try SQLiteStateSurface(path: temp.path)
        #expect(FileManager.default.fileExists(atPath: temp.path))
        #expect(try await state.journalMode() == "wal")
        #expect(try await state.integrityCheck() == "ok")
    }

    @Test("sessions survive closing and reopening the database", arguments: StoreKind.available)
    func survivesRestart(kind: StoreKind) async throws {
        let store = try await TestStore(kind)
        var ids: [String] = []
        do {
            let state = try await store.open()
            let sessions = SessionService(repository: state, configuration: RuntimeConfiguration())
            for _ in 0..<5 { ids.append(try await sessions.createAnonymous(metadata: ["n": 1]).id) }
            _ = try await sessions.upgrade(ids[0], userID: "alice", tenantID: "acme")
            await state.shutdown()
        }
        let reopened = try await store.open()
        for id in ids {
            #expect(try await reopened.session(id: id) != nil)
        }
        let first = try #require(try await reopened.session(id: ids[0]))
        #expect(first.state == .authenticated)
        #expect(first.userID == "alice")
        #expect(first.metadata == "{\"n\":1}")
    }

    @Test("a session id is ses_ and 22 base64url characters of 16 random bytes; near misses are not well formed")
    func sessionIDs() throws {
        let id = try SessionID.generate()
        #expect(id.count == 26 && id.hasPrefix("ses_"))
        #expect(SessionID.isWellFormed(id))
        #expect(try SessionID.generate() != id)
        for bad in ["", "ses_", String(id.dropLast()), id + "A", "SES_" + id.dropFirst(4), "ses_" + String(repeating: "+", count: 22), "ses_AAAAAAAAAAAAAAAAAAAAAB"] {
            #expect(!SessionID.isWellFormed(bad), "\(bad)")
        }
    }

    @Test("a token given as a session id is named as the mix-up, without repeating it")
    func credentialConfusion() throws {
        let jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"
        #expect(SessionID.problem(with: jwt) == .accessTokenGiven)
        #expect(SessionID.problem(with: jwt)?.message.contains("access token was sent where a session_id is expected") == true)
        #expect(SessionID.problem(with: "rt_" + String(repeating: "A", count: 43)) == .refreshTokenGiven)
        #expect(SessionID.problem(with: nil) == .missing)
        #expect(SessionID.problem(with: "") == .missing)
        #expect(SessionID.problem(with: "ses_short") == .malformed)
        #expect(SessionID.problem(with: try SessionID.generate()) == nil)
        for problem in [SessionID.Problem.accessTokenGiven, .refreshTokenGiven, .malformed, .missing] {
            #expect(!problem.message.contains("eyJ"))
        }
    }

    @Test("50 concurrent upgrades of one anonymous session: exactly one wins, the rest lose, the winner owns it", arguments: StoreKind.available)
    func concurrentUpgrades(kind: StoreKind) async throws {
        let store = try await TestStore(kind)
        let state = try await store.open()
        let sessions = SessionService(repository: state, configuration: RuntimeConfiguration())
        let session = try await sessions.createAnonymous()
        let now = Date().timeIntervalSince1970
        let outcomes = await withTaskGroup(of: (String, SessionUpgradeOutcome?).self) { group in
            for index in 0..<50 {
                group.addTask {
                    let user = "user\(index)"
                    let outcome = try? await state.upgradeSession(id: session.id, userID: user, tenantID: "acme", now: now, expiresAt: now + 3600, absoluteExpiresAt: now + 7200, maximumLiveForOwner: nil)
                    return (user, outcome)
                }
            }
            var all: [(String, SessionUpgradeOutcome?)] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        let winners = outcomes.filter { if case .upgraded? = $0.1 { return true } else { return false } }
        let losers = outcomes.filter { $0.1 == .lost }
        #expect(winners.count == 1)
        #expect(losers.count == 49)
        let stored = try #require(try await state.session(id: session.id))
        #expect(stored.state == .authenticated)
        #expect(stored.userID == winners.first?.0)
        #expect(stored.version == 2)
    }

    @Test("upgrading again as the owner is not a conflict; as anyone else it is", arguments: StoreKind.available)
    func upgradeByOwnerAndOthers(kind: StoreKind) async throws {
        let store = try await TestStore(kind)
        let state = try await store.open()
        let sessions = SessionService(repository: state, configuration: RuntimeConfiguration())
        let session = try await sessions.createAnonymous()
        _ = try await sessions.upgrade(session.id, userID: "alice", tenantID: "acme")
        #expect(try await sessions.upgrade(session.id, userID: "alice", tenantID: "acme").userID == "alice")
        await #expect { try await sessions.upgrade(session.id, userID: "bob", tenantID: "acme") } throws: { ($0 as? RuntimeError)?.code.rawValue == "session_conflict" }
        await #expect { try await sessions.upgrade(session.id, userID: "alice", tenantID: "other") } throws: { ($0 as? RuntimeError)?.code.rawValue == "session_conflict" }
    }

    @Test("anonymous sessions expire after 30 idle minutes; activity extends them", arguments: StoreKind.available)
    func anonymousIdleExpiry(kind: StoreKind) async throws {
        let store = try await TestStore(kind)
        let clock = ManualClock()
        let state = try await store.open()
        let sessions = SessionService(repository: state, configuration: RuntimeConfiguration(), clock: clock)
        let session = try await sessions.createAnonymous()
        clock.advance(29 * 60)
        let live = try await sessions.live(session.id)
        try await sessions.touch(live)
        clock.advance(29 * 60)
        #expect(try await sessions.live(session.id).id == session.id)
        clock.advance(2 * 60)
        await #expect { try await sessions.live(session.id) } throws: { ($0 as? RuntimeError)?.code.rawValue == "session_not_found" }
    }

    @Test("authenticated sessions expire after 24 idle hours, and after 7 days however active", arguments: StoreKind.available)
    func authenticatedExpiry(kind: StoreKind) async throws {
        let store = try await TestStore(kind)
        let clock = ManualClock()
        let state = try await store.open()
        let sessions = SessionService(repository: state, configuration: RuntimeConfiguration(), clock: clock)
        let idle = try await sessions.createAuthenticated(userID: "alice", tenantID: "acme")
        clock.advance(24 * 3600 + 1)
        await #expect { try await sessions.live(idle.id) } throws: { ($0 as? RuntimeError)?.code.rawValue == "session_not_found" }

        let busy = try await sessions.createAuthenticated(userID: "alice", tenantID: "acme")
        for _ in 0..<7 {
            clock.advance(23 * 3600)
            try await sessions.touch(try await sessions.live(busy.id))
        }
        // 161 hours in, touched an hour ago: still live until the 168-hour limit.
        #expect(try await sessions.live(busy.id).absoluteExpiresAt == busy.absoluteExpiresAt)
        clock.advance(7 * 3600 + 1)
        await #expect { try await sessions.live(busy.id) } throws: { ($0 as? RuntimeError)?.code.rawValue == "session_not_found" }
    }

    @Test("a revoked session reads as not found, and the sweeper deletes ended sessions only", arguments: StoreKind.available)
    func revokeAndSweep(kind: StoreKind) async throws {
        let store = try await TestStore(kind)
        let clock = ManualClock()
        let state = try await store.open()
        let sessions = SessionService(repository: state, configuration: RuntimeConfiguration(), clock: clock)
        let kept = try await sessions.createAuthenticated(userID: "alice", tenantID: "acme")
        let revoked = try await sessions.createAuthenticated(userID: "alice", tenantID: "acme")
        let expired = try await sessions.createAnonymous()
        let owner = RuntimeCaller(userID: "alice", tenantID: "acme", sessionID: nil)
        _ = try await sessions.revoke(revoked.id, by: owner)
        await #expect { try await sessions.live(revoked.id) } throws: { ($0 as? RuntimeError)?.code.rawValue == "session_not_found" }
        clock.advance(31 * 60)
        #expect(try await state.deleteSessions(endedBefore: clock.now()) == 2)
        #expect(try await state.session(id: kept.id) != nil)
        #expect(try await state.session(id: revoked.id) == nil)
        #expect(try await state.session(id: expired.id) == nil)
    }

    @Test("metadata merges under compare-and-set and is size-capped", arguments: StoreKind.available)
    func metadata(kind: StoreKind) async throws {
        let store = try await TestStore(kind)
        let state = try await store.open()
        let sessions = SessionService(repository: state, configuration: RuntimeConfiguration())
        let session = try await sessions.createAnonymous(metadata: ["a": 1, "b": 2])
        let merged = try await sessions.mergeMetadata(session.id, patch: ["b": nil, "c": "x"])
        #expect(merged.metadata == "{\"a\":1,\"c\":\"x\"}")
        #expect(try await state.replaceMetadata(id: session.id, expectedVersion: session.version, metadata: "{}", now: Date().timeIntervalSince1970) == nil)
        await #expect { try await sessions.mergeMetadata(session.id, patch: ["big": .string(String(repeating: "x", count: 5000))]) } throws: {
            ($0 as? RuntimeError)?.code.rawValue == "payload_too_large"
        }
    }
}
