import Foundation
import JOSE
import SecurityGuard
import StateSurface
import Testing

func hex(_ text: String) -> [UInt8] {
    let clean = text.filter { !$0.isWhitespace }
    return stride(from: 0, to: clean.count, by: 2).map {
        let start = clean.index(clean.startIndex, offsetBy: $0)
        return UInt8(clean[start..<clean.index(start, offsetBy: 2)], radix: 16)!
    }
}

@Suite("Passwords: scrypt through libcrypto")
struct PasswordTests {
    /// RFC 7914 §12, the third vector: "pleaseletmein", "SodiumChloride", N = 16384, r = 8, p = 1, 64 bytes.
    static let rfc7914Third = hex("""
        70 23 bd cb 3a fd 73 48 46 1c 06 cd 81 fd 38 eb fd a8 fb ba 90 4f 8e 3e a9 b5 43 f6 54 5d a1 f2
        d5 43 29 55 61 3f 0f cf 62 d4 97 05 24 2a 9a f9 e6 1e 85 dc 0d 65 1e 40 df cf 01 7b 45 57 58 87
        """)

    @Test("scrypt matches the RFC 7914 section 12 test vectors")
    func rfc7914() throws {
        let second = try Scrypt.derive(password: Array("password".utf8), salt: Array("NaCl".utf8), parameters: .init(logN: 10, r: 8, p: 16), length: 64)
        #expect(second == hex("""
            fd ba be 1c 9d 34 72 00 78 56 e7 19 0d 01 e9 fe 7c 6a d7 cb c8 23 78 30 e7 73 76 63 4b 37 31 62
            2e af 30 d9 2e 22 a3 88 6f f1 09 27 9d 98 30 da c7 27 af b9 4a 83 ee 6d 83 60 cb df a2 cc 06 40
            """))
        let third = try Scrypt.derive(password: Array("pleaseletmein".utf8), salt: Array("SodiumChloride".utf8), parameters: .init(logN: 14, r: 8, p: 1), length: 64)
        #expect(third == Self.rfc7914Third)
    }

    @Test("scrypt's work areas, kept: the RFC 7914 vector comes out the same from a kept area, every derivation passes the wrapper, and no more areas are made than asked")
    func keptWorkAreas() throws {
        #expect(ScryptWorkAreas.isAvailable, "libcrypto refused the allocator wrapper: it must be installed before libcrypto's first allocation")
        #expect(Scrypt.Parameters.interactive.workAreaBytes == 33_557_504)  // 32 MiB + 1 KiB, as EVP_PBE_scrypt asks at N = 2^15, r = 8
        #expect(PasswordHasher.keepWorkAreas())
        #expect(!ScryptWorkAreas.keep(1, for: .init(logN: 12, r: 8, p: 1)), "areas of another size were accepted after the first")
        #expect(!ScryptWorkAreas.keep(65, for: .interactive))
        let before = ScryptWorkAreas.counts
        for _ in 0..<3 {
            // 16 MiB + 2 KiB: more than half an area, so the wrapper looks at it.
            let third = try Scrypt.derive(password: Array("pleaseletmein".utf8), salt: Array("SodiumChloride".utf8), parameters: .init(logN: 14, r: 8, p: 1), length: 64)
            #expect(third == Self.rfc7914Third)
        }
        let after = ScryptWorkAreas.counts
        #expect(after.served + after.declined >= before.served + before.declined + 3)
        #expect(after.served > before.served)
        #expect((1...PasswordHasher.workAreaLimit).contains(after.made))
    }

    @Test("a hash names its parameters, verifies the right password only, and round-trips through its text form")
    func hashAndVerify() async throws {
        let hasher = PasswordHasher(parameters: .init(logN: 12, r: 8, p: 1))
        let stored = try await hasher.hash("correct horse battery staple")
        let text = stored.description
        #expect(text.hasPrefix("$scrypt$ln=12,r=8,p=1$"))
        #expect(!text.contains("correct"))
        let parsed = try #require(PasswordHash(text))
        #expect(parsed == stored)
        #expect(try await hasher.verify("correct horse battery staple", against: parsed))
        #expect(try await !hasher.verify("correct horse battery stapler", against: parsed))
        #expect(try await !hasher.verify("", against: parsed))
        #expect(try await hasher.hash("correct horse battery staple") != stored, "a fresh salt every time")
    }

    @Test("stored hashes that are malformed or demand unbounded work are refused", arguments: [
        "", "scrypt$ln=12,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "$bcrypt$ln=12,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "$scrypt$ln=40,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "$scrypt$ln=12,r=8,p=1,p=2$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "$scrypt$ln=12,r=8$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "$scrypt$ln=12,r=8,p=1$AAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "$scrypt$ln=12,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAA",
    ])
    func malformedHashes(text: String) {
        #expect(PasswordHash(text) == nil)
    }

    @Test("accounts: add, authenticate, and the same nil answer for unknown users, wrong passwords and disabled accounts")
    func accounts() async throws {
        let directory = NSTemporaryDirectory() + "portcullis-accounts-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = try SQLiteStateSurface(path: directory + "/p.sqlite")
        let accounts = AccountService(users: state, hasher: PasswordHasher(parameters: .init(logN: 12, r: 8, p: 1)))
        let alice = try await accounts.addUser(username: "alice", tenantID: "acme", password: "correct horse")
        #expect(try await accounts.authenticate(username: "alice", tenantID: "acme", password: "correct horse")?.id == alice.id)
        #expect(try await accounts.authenticate(username: "alice", tenantID: "acme", password: "wrong horse") == nil)
        #expect(try await accounts.authenticate(username: "alice", tenantID: "other", password: "correct horse") == nil)
        #expect(try await accounts.authenticate(username: "mallory", tenantID: "acme", password: "correct horse") == nil)
        #expect(try await accounts.disable(username: "alice", tenantID: "acme")?.disabled == true)
        #expect(try await accounts.authenticate(username: "alice", tenantID: "acme", password: "correct horse") == nil)
        #expect(try await accounts.isActive(userID: alice.id, tenantID: "acme") == false)
        #expect(try await accounts.enable(username: "alice", tenantID: "acme")?.disabled == false)
        #expect(try await accounts.authenticate(username: "alice", tenantID: "acme", password: "correct horse")?.id == alice.id)
        #expect(try await accounts.isActive(userID: alice.id, tenantID: "acme"))
        #expect(try await state.user(tenantID: "acme", username: "alice")?.tokensNotBefore ?? 0 > 0, "enabling keeps the not-before")
        #expect(try await accounts.disable(username: "nobody", tenantID: "acme") == nil)
        await #expect(throws: AccountError.self) { try await accounts.addUser(username: "alice", tenantID: "acme", password: "another one") }
        await #expect(throws: AccountError.self) { try await accounts.addUser(username: "bob", tenantID: "acme", password: "short") }
        await #expect(throws: AccountError.self) { try await accounts.addUser(username: "bob smith", tenantID: "acme", password: "long enough") }
        let stored = try #require(try await state.user(tenantID: "acme", username: "alice"))
        #expect(stored.passwordHash.hasPrefix("$scrypt$") && !stored.passwordHash.contains("horse"))
    }
}
