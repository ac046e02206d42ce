import Foundation
import JOSE
import SecurityGuard
import StateSurface
import Testing

@Suite("Revoked token ids in memory, and the verified-token cache")
struct RevocationTests {
    let directory = NSTemporaryDirectory() + "portcullis-revocation-" + UUID().uuidString

    @Test("a local revocation is seen at once; one made elsewhere after the next sync; a stale mirror asks the store")
    func mirror() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = try SQLiteStateSurface(path: directory + "/s.sqlite")
        let clock = MutableClock(1_000_000)
        let list = RevocationList(credentials: state, clock: clock, maximumStaleness: 5)
        try await list.sync()
        try await list.revoke("local", expiresAt: clock.now() + 900)
        #expect(try await list.isRevoked("local"))
        // Another gateway writes straight to the store.
        try await state.revokeTokenID("elsewhere", expiresAt: clock.now() + 900, now: clock.now())
        #expect(try await list.isRevoked("elsewhere") == false, "not yet synced: the mirror answers")
        try await list.sync()
        #expect(try await list.isRevoked("elsewhere"))
        try await state.revokeTokenID("while-stale", expiresAt: clock.now() + 900, now: clock.now())
        clock.advance(6)
        #expect(try await list.isRevoked("while-stale"), "stale mirror: the store answers")
        // Expired ids are forgotten at the next sync.
        clock.advance(1_000)
        try await list.sync()
        #expect(list.count == 0)
    }
}

/// A clock a test moves by hand.
final class MutableClock: TokenClock, @unchecked Sendable {
    private let lock = NSLock()
    private var value: Double
    init(_ value: Double) { self.value = value }
    func now() -> Double { lock.withLock { value } }
    func advance(_ seconds: Double) { lock.withLock { value += seconds } }
}
