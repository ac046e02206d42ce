import Foundation
import PortcullisTestSupport
import Testing

extension CLI {
    /// Runs `openssl ARGS` in the temporary directory (keys as other tools make them).
    func openssl(_ arguments: [String]) throws {
        try OpenSSLTool.run(arguments, in: directory)
    }

    func chmod(_ file: String, _ mode: Int) throws {
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: directory + "/" + file)
    }

    func write(_ file: String, _ bytes: [UInt8], mode: Int = 0o600) throws {
        FileManager.default.createFile(atPath: directory + "/" + file, contents: Data(bytes), attributes: [.posixPermissions: mode])
    }
}

@Suite("portcullis keys import: keys made elsewhere", .serialized)
struct KeysImportTests {
    @Test("a PKCS#8 key from openssl genpkey imports for its algorithm, is written 0600 under its thumbprint, and signs tokens that verify")
    func pkcs8() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "made-elsewhere.pem"])
        try cli.chmod("made-elsewhere.pem", 0o600)
        let imported = try cli.run(["keys", "import", "made-elsewhere.pem", "--alg", "ES256"])
        #expect(imported.status == 0, "\(imported.stderr)")
        let kid = try #require(imported.stdout.split(separator: " ").dropFirst(3).first.map(String.init))
        #expect(imported.stdout.contains("(active)"))
        let attributes = try FileManager.default.attributesOfItem(atPath: cli.directory + "/keys/\(kid).pem")
        #expect(attributes[.posixPermissions] as? Int == 0o600)
        let token = try cli.run(["token", "issue", "--sub", "alice", "--keys", "keys"]).stdout.dropLast()
        let verified = try cli.run(["token", "verify", String(token), "--keys", "keys", "--json"])
        #expect(verified.status == 0 && verified.stdout.contains(kid))
    }

    @Test("a key that does not fit --alg is refused with the reason: an EC key for RS256, a P-384 key for ES256, an Ed25519 key for ES256")
    func mismatch() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "p384.pem"])
        try cli.openssl(["genpkey", "-algorithm", "ED25519", "-out", "ed.pem"])
        try cli.chmod("p384.pem", 0o600)
        try cli.chmod("ed.pem", 0o600)
        for (file, alg, says) in [("p384.pem", "RS256", "needs an RSA key"), ("p384.pem", "ES256", "P-256"), ("ed.pem", "ES256", "Ed25519"), ("ed.pem", "HS256", "not a PEM key")] {
            let result = try cli.run(["keys", "import", file, "--alg", alg])
            #expect(result.status == 2 && result.stderr.contains(says), "\(file) as \(alg): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: cli.directory + "/keys/keyring.json"), "nothing was written")
    }

    @Test("a private key file other users can read is refused, with the chmod that fixes it")
    func readableByOthers() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.openssl(["genpkey", "-algorithm", "ED25519", "-out", "ed.pem"])
        try cli.chmod("ed.pem", 0o644)
        let refused = try cli.run(["keys", "import", "ed.pem", "--alg", "EdDSA"])
        #expect(refused.status == 2 && refused.stderr.contains("chmod 600 ed.pem"), "\(refused.stderr)")
        try cli.chmod("ed.pem", 0o600)
        #expect(try cli.run(["keys", "import", "ed.pem", "--alg", "EdDSA"]).status == 0)
    }

    @Test("an HMAC secret: 32 raw bytes import for HS256; 16 bytes are weak; a text secret's trailing newline is refused; the secret never appears in any output")
    func hmacSecret() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let secret = (0..<32).map { UInt8(($0 * 37 + 11) % 256) }
        try cli.write("weak.key", Array(secret.prefix(16)))
        let textSecret = Array("correct-horse-battery-staple-0123456789".utf8)
        try cli.write("newline.key", textSecret + [0x0A])
        try cli.write("good.key", secret)
        let weak = try cli.run(["keys", "import", "weak.key", "--alg", "HS256"])
        #expect(weak.status == 2 && weak.stderr.contains("at least 32 bytes"), "\(weak.stderr)")
        let newline = try cli.run(["keys", "import", "newline.key", "--alg", "HS256"])
        #expect(newline.status == 2 && newline.stderr.contains("ends with a newline"), "\(newline.stderr)")
        let good = try cli.run(["keys", "import", "good.key", "--alg", "HS256", "--kid", "shared-hs"])
        #expect(good.status == 0 && good.stdout.contains("shared-hs"), "\(good.stderr)")
        let token = try cli.run(["token", "issue", "--sub", "alice", "--keys", "keys"]).stdout.dropLast()
        #expect(try cli.run(["token", "verify", String(token), "--keys", "keys"]).status == 0)
        let hex = secret.map { String(format: "%02x", $0) }.joined()
        for output in [weak, newline, good] { #expect(!output.stdout.contains(hex) && !output.stderr.contains(hex)) }
        #expect(!newline.stderr.contains("correct-horse"))
    }

    @Test("random bytes that happen to start with { or end with a newline are a raw secret, not a JWK or a text file (openssl rand 32 writes either one time in 256)")
    func randomSecretLookingLikeText() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let secret: [UInt8] = [0x7B] + (1..<31).map { UInt8(($0 * 37 + 11) % 256) } + [0x0A]
        try cli.write("rand.key", secret)
        let imported = try cli.run(["keys", "import", "rand.key", "--alg", "HS256", "--kid", "rand-hs"])
        #expect(imported.status == 0 && imported.stdout.contains("rand-hs"), "\(imported.stderr)")
    }

    @Test("a public SPKI key is added retired and verifies what its private key signed elsewhere; a JWK imports with its own kid")
    func publicKeyAndJWK() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.openssl(["genpkey", "-algorithm", "ED25519", "-out", "signer.pem"])
        try cli.openssl(["pkey", "-in", "signer.pem", "-pubout", "-out", "signer.pub.pem"])
        try cli.chmod("signer.pem", 0o600)
        #expect(try cli.run(["keys", "import", "signer.pem", "--alg", "EdDSA", "--dir", "signer"]).status == 0)
        let token = String(try cli.run(["token", "issue", "--sub", "alice", "--keys", "signer"]).stdout.dropLast())
        let asActive = try cli.run(["keys", "import", "signer.pub.pem", "--alg", "EdDSA", "--dir", "verifier", "--state", "active"])
        #expect(asActive.status == 2 && asActive.stderr.contains("cannot sign"), "\(asActive.stderr)")
        let imported = try cli.run(["keys", "import", "signer.pub.pem", "--alg", "EdDSA", "--dir", "verifier"])
        #expect(imported.status == 0 && imported.stdout.contains("(retired)"), "\(imported.stderr)")
        #expect(try cli.run(["token", "verify", token, "--keys", "verifier"]).status == 0)

        let jwk = #"{"kty":"oct","k":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v","alg":"HS384","kid":"from-elsewhere"}"#
        try cli.write("key.jwk", Array(jwk.utf8))
        let wrongAlg = try cli.run(["keys", "import", "key.jwk", "--alg", "HS256", "--dir", "jwk"])
        #expect(wrongAlg.status == 2 && wrongAlg.stderr.contains("HS384"), "\(wrongAlg.stderr)")
        let fromJWK = try cli.run(["keys", "import", "key.jwk", "--alg", "HS384", "--dir", "jwk"])
        #expect(fromJWK.status == 0 && fromJWK.stdout.contains("from-elsewhere"), "\(fromJWK.stderr)")
    }

    @Test("token verify --keys on a directory of key files without keyring.json says to import them")
    func directoryWithoutKeyring() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try FileManager.default.createDirectory(atPath: cli.directory + "/mine", withIntermediateDirectories: true)
        try cli.openssl(["genpkey", "-algorithm", "ED25519", "-out", "mine/ed.pem"])
        let result = try cli.run(["token", "verify", "x.y.z", "--keys", "mine"])
        #expect(result.status == 2 && result.stderr.contains("portcullis keys import mine/ed.pem --alg ALG --dir mine"), "\(result.stderr)")
    }
}
