import Foundation
import Testing

@testable import JOSE

/// A fresh temporary directory, removed when the test ends.
final class TemporaryDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "portcullis-test-" + (try SecureRandom.identifier(bytes: 6))
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

@Suite("keys/ directory and key ring")
struct KeyRingTests {
    @Test("the first generated key is active, later ones next, and private files are mode 0600")
    func generate() throws {
        let temp = try TemporaryDirectory()
        let directory = KeyDirectory(path: temp.path + "/keys")
        let first = try directory.generate(algorithm: .es256)
        let second = try directory.generate(algorithm: .hs256)
        #expect(first.status == .active)
        #expect(second.status == .next)
        for record in [first, second] {
            let mode = try FileManager.default.attributesOfItem(atPath: directory.file(for: record))[.posixPermissions] as! Int
            #expect(mode == 0o600)
        }
        let loaded = try directory.load()
        #expect(loaded.warnings.isEmpty)
        #expect(try loaded.keySet.currentSigningKey().kid == first.kid)
    }

    @Test("a second active key is refused; rotation promotes next and retires active")
    func rotate() throws {
        let temp = try TemporaryDirectory()
        let directory = KeyDirectory(path: temp.path)
        let first = try directory.generate(algorithm: .es256)
        #expect(throws: KeyError.self) { try directory.generate(algorithm: .es256, status: .active) }
        #expect(throws: KeyError.self) { try directory.rotate() }
        let next = try directory.generate(algorithm: .eddsa, status: .next)
        let (activated, retired, waiting) = try directory.rotate()
        #expect(activated.kid == next.kid && waiting == 1)
        #expect(retired?.kid == first.kid)
        let statuses = Dictionary(uniqueKeysWithValues: try directory.records().map { ($0.kid, $0.status) })
        #expect(statuses == [first.kid: .retired, next.kid: .active])
    }

    @Test("with several next keys, rotation activates the oldest unless --kid names one; a kid that is not a next key is refused")
    func rotateChoosesAmongNextKeys() throws {
        let temp = try TemporaryDirectory()
        let directory = KeyDirectory(path: temp.path)
        let active = try directory.generate(algorithm: .es256)
        let older = try directory.generate(algorithm: .es256, status: .next)
        let newer = try directory.generate(algorithm: .eddsa, status: .next)
        #expect(throws: KeyError.self) { try directory.rotate(kid: active.kid) }
        #expect(throws: KeyError.self) { try directory.rotate(kid: "no-such-kid") }
        let chosen = try directory.rotate(kid: newer.kid)
        #expect(chosen.activated.kid == newer.kid && chosen.waiting == 2)
        let oldest = try directory.rotate()
        #expect(oldest.activated.kid == older.kid && oldest.retired?.kid == newer.kid)
    }

    @Test("tokens signed by a retired key still verify; the JWKS lists next, active and retired but never HMAC keys")
    func retiredKeysVerify() throws {
        let temp = try TemporaryDirectory()
        let directory = KeyDirectory(path: temp.path)
        let old = try directory.generate(algorithm: .es256)
        let oldKeys = try directory.load().keySet
        let token = try AccessTokenIssuer(keys: oldKeys, issuer: "i", audience: "a").issue(subject: "s", tenantID: "t", clientID: "c").token
        try directory.generate(algorithm: .rs256, status: .next)
        try directory.rotate()
        try directory.generate(algorithm: .hs256, status: .next)
        try directory.generate(algorithm: .eddsa, status: .next, now: 0)
        let keys = try directory.load().keySet
        #expect(try keys.currentSigningKey().algorithm == .rs256)
        let verified = try AccessTokenVerifier(keys: keys, policy: AccessTokenPolicy(issuer: "i", audience: "a")).verify(token)
        #expect(verified.keyID == old.kid)
        guard case .array(let published)? = keys.publicJWKS()["keys"] else { Issue.record("no keys array"); return }
        #expect(published.count == 3)
        #expect(!JSONWriter.string(.object(keys.publicJWKS())).contains("\"k\""))
    }

    @Test("a world-readable private key is loaded with a warning")
    func worldReadableWarning() throws {
        let temp = try TemporaryDirectory()
        let directory = KeyDirectory(path: temp.path)
        let record = try directory.generate(algorithm: .es256)
        chmod(directory.file(for: record), 0o644)
        let loaded = try directory.load()
        #expect(loaded.warnings.contains { $0.contains("readable by other users") })
    }

    @Test("keyring.json naming a missing file, or a key of another algorithm, fails with the file named")
    func brokenKeyring() throws {
        let temp = try TemporaryDirectory()
        let directory = KeyDirectory(path: temp.path)
        var record = try directory.generate(algorithm: .es256)
        record.algorithm = .es384
        try directory.writeRecords([record])
        #expect { try directory.load() } throws: { ($0 as? KeyError)?.message.contains(record.kid) == true }
        record.kid = "missing"
        try directory.writeRecords([record])
        #expect { try directory.load() } throws: { ($0 as? KeyError)?.message.contains("does not exist") == true }
        try Data("{\"keys\":[{\"kid\":\"../etc\",\"alg\":\"ES256\",\"status\":\"active\"}]}".utf8).write(to: URL(fileURLWithPath: temp.path + "/keyring.json"))
        #expect(throws: KeyError.self) { try directory.load() }
    }

    @Test("the live key ring picks up a rotation without a restart, and keeps its keys when a reload fails")
    func liveReload() throws {
        let temp = try TemporaryDirectory()
        let directory = KeyDirectory(path: temp.path)
        let first = try directory.generate(algorithm: .es256)
        let ring = try LiveKeyRing(directory: directory)
        #expect(try ring.reloadIfChanged() == false)
        let next = try directory.generate(algorithm: .es256, status: .next)
        try directory.rotate()
        #expect(try ring.reloadIfChanged() == true)
        #expect(try ring.currentSigningKey().kid == next.kid)
        #expect(ring.verificationKey(forKID: first.kid) != nil)
        try Data("not json".utf8).write(to: URL(fileURLWithPath: temp.path + "/keyring.json"))
        #expect(throws: KeyError.self) { try ring.reloadIfChanged() }
        #expect(try ring.currentSigningKey().kid == next.kid)
    }

    @Test("the issuer refuses a session_id claim and registered-claim overrides")
    func issuerRefusesSessionID() throws {
        let fixture = try Fixture()
        #expect(throws: TokenIssueError.self) {
            try fixture.issuerService.issue(subject: "a", tenantID: "t", clientID: "c", additionalClaims: ["session_id": "ses_x"])
        }
        #expect(throws: TokenIssueError.self) {
            try fixture.issuerService.issue(subject: "a", tenantID: "t", clientID: "c", additionalClaims: ["exp": 1])
        }
        let issued = try fixture.issuerService.issue(subject: "a", tenantID: "t", clientID: "c")
        let claims = try JWSCompact.parse(issued.token).payload
        #expect(!String(decoding: claims, as: UTF8.self).contains("session"))
        #expect(issued.expiresAt == Fixture.now + 900)
    }
}

@Suite("Verification from many threads at once")
struct ConcurrentVerificationTests {
    @Test("one verifier shared by concurrent tasks gives every task the right answer", arguments: [JWSAlgorithm.hs256, .es256, .ps256])
    func sharedVerifier(algorithm: JWSAlgorithm) async throws {
        let fixture = try Fixture(algorithm)
        let good = try fixture.issue()
        let parts = good.split(separator: ".").map(String.init)
        var signature = try #require(Base64URL.decode(parts[2]))
        signature[0] ^= 0xFF
        let bad = parts[0] + "." + parts[1] + "." + Base64URL.encode(signature)
        let verifier = fixture.verifier
        let outcomes = await withTaskGroup(of: (Int, Int).self) { group in
            for task in 0..<8 {
                group.addTask {
                    var accepted = 0, refused = 0
                    for round in 0..<100 {
                        let token = (task + round) % 3 == 0 ? bad : good
                        if (try? verifier.verify(token)) != nil { accepted += 1 } else { refused += 1 }
                    }
                    return (accepted, refused)
                }
            }
            var total = (0, 0)
            for await (accepted, refused) in group { total = (total.0 + accepted, total.1 + refused) }
            return total
        }
        let expectedBad = (0..<8).reduce(0) { sum, task in sum + (0..<100).filter { (task + $0) % 3 == 0 }.count }
        #expect(outcomes.1 == expectedBad)
        #expect(outcomes.0 == 800 - expectedBad)
    }
}
