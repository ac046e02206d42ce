import Foundation
import JOSE
@testable import SecurityGuard
import StateSurface
import Synchronization
import Testing

@Suite("Revoked token ids in memory, and the verified-token cache")
struct RevocationTests {
    let directory = NSTemporaryDirectory() + "portcullis-revocation-" + UUID().uuidString

    @Test("a local revocation is seen at once; one made elsewhere after the next sync; a stale mirror asks the store")
    func mirror() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = try SQLiteStateSurface(path: directory + "/s.sqlite")
        let clock = MutableClock(1_000_000)
        let list = RevocationList(store: state, clock: clock, maximumStaleness: 5)
        try await list.sync()
        try await list.revoke("local", expiresAt: clock.now() + 900)
        #expect(try await list.isRevoked(token("local", clock)))
        // Another gateway writes straight to the store.
        try await state.revokeTokenID("elsewhere", expiresAt: clock.now() + 900, now: clock.now())
        #expect(try await list.isRevoked(token("elsewhere", clock)) == false, "not yet synced: the mirror answers")
        try await list.sync()
        #expect(try await list.isRevoked(token("elsewhere", clock)))
        try await state.revokeTokenID("while-stale", expiresAt: clock.now() + 900, now: clock.now())
        clock.advance(6)
        #expect(try await list.isRevoked(token("while-stale", clock)), "stale mirror: the store answers")
        // Expired ids are forgotten at the next sync.
        clock.advance(1_000)
        try await list.sync()
        #expect(list.count == 0)
    }

    @Test("while the store is known down, the mirror keeps answering for the outage grace after its last sync, and only then; with the store up, stale means ask the store")
    func outageGrace() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = try SQLiteStateSurface(path: directory + "/s.sqlite")
        let clock = MutableClock(3_000_000)
        let down = Mutex(false)
        let list = RevocationList(store: state, clock: clock, maximumStaleness: 5, outageGrace: 300, storeIsDown: { down.withLock { $0 } })
        try await list.sync()
        try await list.revoke("known", expiresAt: clock.now() + 900)
        clock.advance(60)
        #expect(list.isRevokedInMemory(token("fine", clock)) == nil, "stale and the store up: only the store may answer")
        down.withLock { $0 = true }
        #expect(list.isRevokedInMemory(token("fine", clock)) == false, "the store down, within the grace: the mirror answers")
        #expect(list.isRevokedInMemory(token("known", clock)) == true, "and still refuses what it knows is revoked")
        clock.advance(241)
        #expect(list.isRevokedInMemory(token("fine", clock)) == nil, "past the grace: the store must answer (and cannot: 503)")
        let strict = RevocationList(store: state, clock: clock, maximumStaleness: 5, storeIsDown: { true })
        try await strict.sync()
        clock.advance(6)
        #expect(strict.isRevokedInMemory(token("fine", clock)) == nil, "no grace by default")
    }

    func token(_ jti: String, _ clock: MutableClock, userID: String = "usr_a", issuedAt: Double? = nil) -> AuthenticatedCaller {
        AuthenticatedCaller(
            userID: userID, tenantID: "acme", clientID: nil, tokenID: jti, issuedAt: issuedAt ?? clock.now().rounded(.down),
            expiresAt: clock.now() + 900)
    }

    @Test("a verification that began before the verified-token cache was emptied (a reload) is not kept; one that began after is")
    func emptiedCacheKeepsNoEarlierVerification() {
        let clock = MutableClock(3_000_000)
        let cache = VerifiedTokenCache(capacity: 16, maximumAge: 30)
        let (none, before) = cache.lookup("token-a", now: clock.now())
        #expect(none == nil)
        // A reload empties the cache while the verification that read `before` is still running.
        cache.removeAll()
        cache.insert(token("a", clock), for: "token-a", now: clock.now(), generation: before)
        #expect(cache.lookup("token-a", now: clock.now()).caller == nil, "verified under the replaced issuers: never cached")
        let after = cache.lookup("token-a", now: clock.now()).generation
        #expect(after != before)
        cache.insert(token("a", clock), for: "token-a", now: clock.now(), generation: after)
        #expect(cache.lookup("token-a", now: clock.now()).caller?.tokenID == "a")
        clock.advance(31)
        #expect(cache.lookup("token-a", now: clock.now()).caller == nil, "kept 30 s at most")
    }

    @Test("the verified-token cache finds a token only by all of it: tokens of the same length and the same last 32 bytes (the part its key is hashed over) are different entries")
    func cacheKeyIsTheWholeToken() {
        let clock = MutableClock(3_000_000)
        let cache = VerifiedTokenCache(capacity: 16, maximumAge: 30)
        let tail = String(repeating: "s", count: 40)
        let (first, second) = ("header.payload-one." + tail, "header.payload-two." + tail)
        let generation = cache.lookup(first, now: clock.now()).generation
        cache.insert(token("one", clock), for: first, now: clock.now(), generation: generation)
        #expect(cache.lookup(first, now: clock.now()).caller?.tokenID == "one")
        #expect(cache.lookup(second, now: clock.now()).caller == nil, "another token with the same hashed part is not the cached one")
        cache.insert(token("two", clock), for: second, now: clock.now(), generation: generation)
        #expect(cache.lookup(first, now: clock.now()).caller?.tokenID == "one" && cache.lookup(second, now: clock.now()).caller?.tokenID == "two")
        #expect(cache.lookup(first + "x", now: clock.now()).caller == nil && cache.lookup(String(first.dropFirst()), now: clock.now()).caller == nil)
    }

    @Test("a disabled account's tokens issued up to its not-before second are refused once synced; later ones and other accounts pass")
    func accountNotBefore() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = try SQLiteStateSurface(path: directory + "/s.sqlite")
        let clock = MutableClock(2_000_000.5)
        let user = UserRecord(id: "usr_a", tenantID: "acme", username: "a", passwordHash: "x", createdAt: clock.now())
        try await state.insertUser(user)
        let list = RevocationList(store: state, clock: clock, maximumStaleness: 5)
        #expect(try await list.sync().isEmpty)
        let before = token("t1", clock, issuedAt: clock.now().rounded(.down) - 60)
        let sameSecond = token("t2", clock)
        // `users disable` in another process.
        #expect(try await state.disableUser(tenantID: "acme", username: "a", now: clock.now()) != nil)
        #expect(try await list.isRevoked(before) == false, "not synced yet")
        let changed = try await list.sync()
        #expect(changed == [AccountCutoff(userID: "usr_a", tenantID: "acme", notBefore: 2_000_000.5, cause: .disabled)])
        #expect(try await list.sync().isEmpty, "reported once")
        #expect(try await list.isRevoked(before))
        #expect(try await list.isRevoked(sameSecond))
        clock.advance(1)
        #expect(try await list.isRevoked(token("t3", clock)) == false, "issued after the not-before second")
        #expect(try await list.isRevoked(token("t4", clock, userID: "usr_b", issuedAt: clock.now() - 100)) == false, "another account")
        clock.advance(10)
        #expect(try await list.isRevoked(before), "stale mirror: the store's not-before answers")
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
