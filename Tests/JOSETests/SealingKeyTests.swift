import Testing

@testable import JOSE

/// AES-256-GCM sealing of secrets kept at rest (a provider's refresh and ID tokens).
@Suite("Sealing key: AES-256-GCM for secrets at rest")
struct SealingKeyTests {
    @Test("opens the GCM specification's AES-256 test cases 13 and 14 (zero key, zero IV): the libcrypto wrapper is AES-256-GCM with a 96-bit nonce and a 128-bit tag")
    func knownAnswers() throws {
        let key = try SealingKey(bytes: [UInt8](repeating: 0, count: 32))
        let nonce = [UInt8](repeating: 0, count: 12)
        // Test case 13: empty plaintext, empty AAD.
        #expect(key.open(Base64URL.encode(nonce + hex("530f8afbc74536b9a963b4f1c4cb738b")), context: "") == [])
        // Test case 14: sixteen zero bytes.
        let sealed = Base64URL.encode(nonce + hex("cea7403d4d606b6e074ec5d3baf39d18") + hex("d0d1c8a799996bf0265b98b5d48ab919"))
        #expect(key.open(sealed, context: "") == [UInt8](repeating: 0, count: 16))
    }

    @Test("a sealed value opens only with its key and its context; any changed byte, a cut tag or a value of another key opens to nothing")
    func sealedValuesAreBound() throws {
        let key = try SealingKey.generate()
        let secret = Array("rt-provider-refresh-token".utf8)
        let sealed = try key.seal(secret, context: "refresh_token\nses_a")
        #expect(key.open(sealed, context: "refresh_token\nses_a") == secret)
        #expect(key.open(sealed, context: "refresh_token\nses_b") == nil, "another session's row")
        #expect(try SealingKey.generate().open(sealed, context: "refresh_token\nses_a") == nil, "another key")
        #expect(try key.seal(secret, context: "c") != key.seal(secret, context: "c"), "a fresh nonce each time")
        let bytes = try #require(Base64URL.decode(sealed))
        for index in bytes.indices {
            var changed = bytes
            changed[index] ^= 0x01
            #expect(key.open(Base64URL.encode(changed), context: "refresh_token\nses_a") == nil, "byte \(index)")
        }
        #expect(key.open(Base64URL.encode(Array(bytes.dropLast())), context: "refresh_token\nses_a") == nil)
        #expect(key.open("not base64url!", context: "x") == nil && key.open("", context: "x") == nil)
        #expect(throws: KeyError.self) { try SealingKey(bytes: [1, 2, 3]) }
    }
}
