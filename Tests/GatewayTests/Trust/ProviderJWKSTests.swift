import JOSE
import Testing

@testable import TrustedIssuers

@Suite("A provider's JWKS is read key by key: what cannot be used safely is left out, with its reason")
struct ProviderJWKSTests {
    static func jwk(_ key: JWSKey, _ changes: [String: JSONValue?] = [:]) throws -> JSONValue {
        var object = try #require(key.publicJWK())
        for (name, value) in changes { object[name] = value ?? nil }
        return .object(object)
    }

    static func read(_ keys: [JSONValue], allowed: [JWSAlgorithm]? = nil) throws -> ProviderJWKS {
        try ProviderJWKS(JSONWriter.bytes(["keys": .array(keys)]), allowed: allowed)
    }

    @Test("keys for encryption, symmetric keys, unknown kinds, curves that do not fit their alg and algorithms not allowed are left out; the rest load")
    func leftOut() throws {
        let es256 = try JWSKey.generate(algorithm: .es256, kid: "good")
        let rsa = try JWSKey.generate(algorithm: .rs256, kid: "rsa")
        var weak = try #require(rsa.publicJWK())
        if case .string(let n)? = weak["n"], let bytes = Base64URL.decode(n) { weak["n"] = .string(Base64URL.encode(Array(bytes.prefix(128)))) }
        weak["kid"] = "weak"
        let jwks = try Self.read([
            try Self.jwk(es256),
            try Self.jwk(es256, ["kid": "enc", "use": "enc"]),
            ["kty": "oct", "kid": "secret", "alg": "HS256", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"],
            try Self.jwk(es256, ["kid": "wrong-curve", "alg": "ES384"]),
            ["kty": "foo", "kid": "alien"],
            .object(weak),
            try Self.jwk(rsa),
            "not an object",
        ], allowed: [.es256, .rs256])
        #expect(Set(jwks.keys.keys) == ["good", "rsa"])
        let reasons = jwks.skipped.joined(separator: "\n")
        for kid in ["enc", "secret", "wrong-curve", "alien", "weak"] {
            #expect(reasons.contains("\"\(kid)\""), "\(kid) is named among the keys left out: \(reasons)")
        }
        #expect(reasons.contains("2048"), "the weak RSA key is named for its size")
        #expect(reasons.contains("key 7: not an object"))
    }

    @Test("an RSA key without alg takes the issuer's one RSA algorithm, and is left out when there are several or none")
    func rsaWithoutAlgorithm() throws {
        let rsa = try Self.jwk(try JWSKey.generate(algorithm: .rs256, kid: "bare"), ["alg": nil])
        #expect(try Self.read([rsa], allowed: [.rs256, .es256]).keys["bare"]?.algorithm == .rs256)
        #expect(try Self.read([rsa], allowed: [.ps256]).keys["bare"]?.algorithm == .ps256)
        #expect(throws: KeyError.self) { try Self.read([rsa], allowed: [.rs256, .ps256]) }
        #expect(throws: KeyError.self) { try Self.read([rsa], allowed: nil) }
    }

    @Test("a document that is not strict JSON, has no keys array, or has no usable key is refused whole")
    func refusedWhole() throws {
        #expect(throws: KeyError.self) { try ProviderJWKS(Array(#"{"keys":[}"#.utf8), allowed: nil) }
        #expect(throws: KeyError.self) { try ProviderJWKS(Array(#"{"keys":[],"keys":[]}"#.utf8), allowed: nil) }
        #expect(throws: KeyError.self) { try ProviderJWKS(Array(#"{"kty":"EC"}"#.utf8), allowed: nil) }
        #expect(throws: KeyError.self) { try Self.read([["kty": "oct", "kid": "k", "k": "AAAA"]]) }
    }

    @Test("max-age is read from Cache-Control and clamped to 5 minutes..24 hours; an hour without one")
    func maximumAge() {
        #expect(KeyFetcher.maximumAge("public, max-age=600") == 600)
        #expect(KeyFetcher.maximumAge("max-age=5") == 300)
        #expect(KeyFetcher.maximumAge("max-age=999999") == 86_400)
        #expect(KeyFetcher.maximumAge("no-store") == 3_600)
        #expect(KeyFetcher.maximumAge(nil) == 3_600)
        #expect(KeyFetcher.maximumAge("max-age=junk") == 3_600)
    }

    @Test("only same-origin redirects are followed")
    func origins() {
        #expect(KeyFetcher.origin("https://IDP.example.com/a") == KeyFetcher.origin("https://idp.example.com:443/b"))
        #expect(KeyFetcher.origin("https://idp.example.com/a") != KeyFetcher.origin("https://idp.example.com:8443/a"))
        #expect(KeyFetcher.origin("https://idp.example.com/a") != KeyFetcher.origin("http://idp.example.com/a"))
        #expect(KeyFetcher.origin("https://idp.example.com/a") != KeyFetcher.origin("https://evil.example.com/a"))
    }
}
