import Foundation
import JOSE
import SecurityGuard
import StateSurface
import Synchronization
import Testing

final class StepClock: TokenClock {
    private let instant = Mutex<Double>(1_800_000_000)
    func now() -> Double { instant.withLock { $0 } }
    func advance(_ seconds: Double) { instant.withLock { $0 += seconds } }
}

@Suite("Refresh tokens and revoked access tokens")
struct RefreshTokenTests {
    let directory = NSTemporaryDirectory() + "portcullis-refresh-" + UUID().uuidString

    func service(clock: any TokenClock = SystemClock()) throws -> (RefreshTokenService, SQLiteStateSurface) {
        let state = try SQLiteStateSurface(path: directory + "/p.sqlite")
        return (RefreshTokenService(credentials: state, clock: clock), state)
    }

    @Test("a refresh token is rt_ and 32 random bytes, stored only as its hash")
    func form() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (refresh, _) = try service()
        let issued = try await refresh.issue(sessionID: "ses_x", userID: "u1", tenantID: "t1")
        #expect(issued.token.hasPrefix("rt_") && issued.token.count == 46)
        #expect(issued.record.tokenHash == (try RefreshTokenService.hash(issued.token)))
        #expect(!issued.record.tokenHash.contains(issued.token.dropFirst(3)))
        let database = try Data(contentsOf: URL(fileURLWithPath: directory + "/p.sqlite"))
        let wal = (try? Data(contentsOf: URL(fileURLWithPath: directory + "/p.sqlite-wal"))) ?? Data()
        #expect(database.range(of: Data(issued.token.utf8)) == nil && wal.range(of: Data(issued.token.utf8)) == nil)
    }

    @Test("rotation gives a new token in the same family; reusing the spent one revokes the whole family")
    func rotationAndReuse() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (refresh, _) = try service()
        let first = try await refresh.issue(sessionID: "ses_a", userID: "u1", tenantID: "t1")
        let second = try await refresh.rotate(first.token)
        #expect(second.token != first.token)
        #expect(second.record.familyID == first.record.familyID)
        #expect(second.record.sessionID == "ses_a")
        await #expect(throws: RefreshFailure.reused(sessionID: "ses_a", userID: "u1", tenantID: "t1")) { try await refresh.rotate(first.token) }
        await #expect(throws: RefreshFailure.revoked) { try await refresh.rotate(second.token) }
        await #expect(throws: RefreshFailure.unknown) { try await refresh.rotate("rt_" + Base64URL.encode([UInt8](repeating: 1, count: 32))) }
        await #expect(throws: RefreshFailure.unknown) { try await refresh.rotate("ses_AAAAAAAAAAAAAAAAAAAAAA") }
    }

    @Test("two concurrent refreshes of one token: exactly one succeeds")
    func concurrentRefresh() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (refresh, _) = try service()
        for _ in 0..<5 {
            let issued = try await refresh.issue(sessionID: "ses_c", userID: "u1", tenantID: "t1")
            async let a = try? refresh.rotate(issued.token)
            async let b = try? refresh.rotate(issued.token)
            let results = await [a, b]
            #expect(results.compactMap { $0 }.count == 1)
        }
    }

    @Test("expired refresh tokens are refused; logout revokes a session's tokens")
    func expiryAndLogout() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = StepClock()
        let (refresh, state) = try service(clock: clock)
        let old = try await refresh.issue(sessionID: "ses_e", userID: "u1", tenantID: "t1")
        clock.advance(30 * 86_400 + 1)
        await #expect(throws: RefreshFailure.expired) { try await refresh.rotate(old.token) }
        let live = try await refresh.issue(sessionID: "ses_f", userID: "u1", tenantID: "t1")
        #expect(try await state.revokeRefreshTokens(sessionID: "ses_f", now: clock.now()) == 1)
        await #expect(throws: RefreshFailure.revoked) { try await refresh.rotate(live.token) }
    }

    @Test("a revoked access-token id is remembered until its expiry, then forgotten")
    func revokedTokenIDs() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (_, state) = try service()
        try await state.revokeTokenID("jti-1", expiresAt: 2_000, now: 1_000)
        try await state.revokeTokenID("jti-1", expiresAt: 2_000, now: 1_001)
        #expect(try await state.isTokenIDRevoked("jti-1"))
        #expect(try await !state.isTokenIDRevoked("jti-2"))
        #expect(try await state.deleteExpiredCredentials(before: 2_001) == 1)
        #expect(try await !state.isTokenIDRevoked("jti-1"))
    }
}
