import Foundation
import PortcullisTestSupport
import Testing

@testable import JOSE

@Suite("Keys: generation, PEM, JWK and thumbprints")
struct KeyTests {
    @Test("a generated key signs what it verifies, for every algorithm", arguments: JWSAlgorithm.allCases)
    func generateSignVerify(algorithm: JWSAlgorithm) throws {
        let key = try JWSKey.generate(algorithm: algorithm)
        let message = Array("header.payload".utf8)
        let signature = try key.sign(message)
        #expect(key.verify(signature: signature, message: message))
        #expect(!key.verify(signature: signature, message: message + [0]))
        if let curve = algorithm.ecCurve { #expect(signature.count == 2 * curve.coordinateLength) }
    }

    @Test("PKCS#8 PEM round-trips and the public PEM verifies but cannot sign", arguments: [JWSAlgorithm.rs256, .ps512, .es256, .es384, .es512, .eddsa])
    func pemRoundTrip(algorithm: JWSAlgorithm) throws {
        let key = try JWSKey.generate(algorithm: algorithm, kid: "k")
        let pem = try key.privatePEM()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let reloaded = try JWSKey(pem: pem, algorithm: algorithm, kid: "k")
        #expect(reloaded.canSign)
        let publicOnly = try JWSKey(pem: try key.publicPEM(), algorithm: algorithm, kid: "k")
        #expect(!publicOnly.canSign)
        let message = Array("m".utf8)
        #expect(publicOnly.verify(signature: try reloaded.sign(message), message: message))
        #expect(throws: KeyError.self) { try publicOnly.sign(message) }
    }

    @Test("the public JWK reloads to the same key with the same thumbprint, and holds no private member", arguments: [JWSAlgorithm.rs256, .es256, .es512, .eddsa])
    func jwkRoundTrip(algorithm: JWSAlgorithm) throws {
        let key = try JWSKey.generate(algorithm: algorithm)
        let jwk = try #require(key.publicJWK())
        for privateMember in ["d", "p", "q", "dp", "dq", "qi", "k"] { #expect(jwk[privateMember] == nil) }
        let reloaded = try JWSKey(jwk: jwk)
        #expect(reloaded.kid == key.kid)
        #expect(try reloaded.thumbprint() == key.thumbprint())
        #expect(key.kid == (try key.thumbprint()))
        let message = Array("m".utf8)
        #expect(reloaded.verify(signature: try key.sign(message), message: message))
    }

    @Test("a key is refused for an algorithm it does not fit")
    func wrongAlgorithm() throws {
        let ec = try JWSKey.generate(algorithm: .es256)
        let pem = try ec.privatePEM()
        #expect(throws: KeyError.self) { try JWSKey(pem: pem, algorithm: .es384) }
        #expect(throws: KeyError.self) { try JWSKey(pem: pem, algorithm: .rs256) }
        #expect(throws: KeyError.self) { try JWSKey(pem: pem, algorithm: .hs256) }
        #expect(throws: KeyError.self) { try JWSKey(pem: try JWSKey.generate(algorithm: .rs256).privatePEM(), algorithm: .es256) }
    }

    @Test("RSA and symmetric JWKs without alg are refused; EC and OKP imply theirs")
    func impliedAlgorithm() throws {
        var rsa = try #require(try JWSKey.generate(algorithm: .rs256).publicJWK())
        rsa["alg"] = nil
        #expect(throws: KeyError.self) { try JWSKey(jwk: rsa) }
        var ec = try #require(try JWSKey.generate(algorithm: .es384).publicJWK())
        ec["alg"] = nil
        #expect(try JWSKey(jwk: ec).algorithm == .es384)
        let oct: JSONObject = ["kty": "oct", "kid": "s", "k": .string(Base64URL.encode([UInt8](repeating: 1, count: 32)))]
        #expect(throws: KeyError.self) { try JWSKey(jwk: oct) }
    }

    @Test("an EC point not on the curve is refused at load")
    func pointNotOnCurve() throws {
        var jwk = try #require(try JWSKey.generate(algorithm: .es256).publicJWK())
        var y = Base64URL.decode(jwk["y"]!.stringValue!)!
        y[31] ^= 1
        jwk["y"] = .string(Base64URL.encode(y))
        #expect(throws: KeyError.self) { try JWSKey(jwk: jwk) }
    }

    @Test("garbage, encrypted and truncated PEM is refused with a clear error and no crash")
    func badPEM() throws {
        let pem = try JWSKey.generate(algorithm: .es256).privatePEM()
        for text in ["", "not a key", String(pem.prefix(100)), pem.replacingOccurrences(of: "PRIVATE KEY-----", with: "ENCRYPTED PRIVATE KEY-----")] {
            #expect(throws: KeyError.self) { try JWSKey(pem: text, algorithm: .es256) }
        }
    }
}

@Suite("Keys written by the openssl command")
struct OpenSSLInteropTests {
    @Test("PKCS#8 files from `openssl genpkey` load, sign, and verify against the public key openssl derives",
          arguments: [
            (JWSAlgorithm.es256, ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]),
            (.es384, ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"]),
            (.es512, ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521"]),
            (.rs256, ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]),
            (.ps384, ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:3072"]),
            (.eddsa, ["-algorithm", "ED25519"]),
          ])
    func genpkey(algorithm: JWSAlgorithm, options: [String]) throws {
        guard OpenSSLTool.enabled else {
            print("no openssl command on this machine: interop test skipped")
            return
        }
        let pem = try OpenSSLTool.run(["genpkey"] + options)
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let key = try JWSKey(pem: pem, algorithm: algorithm, kid: "ossl")
        #expect(key.canSign)
        let temp = try TemporaryDirectory()
        let file = temp.path + "/key.pem"
        try Data(pem.utf8).write(to: URL(fileURLWithPath: file))
        let publicPEM = try OpenSSLTool.run(["pkey", "-in", file, "-pubout"])
        let publicKey = try JWSKey(pem: publicPEM, algorithm: algorithm, kid: "ossl")
        let message = Array("interop".utf8)
        #expect(publicKey.verify(signature: try key.sign(message), message: message))
        #expect(try publicKey.thumbprint() == key.thumbprint())
    }

    @Test("an RSA-PSS-restricted key from openssl is refused with a message that says what to use instead")
    func restrictedPSSKey() throws {
        guard OpenSSLTool.enabled else {
            print("no openssl command on this machine: interop test skipped")
            return
        }
        let pem = try OpenSSLTool.run(["genpkey", "-algorithm", "RSA-PSS", "-pkeyopt", "rsa_keygen_bits:2048"])
        #expect { try JWSKey(pem: pem, algorithm: .ps256) } throws: { ($0 as? KeyError)?.message.contains("plain RSA key") == true }
    }
}
