import Foundation
import Testing

@testable import JOSE

/// A verifier reads a signer's header once (`KnownHeaders`), and keeps nothing else: every
/// token with a known header is checked as a token with a new one is.
@Suite("Known headers: a header read once, every check still made")
struct KnownHeadersTests {
    @Test("a header is remembered after a token carrying it verified, and only then")
    func rememberedAfterVerification() throws {
        let fixture = try Fixture(.hs256)
        let good = try fixture.issue()
        let parts = good.split(separator: ".")
        var signature = try #require(Base64URL.decode(String(parts[2])))
        signature[0] ^= 1
        #expect(fixture.reason(parts[0] + "." + parts[1] + "." + Base64URL.encode(signature)) == .badSignature)
        #expect(fixture.reason(try fixture.forge(claims: Fixture.claims(["exp": "1"]))) == .expired)
        #expect(fixture.verifier.knownHeaders.count == 0, "no token verified, no header kept")
        #expect(fixture.reason(good) == nil)
        #expect(fixture.verifier.knownHeaders.count == 1)
        #expect(fixture.reason(good) == nil)
        #expect(fixture.verifier.knownHeaders.count == 1, "a header is kept once")
    }

    @Test("with the signer's header known, every claim and signature check refuses as it does for a new verifier",
          arguments: [JWSAlgorithm.hs256, .es256, .eddsa])
    func knownHeaderChangesNoAnswer(algorithm: JWSAlgorithm) throws {
        let warm = try Fixture(algorithm)
        #expect(warm.reason(try warm.issue()) == nil)
        #expect(warm.verifier.knownHeaders.count == 1)
        let now = Int(Fixture.now)
        let claimSets: [[String: String?]] = [
            [:], ["exp": "\(now - 120)"], ["nbf": "\(now + 600)"], ["iat": "\(now + 600)"], ["exp": "\(now + 200_000)"],
            ["iss": "\"https://evil.test\""], ["aud": "\"other\""], ["aud": "[]"], ["sub": "\"\""], ["sub": nil], ["jti": "7"],
            ["session_id": "\"s1\""], ["nonce": "\"n\""], ["exp": "\"soon\""], ["exp": "1e400"], ["sub": "\"a\", \"sub\": \"b\""],
        ]
        for claims in claimSets {
            let token = try warm.forge(claims: Fixture.claims(claims))
            // The same header text as the issuer's: the known header is the one taken.
            #expect(token.split(separator: ".")[0] == (try warm.issue()).split(separator: ".")[0])
            let cold = AccessTokenVerifier(keys: warm.keySet, policy: warm.verifier.policy, clock: FixedClock(Fixture.now))
            func answer(_ verifier: AccessTokenVerifier) -> Result<String, TokenValidationError> {
                do throws(TokenValidationError) { return .success(try verifier.verify(token).subject) } catch { return .failure(error) }
            }
            #expect(answer(warm.verifier) == answer(cold), "\(claims)")
        }
        // A flipped signature bit and a truncated signature, under the known header.
        let good = try warm.issue()
        var signature = try #require(Base64URL.decode(String(good.split(separator: ".")[2])))
        signature[0] ^= 1
        let prefix = good.split(separator: ".")[0] + "." + good.split(separator: ".")[1]
        #expect(warm.reason(prefix + "." + Base64URL.encode(signature)) == .badSignature)
        #expect(warm.reason(prefix + "." + Base64URL.encode(signature.dropLast())) == .badSignature)
        #expect(warm.reason(prefix + ".") == .badSignature)
        // The payload's and the signature's base64url are still checked (the lengths kept, so the
        // known header is taken and the segment itself refused).
        let payload = good.split(separator: ".")[1]
        #expect(warm.reason(good.split(separator: ".")[0] + "." + payload.dropLast() + "+." + good.split(separator: ".")[2]) == .malformed)
        #expect(warm.reason(prefix + "." + good.split(separator: ".")[2].dropLast() + "+") == .malformed)
    }

    @Test("a header known to a verifier is checked by the rules of each audience it is asked for")
    func forAudienceKeepsTheRules() throws {
        let fixture = try Fixture(.es256)
        #expect(fixture.reason(try fixture.issue()) == nil)
        let other = fixture.verifier.forAudience("https://mcp.test/mcp")
        #expect(other.knownHeaders === fixture.verifier.knownHeaders)
        #expect(performing: { try other.verify(try fixture.issue()) }, throws: { ($0 as? TokenValidationError)?.reason == .wrongAudience })
        let forOther = try fixture.forge(claims: Fixture.claims(["aud": "\"https://mcp.test/mcp\""]))
        #expect(try other.verify(forOther).subject == "alice")
        #expect(fixture.reason(forOther) == .wrongAudience)
    }

    @Test("a token parsed first (as with trusted issuers) and then verified makes its header known, unless it was read under another nesting limit")
    func parsedThenVerified() throws {
        let fixture = try Fixture(.hs256)
        let good = try fixture.issue()
        _ = try fixture.verifier.verify(try fixture.verifier.parse(good))
        #expect(fixture.verifier.knownHeaders.count == 1)
        var shallow = fixture.verifier.policy
        shallow.maximumJSONDepth = 5
        let strict = AccessTokenVerifier(keys: fixture.keySet, policy: shallow, clock: FixedClock(Fixture.now))
        _ = try strict.verify(try JWSCompact.parse(good))  // read by a reader of depth 32
        #expect(strict.knownHeaders.count == 0)
        _ = try strict.verify(try strict.parse(good))
        #expect(strict.knownHeaders.count == 1)
    }

    @Test("a header in use stays known: the least recently used is the one replaced")
    func leastRecentlyUsedGoes() throws {
        let fixture = try Fixture(.hs256)
        func header(_ index: Int) -> String { fixture.header(extra: ",\"n\":\(index)") }
        func known(_ index: Int) -> Bool {
            Array(Forge.b64(header(index)).utf8).withUnsafeBytes { fixture.verifier.knownHeaders.header(readFrom: $0, by: fixture.verifier.reader) != nil }
        }
        for index in 0..<4 { _ = try fixture.verifier.verify(try fixture.forge(header: header(index))) }
        _ = try fixture.verifier.verify(try fixture.forge(header: header(0)))  // 0 used again
        _ = try fixture.verifier.verify(try fixture.forge(header: header(4)))
        #expect(known(0) && !known(1) && known(2) && known(3) && known(4))
    }

    /// Keys that can be withdrawn between two verifications.
    final class WithdrawableKeys: VerificationKeyProvider, @unchecked Sendable {
        private let lock = NSLock()
        private var key: JWSKey?
        init(_ key: JWSKey) { self.key = key }
        func withdraw() { lock.withLock { key = nil } }
        func verificationKey(forKID kid: String) -> JWSKey? { lock.withLock { key?.kid == kid ? key : nil } }
    }

    @Test("a key withdrawn after its header became known refuses the very next token that names it")
    func withdrawnKeyIsRefusedAtOnce() throws {
        let fixture = try Fixture(.es256)
        let keys = WithdrawableKeys(fixture.key)
        let verifier = AccessTokenVerifier(keys: keys, policy: fixture.verifier.policy, clock: FixedClock(Fixture.now))
        _ = try verifier.verify(try fixture.issue())
        #expect(verifier.knownHeaders.count == 1)
        keys.withdraw()
        #expect(throws: TokenValidationError(.unknownKey, "no key has the kid \"k1\"")) { try verifier.verify(try fixture.issue()) }
    }

    @Test("at most four headers are kept, the oldest replaced first, and a header over 256 characters never")
    func bounded() throws {
        let fixture = try Fixture(.hs256)
        func header(_ index: Int) -> String { fixture.header(extra: ",\"n\":\(index)") }
        for index in 0..<6 {
            #expect(fixture.reason(try fixture.forge(header: header(index))) == nil)
        }
        #expect(fixture.verifier.knownHeaders.count == KnownHeaders.limit)
        // The two oldest are gone, the four newest are there.
        for index in 0..<6 {
            let text = Array(Forge.b64(header(index)).utf8)
            let found = text.withUnsafeBytes { fixture.verifier.knownHeaders.header(readFrom: $0, by: fixture.verifier.reader) }
            #expect((found != nil) == (index >= 2), "header \(index)")
        }
        let long = fixture.header(extra: ",\"pad\":\"" + String(repeating: "p", count: 200) + "\"")
        #expect(fixture.reason(try fixture.forge(header: long)) == nil)
        let longText = Array(Forge.b64(long).utf8)
        #expect(longText.count > KnownHeaders.longestText)
        #expect(longText.withUnsafeBytes { fixture.verifier.knownHeaders.header(readFrom: $0, by: fixture.verifier.reader) } == nil)
    }
}
