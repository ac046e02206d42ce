import Foundation
import Testing

@testable import JOSE

/// One test per attack a verifier must refuse (issue 2, "Tests").
@Suite("Access-token verifier refuses attacks")
struct VerifierAttackTests {
    let es = try! Fixture(.es256)

    @Test("a token the issuer minted verifies, and its claims come back")
    func issuedTokenVerifies() throws {
        let token = try es.issue()
        let verified = try es.verifier.verify(token)
        #expect(verified.subject == "alice")
        #expect(verified.tenantID == "acme")
        #expect(verified.keyID == "k1")
        #expect(verified.header["typ"] == "at+jwt")
        #expect(verified.claims["session_id"] == nil)
    }

    @Test("a token too long for the verifier's stack scratch (over 1 KiB) verifies and is refused as a short one is, by either entry point",
          arguments: [20, 4_000])
    func longTokensTakeTheSameChecks(padding: Int) throws {
        let claims = Fixture.claims(["scope": "\"\(String(repeating: "a", count: padding))\""])
        let token = try es.forge(claims: claims)
        #expect((token.utf8.count > 1_400) == (padding > 1_000))
        let verified = try es.verifier.verify(token)
        #expect(verified.scope?.utf8.count == padding)
        #expect(try es.verifier.verify(JWSCompact.parse(token)).claims == verified.claims)
        // A flipped payload byte, and a flipped signature byte, each fail the signature.
        var parts = token.split(separator: ".").map(String.init)
        var payload = Base64URL.decode(parts[1])!
        payload[payload.count - 3] ^= 0x01
        #expect(es.reason(parts[0] + "." + Base64URL.encode(payload) + "." + parts[2]) == .badSignature)
        var signature = Base64URL.decode(parts[2])!
        signature[0] ^= 0x80
        parts[2] = Base64URL.encode(signature)
        #expect(es.reason(parts.joined(separator: ".")) == .badSignature)
        #expect((try? es.verifier.verify(JWSCompact.parse(parts.joined(separator: ".")))) == nil)
        // Padding (not canonical base64url) in the last segment is malformed, not a bad signature.
        #expect(es.reason(token + "=") == .malformed)
    }

    /// What each entry point says of `token`: `verify(String)` (from its bytes) and `verify(parse(...))`.
    static func bothEntryPoints(_ fixture: Fixture, _ token: String) -> (TokenValidationError.Reason?, TokenValidationError.Reason?) {
        let fromBytes = fixture.reason(token)
        let fromParsed: TokenValidationError.Reason?
        do {
            _ = try fixture.verifier.verify(JWSCompact.parse(token, maximumBytes: fixture.verifier.policy.maximumTokenBytes))
            fromParsed = nil
        } catch {
            fromParsed = error.reason
        }
        return (fromBytes, fromParsed)
    }

    @Test("tokens across the stack scratch's edge (segments decoding to about 1 KiB), at the size limit and one past it, and with empty segments get the same answer from both entry points",
          arguments: [JWSAlgorithm.hs256, .es256])
    func entryPointsAgreeAcrossSizes(algorithm: JWSAlgorithm) throws {
        let fixture = try Fixture(algorithm)
        func token(padding: Int) throws -> String {
            try fixture.forge(claims: Fixture.claims(["scope": "\"\(String(repeating: "s", count: padding))\""]))
        }
        // Every length from 1,340 to 1,400 characters that a padding reaches: the decoded total crosses 1,024 bytes.
        var lengths: Set<Int> = []
        var decodedTotals: Set<Int> = []
        for padding in 600...900 {
            let good = try token(padding: padding)
            guard (1_340...1_400).contains(good.utf8.count) else { continue }
            lengths.insert(good.utf8.count)
            decodedTotals.insert(good.split(separator: ".").map { Base64URL.decodedCount($0.utf8.count) ?? 0 }.reduce(0, +))
            let (fromBytes, fromParsed) = Self.bothEntryPoints(fixture, good)
            #expect(fromBytes == nil && fromParsed == nil, "\(good.utf8.count) characters")
            var parts = good.split(separator: ".").map(String.init)
            var signature = Base64URL.decode(parts[2])!
            signature[signature.count - 1] ^= 0x01
            parts[2] = Base64URL.encode(signature)
            let flipped = Self.bothEntryPoints(fixture, parts.joined(separator: "."))
            #expect(flipped.0 == .badSignature && flipped.1 == .badSignature, "\(good.utf8.count) characters, flipped")
        }
        #expect(lengths.count >= 40, "the sweep covered \(lengths.count) lengths")
        #expect(decodedTotals.contains(1_024) || decodedTotals.contains(1_023), "the sweep reaches the stack's last byte")
        #expect(decodedTotals.contains { $0 > 1_024 } && decodedTotals.contains { $0 < 1_020 }, "the sweep crosses to the heap")
        // The longest token within the limit verifies; the next one is too large, by either way in.
        let limit = fixture.verifier.policy.maximumTokenBytes
        var padding = 5_000
        while try token(padding: padding + 1).utf8.count <= limit { padding += 1 }
        let atLimit = try token(padding: padding)
        #expect(atLimit.utf8.count <= limit && atLimit.utf8.count >= limit - 2)
        let fits = Self.bothEntryPoints(fixture, atLimit)
        #expect(fits.0 == nil && fits.1 == nil)
        let over = Self.bothEntryPoints(fixture, try token(padding: padding + 1))
        #expect(over.0 == .tooLarge && over.1 == .tooLarge)
        // Empty and misshapen segments.
        let good = try token(padding: 10)
        let parts = good.split(separator: ".").map(String.init)
        for shape in ["..", "\(parts[0])..", ".\(parts[1]).\(parts[2])", "\(parts[0]).\(parts[1]).", "\(parts[0])..\(parts[2])", "\(parts[0])A.\(parts[1]).\(parts[2])"] {
            let (fromBytes, fromParsed) = Self.bothEntryPoints(fixture, shape)
            #expect(fromBytes != nil && fromBytes == fromParsed, "\(shape.prefix(12))...: \(String(describing: fromBytes)) and \(String(describing: fromParsed))")
        }
    }

    @Test("alg none is refused in every spelling, with or without a signature", arguments: ["none", "None", "NONE", "nOnE"])
    func algNone(spelling: String) throws {
        let input = Forge.b64("{\"alg\":\"\(spelling)\",\"typ\":\"at+jwt\",\"kid\":\"k1\"}") + "." + Forge.b64(Fixture.claims())
        #expect(es.reason(input + ".") == .unsupportedAlgorithm)
        #expect(es.reason(input + ".c2ln") == .unsupportedAlgorithm)
    }

    @Test("an empty or truncated signature is refused")
    func emptyOrTruncatedSignature() throws {
        let token = try es.issue()
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(es.reason(parts[0] + "." + parts[1] + ".") == .badSignature)
        let truncated = Base64URL.encode(Base64URL.decode(String(parts[2]))!.dropLast(3))
        #expect(es.reason(parts[0] + "." + parts[1] + "." + truncated) == .badSignature)
    }

    @Test("one flipped signature bit is refused for every algorithm", arguments: JWSAlgorithm.allCases)
    func flippedSignature(algorithm: JWSAlgorithm) throws {
        let fixture = try Fixture(algorithm)
        let token = try fixture.issue()
        #expect(fixture.reason(token) == nil)
        let parts = token.split(separator: ".").map(String.init)
        var signature = Base64URL.decode(parts[2])!
        signature[signature.count / 2] ^= 0x01
        #expect(fixture.reason(parts[0] + "." + parts[1] + "." + Base64URL.encode(signature)) == .badSignature)
    }

    @Test("RS/ES to HS confusion: the public key as an HMAC secret never verifies", arguments: [JWSAlgorithm.rs256, .es256, .eddsa])
    func keyConfusion(algorithm: JWSAlgorithm) throws {
        let fixture = try Fixture(algorithm)
        let pem = try fixture.key.publicPEM()
        let der = Base64URL.decode(
            pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: ""))!
        let jwk = JSONWriter.bytes(.object(fixture.key.publicJWK()!))
        let secrets: [[UInt8]] = [Array(pem.utf8), Array(pem.trimmingCharacters(in: .newlines).utf8), der, jwk]
        for secret in secrets {
            let forged = try Forge.hmacToken(header: "{\"alg\":\"HS256\",\"typ\":\"at+jwt\",\"kid\":\"k1\"}", payload: Fixture.claims(), secret: secret)
            #expect(fixture.reason(forged) == .algorithmMismatch)
        }
    }

    @Test("a header that carries or points to its own key is refused", arguments: ["jwk", "jku", "x5u", "x5c"])
    func embeddedKeys(member: String) throws {
        let value = member == "jwk" ? JSONWriter.string(.object(es.key.publicJWK()!)) : member == "x5c" ? "[\"MIIB\"]" : "\"https://evil.test/keys\""
        let token = try es.forge(header: es.header(extra: ",\"\(member)\":\(value)"))
        #expect(es.reason(token) == .forbiddenHeader)
    }

    @Test("kid path traversal, injection and unknown kids find no key",
          arguments: ["../../../../etc/passwd", "k1/../k1", "' OR '1'='1", "k1\\u0000", "K1", "k1 ", "", "unknown"])
    func hostileKid(kid: String) throws {
        let token = try Forge.token(header: "{\"alg\":\"ES256\",\"typ\":\"at+jwt\",\"kid\":\"\(kid)\"}", payload: Fixture.claims(), key: es.key)
        #expect(es.reason(token) == .unknownKey)
    }

    @Test("a missing or non-string kid is refused")
    func missingKid() throws {
        #expect(es.reason(try es.forge(header: "{\"alg\":\"ES256\",\"typ\":\"at+jwt\"}")) == .unknownKey)
        #expect(es.reason(try es.forge(header: "{\"alg\":\"ES256\",\"typ\":\"at+jwt\",\"kid\":7}")) == .unknownKey)
    }

    @Test("ECDSA: r = s = 0, DER-encoded signatures and wrong lengths are refused")
    func ecdsaSignatureForms() throws {
        let token = try es.issue()
        let parts = token.split(separator: ".").map(String.init)
        let input = parts[0] + "." + parts[1] + "."
        #expect(es.reason(input + Base64URL.encode([UInt8](repeating: 0, count: 64))) == .badSignature)
        let raw = Base64URL.decode(parts[2])!
        let der = raw.withUnsafeBytes { ECDSASignature.der(fromRaw: $0, coordinateLength: 32)! }
        #expect(es.reason(input + Base64URL.encode(der)) == .badSignature)
        #expect(es.reason(input + Base64URL.encode(raw + [0])) == .badSignature)
        #expect(es.reason(input + Base64URL.encode([0] + raw)) == .badSignature)
        #expect(es.reason(input + Base64URL.encode(Array(raw.dropLast()))) == .badSignature)
        #expect(es.reason(input + parts[2]) == nil)
    }

    @Test("crit is refused, and so are b64, zip and cty (nested JWT)")
    func critAndEncodingHeaders() throws {
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"crit\":[\"exp\"],\"exp\":1"))) == .unsupportedCriticalHeader)
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"b64\":false,\"crit\":[\"b64\"]"))) == .forbiddenHeader)
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"b64\":false"))) == .forbiddenHeader)
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"zip\":\"DEF\""))) == .forbiddenHeader)
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"cty\":\"JWT\""))) == .forbiddenHeader)
    }

    @Test("duplicate member names are refused in the header and in the claims")
    func duplicateMembers() throws {
        #expect(es.reason(try es.forge(header: "{\"alg\":\"ES256\",\"typ\":\"at+jwt\",\"kid\":\"k1\",\"alg\":\"none\"}")) == .malformed)
        let claims = Fixture.claims().dropLast() + ",\"sub\":\"mallory\"}"
        #expect(es.reason(try es.forge(claims: String(claims))) == .malformed)
    }

    @Test("header and claim names spelled with escapes are the names they spell: the same rules hold for them")
    func escapedNamesObeyTheRules() throws {
        // A forbidden header member, crit, and typ, each with one letter escaped.
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"j\\u0077k\":{}"))) == .forbiddenHeader)
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"\\u0063rit\":[\"exp\"]"))) == .unsupportedCriticalHeader)
        #expect(es.reason(try es.forge(header: "{\"alg\":\"ES256\",\"t\\u0079p\":\"at+jwt\",\"kid\":\"k1\"}")) == nil)
        #expect(throws: TokenValidationError(.wrongType, "the token type is \"JWT\", not an access token (\"at+jwt\")")) {
            try es.verifier.verify(try es.forge(header: "{\"alg\":\"ES256\",\"t\\u0079p\":\"JWT\",\"kid\":\"k1\"}"))
        }
        // A name whose FNV-1a hash is a registered name's (x5u's) is not that name, however it is made.
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"mzeigca\":\"https://evil.test/k\""))) == nil)
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"mzeig\\u0063a\":\"https://evil.test/k\""))) == nil)
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"x5u\":\"https://evil.test/k\""))) == .forbiddenHeader)
        // A time claim of the wrong type, a missing claim's escaped spelling, a duplicate by escape.
        #expect(es.reason(try es.forge(claims: Fixture.claims(["exp": nil, "\\u0065xp": "\"soon\""]))) == .invalidClaim)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["exp": nil, "\\u0065xp": "\(Int(Fixture.now) + 600)"]))) == nil)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["s\\u0075b": "\"mallory\""]))) == .malformed)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["session_\\u0069d": "\"s1\""]))) == .invalidClaim)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["iss": nil, "i\\u0073s": "\"https://evil.test\""]))) == .wrongIssuer)
    }

    @Test("time claims that are not finite in-range numbers are refused",
          arguments: ["\"1900000000\"", "true", "null", "[1900000000]", "{}", "-1", "1e300", "253402300800"])
    func malformedTimes(value: String) throws {
        for claim in ["exp", "nbf", "iat"] {
            #expect(es.reason(try es.forge(claims: Fixture.claims([claim: value]))) == .invalidClaim, "\(claim) = \(value)")
        }
    }

    @Test("a number too large for a double is malformed JSON, not an absent claim")
    func overflowingNumber() throws {
        #expect(es.reason(try es.forge(claims: Fixture.claims(["exp": "1e400"]))) == .malformed)
    }

    @Test("missing exp, iss, aud, sub, tenant_id or jti is refused", arguments: ["exp", "iss", "aud", "sub", "tenant_id", "jti", "client_id"])
    func missingClaims(claim: String) throws {
        #expect(es.reason(try es.forge(claims: Fixture.claims([claim: nil]))) == .missingClaim)
    }

    @Test("aud must contain our audience exactly")
    func audienceEdges() throws {
        #expect(es.reason(try es.forge(claims: Fixture.claims(["aud": "[\"other\",\"runtime\"]"]))) == nil)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["aud": "[\"other\"]"]))) == .wrongAudience)
        for near in ["\"runtime2\"", "\"runtim\"", "\"Runtime\"", "\"runtime/\"", "\" runtime\""] {
            #expect(es.reason(try es.forge(claims: Fixture.claims(["aud": near]))) == .wrongAudience, "aud \(near)")
        }
        #expect(es.reason(try es.forge(claims: Fixture.claims(["aud": "[]"]))) == .invalidClaim)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["aud": "7"]))) == .invalidClaim)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["aud": "[\"runtime\",7]"]))) == .invalidClaim)
    }

    @Test("iss must match exactly: no prefix, trailing slash, case or array", arguments: [
        "\"https://id.test/\"", "\"HTTPS://ID.TEST\"", "\"https://id.tes\"", "\"https://id.test.evil\"", "\"https://ID.test\"",
    ])
    func issuerEdges(value: String) throws {
        #expect(es.reason(try es.forge(claims: Fixture.claims(["iss": value]))) == .wrongIssuer)
    }

    @Test("iss of the wrong type is an invalid claim")
    func issuerType() throws {
        #expect(es.reason(try es.forge(claims: Fixture.claims(["iss": "[\"https://id.test\"]"]))) == .invalidClaim)
    }

    @Test("typ must say access token: JWT, refresh, id-token and absence are refused", arguments: [
        "\"JWT\"", "\"jwt\"", "\"refresh+jwt\"", "\"id_token+jwt\"", "\"logout+jwt\"", "\"at+jwt \"", "1",
    ])
    func typeConfusion(typ: String) throws {
        #expect(es.reason(try es.forge(header: "{\"alg\":\"ES256\",\"typ\":\(typ),\"kid\":\"k1\"}")) == .wrongType)
    }

    @Test("typ at+jwt and application/at+jwt are accepted in any case; no typ is refused")
    func acceptedTypes() throws {
        for typ in ["at+jwt", "application/at+jwt", "AT+JWT", "Application/At+Jwt"] {
            #expect(es.reason(try es.forge(header: "{\"alg\":\"ES256\",\"typ\":\"\(typ)\",\"kid\":\"k1\"}")) == nil, "typ \(typ)")
        }
        #expect(es.reason(try es.forge(header: "{\"alg\":\"ES256\",\"kid\":\"k1\"}")) == .wrongType)
    }

    @Test("five segments (a JWE) and other segment counts are malformed")
    func segmentCounts() throws {
        let token = try es.issue()
        #expect(es.reason(token + ".a.b") == .malformed)
        #expect(es.reason(token + ".") == .malformed)
        #expect(es.reason(String(token.split(separator: ".")[0])) == .malformed)
        #expect(es.reason("") == .malformed)
    }

    @Test("padded, standard-alphabet or non-canonical base64url is malformed")
    func nonCanonicalBase64() throws {
        let token = try es.issue()
        let parts = token.split(separator: ".").map(String.init)
        #expect(es.reason(parts[0] + "=." + parts[1] + "." + parts[2]) == .malformed)
        #expect(es.reason(parts[0] + "." + parts[1] + "." + parts[2] + "==") == .malformed)
        let standard = parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        if standard != parts[2] { #expect(es.reason(parts[0] + "." + parts[1] + "." + standard) == .malformed) }
        // 64 bytes encode to 86 characters with 4 unused bits; setting one makes another
        // string for the same bytes, which must be refused.
        var last = Array(parts[2].utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        let index = alphabet.firstIndex(of: last[last.count - 1])!
        last[last.count - 1] = alphabet[index | 1]
        #expect(es.reason(parts[0] + "." + parts[1] + "." + String(decoding: last, as: UTF8.self)) == (index & 1 == 1 ? nil : .malformed))
        #expect(es.reason(parts[0] + " ." + parts[1] + "." + parts[2]) == .malformed)
    }

    @Test("tokens over 8 KiB are refused as too large before parsing; 8 KiB itself is parsed")
    func oversized() throws {
        let big = String(repeating: "a", count: 8193)
        #expect(es.reason(big) == .tooLarge)
        #expect(es.reason(String(repeating: "a", count: 8192)) == .malformed)
        let padding = String(repeating: "x", count: 7000)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["pad": "\"\(padding)\""]))) == .tooLarge)
    }

    @Test("JSON nested deeper than 32 levels is malformed; 32 levels is accepted")
    func deepJSON() throws {
        // The claims object is level 1; 31 nested arrays make 32.
        let ok = String(repeating: "[", count: 31) + String(repeating: "]", count: 31)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["deep": ok]))) == nil)
        let deep = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["deep": deep]))) == .malformed)
        #expect(es.reason(try es.forge(header: es.header(extra: ",\"x\":" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40)))) == .malformed)
    }

    @Test("a byte-order mark before the header JSON is malformed")
    func byteOrderMark() throws {
        let header = "\u{FEFF}" + es.header()
        #expect(es.reason(try es.forge(header: header)) == .malformed)
    }

    @Test("an alg other than the key's bound alg is refused, even with a valid signature by that key")
    func boundAlgorithm() throws {
        let rsa = try Fixture(.rs256)
        // Same RSA key, signed as PS256: the signature is genuine but the key is bound to RS256.
        let psKey = JWSKey(kid: "k1", algorithm: .ps256, canSign: true, material: rsa.key.material)
        let token = try Forge.token(header: "{\"alg\":\"PS256\",\"typ\":\"at+jwt\",\"kid\":\"k1\"}", payload: Fixture.claims(), key: psKey)
        #expect(rsa.reason(token) == .algorithmMismatch)
        #expect(es.reason(try es.forge(header: es.header(alg: "ES384"))) == .algorithmMismatch)
        #expect(es.reason(try es.forge(header: es.header(alg: "ES256K"))) == .unsupportedAlgorithm)
    }

    @Test("time rules: expired, not yet valid, issued in the future, lifetime too long, with 60 s leeway")
    func timeRules() throws {
        let now = Int(Fixture.now)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["exp": "\(now - 61)"]))) == .expired)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["exp": "\(now - 60)"]))) == .expired)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["exp": "\(now - 59)"]))) == nil)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["nbf": "\(now + 61)"]))) == .notYetValid)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["nbf": "\(now + 60)"]))) == nil)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["iat": "\(now + 61)"]))) == .issuedInFuture)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["exp": "\(now + 86_401)"]))) == .lifetimeTooLong)
        #expect(es.reason(try es.forge(claims: Fixture.claims(["iat": "\(now - 86_000)", "exp": "\(now + 1000)"]))) == .lifetimeTooLong)
    }

    @Test("an access token carrying a session_id is refused, and a session_id is named as the wrong credential")
    func sessionIdConfusion() throws {
        #expect(es.reason(try es.forge(claims: Fixture.claims(["session_id": "\"ses_AAAAAAAAAAAAAAAAAAAAAA\""]))) == .invalidClaim)
        do {
            _ = try es.verifier.verify("ses_AAAAAAAAAAAAAAAAAAAAAA")
            Issue.record("a session_id verified as a token")
        } catch {
            #expect(error.reason == .malformed)
            #expect(error.message.contains("session_id was sent where an access token is expected"))
        }
    }

    @Test("error messages never contain the token")
    func messagesDoNotLeakTokens() throws {
        let token = try es.issue()
        let parts = token.split(separator: ".").map(String.init)
        for bad in [token + "x", parts[0] + "." + parts[1] + ".AAAA", token + ".a.b"] {
            do {
                _ = try es.verifier.verify(bad)
            } catch {
                #expect(!error.message.contains(parts[1]))
                #expect(!error.message.contains(parts[2]))
            }
        }
    }

    @Test("weak HMAC keys are refused at load", arguments: [(JWSAlgorithm.hs256, 31), (.hs384, 47), (.hs512, 63), (.hs256, 0)])
    func weakHMACKeys(algorithm: JWSAlgorithm, length: Int) throws {
        #expect(throws: KeyError.self) { try JWSKey(hmacSecret: [UInt8](repeating: 7, count: length), algorithm: algorithm, kid: "weak") }
        #expect(throws: Never.self) { try JWSKey(hmacSecret: [UInt8](repeating: 7, count: algorithm.hashLength), algorithm: algorithm, kid: "ok") }
    }

    @Test("RSA keys under 2048 bits are refused at load")
    func weakRSAKeys() throws {
        #expect(throws: KeyError.self) { try JWSKey.generate(algorithm: .rs256, rsaBits: 1024) }
    }
}
