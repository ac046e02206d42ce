import Foundation
import Testing

@testable import JOSE

/// RFC 7515 Appendix A, RFC 7520 section 4 and RFC 8037 examples, at the JWS
/// layer (their payloads are not access tokens).
@Suite("RFC 7515, 7520 and 8037 examples")
struct RFCExampleTests {
    /// (name, key file, compact file, algorithm, deterministic signature)
    static let latchset: [(String, String, String, JWSAlgorithm, Bool)] = [
        ("RFC 7515 A.1", "rfc7515_A.1.jwk", "rfc7515_A.1.jwsc", .hs256, true),
        ("RFC 7515 A.2", "rfc7515_A.2.jwk", "rfc7515_A.2.jwsc", .rs256, true),
        ("RFC 7515 A.3", "rfc7515_A.3.jwk", "rfc7515_A.3.jwsc", .es256, false),
        ("RFC 7515 A.4", "rfc7515_A.4.jwk", "rfc7515_A.4.jwsc", .es512, false),
        ("RFC 7520 4.1", "rfc7520_4.1.jwk", "rfc7520_4.1.jwsc", .rs256, true),
        ("RFC 7520 4.2", "rfc7520_4.2.jwk", "rfc7520_4.2.jwsc", .ps384, false),
        ("RFC 7520 4.3", "rfc7520_4.3.jwk", "rfc7520_4.3.jwsc", .es512, false),
        ("RFC 7520 4.4", "rfc7520_4.4.jwk", "rfc7520_4.4.jwsc", .hs256, true),
    ]

    static func key(_ jwk: JSONObject, _ algorithm: JWSAlgorithm) throws -> JWSKey {
        var object = jwk
        if object["kid"] == nil { object["kid"] = "rfc" }
        return try JWSKey(jwk: object, fallbackAlgorithm: algorithm)
    }

    /// Checks one example: it verifies, a flipped byte does not, and our own
    /// signature over the same input verifies (and equals the RFC's when the
    /// algorithm is deterministic).
    func check(name: String, key: JWSKey, compact: String, deterministic: Bool) throws {
        let jws = try JWSCompact.parse(compact)
        #expect(jws.algorithmName == key.algorithm.rawValue, "\(name)")
        try jws.verifySignature(with: key)
        var tampered = jws.signingInput
        tampered[tampered.count - 1] ^= 0x01
        #expect(!key.verify(signature: jws.signature, message: tampered), "\(name): a flipped byte still verifies")
        let ours = try key.sign(jws.signingInput)
        #expect(key.verify(signature: ours, message: jws.signingInput), "\(name): our own signature does not verify")
        if deterministic {
            #expect(ours == jws.signature, "\(name): our signature differs from the RFC's")
        }
    }

    @Test("RFC 7515 Appendix A and RFC 7520 section 4 compact examples verify", arguments: latchset.map(\.0))
    func compactExample(name: String) throws {
        guard Vectors.available else { return }
        let (_, keyFile, compactFile, algorithm, deterministic) = Self.latchset.first { $0.0 == name }!
        let directory = "jose-cookbook/latchset-jose-vectors/"
        let jwk = try Vectors.object(try Vectors.json(directory + keyFile))
        let key = try Self.key(jwk, algorithm)
        let compact = try Vectors.text(directory + compactFile).trimmingCharacters(in: .whitespacesAndNewlines)
        try check(name: name, key: key, compact: compact, deterministic: deterministic)
        print("\(name): \(algorithm.rawValue) example verified")
    }

    @Test("the cookbook's JWS files (RFC 7520 4.1-4.4) verify with their own keys", arguments: [
        "4_1.rsa_v15_signature.json", "4_2.rsa-pss_signature.json", "4_3.ecdsa_signature.json", "4_4.hmac-sha2_integrity_protection.json",
    ])
    func cookbookFile(file: String) throws {
        guard Vectors.available else { return }
        let document = try Vectors.json("jose-cookbook/jws/" + file) as! [String: Any]
        let input = document["input"] as! [String: Any]
        let algorithm = JWSAlgorithm(rawValue: input["alg"] as! String)!
        let key = try Self.key(try Vectors.object(input["key"]!), algorithm)
        let compact = (document["output"] as! [String: Any])["compact"] as! String
        try check(name: file, key: key, compact: compact, deterministic: algorithm.family == .rsaPKCS1 || algorithm.family == .hmac)
    }

    @Test("RFC 8037 A.4: the Ed25519 example verifies and signing reproduces it")
    func ed25519Example() throws {
        guard Vectors.available else { return }
        let document = try Vectors.json("jose-cookbook/curve25519/jws.json") as! [String: Any]
        let input = document["input"] as! [String: Any]
        let key = try Self.key(try Vectors.object(input["key"]!), .eddsa)
        #expect(key.canSign)
        let compact = (document["output"] as! [String: Any])["compact"] as! String
        try check(name: "RFC 8037 A.4", key: key, compact: compact, deterministic: true)
    }

    @Test("RFC 7515 A.5: the unsecured (alg none) example is refused")
    func unsecuredExample() throws {
        guard Vectors.available else { return }
        let compact = try Vectors.text("jose-cookbook/latchset-jose-vectors/rfc7515_A.5.jwsc").trimmingCharacters(in: .whitespacesAndNewlines)
        let jws = try JWSCompact.parse(compact)
        #expect(throws: TokenValidationError(.unsupportedAlgorithm, "unsigned tokens (alg \"none\") are never accepted")) { try jws.algorithm() }
    }

    @Test("RFC 7797 b64=false with crit is refused even though its MAC is right")
    func unencodedPayload() throws {
        guard Vectors.available else { return }
        let document = try Vectors.json("jose-cookbook/rfc7797_4.2_recomputed.json") as! [String: Any]
        let header = try StrictJSONReader().parseObject(Base64URL.decode(document["protected_b64u"] as! String)!)
        #expect(throws: TokenValidationError.self) { try AccessTokenPolicy().checkHeader(header) }
    }

    @Test("RFC 7638 3.1: the thumbprint of the example RSA key")
    func thumbprint() throws {
        guard Vectors.available else { return }
        let jwk = try Vectors.object(try Vectors.json("jose-cookbook/latchset-jose-vectors/rfc7638_3.1.jwk"))
        let expected = try Vectors.text("jose-cookbook/latchset-jose-vectors/rfc7638_3.1.thp").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try JWSKey(jwk: jwk).thumbprint() == expected)
    }

    @Test("RFC 7520 section 6: a JWE (five segments) is refused by the JWS parser")
    func nestedEncryption() throws {
        guard Vectors.available else { return }
        let document = try Vectors.json("jose-cookbook/6.nesting_signatures_and_encryption.json") as! [String: Any]
        let encrypt = document["encrypt"] as! [String: Any]
        let compact = (encrypt["output"] as! [String: Any])["compact"] as! String
        #expect(throws: TokenValidationError.self) { try JWSCompact.parse(compact) }
    }
}
