import CLibCrypto

/// JWK import and export (RFC 7517, RFC 7518 section 6, RFC 8037) and the
/// RFC 7638 thumbprint.
extension JWSKey {
    /// Loads a JWK and binds it to an algorithm.
    ///
    /// The key's own `alg` member binds it. Without one, EC and OKP keys take
    /// the algorithm their curve implies; RSA and `oct` keys are refused,
    /// because their hash cannot be guessed safely. `fallbackAlgorithm`, when
    /// given, is used instead of refusing (for a keyring that records `alg`).
    /// A key without `kid` takes its RFC 7638 thumbprint (HMAC keys must name one).
    public init(jwk: JSONObject, fallbackAlgorithm: JWSAlgorithm? = nil, ignoreAlgorithmMember: Bool = false) throws {
        guard let kty = jwk["kty"]?.stringValue else { throw KeyError(.invalidKey, "the JWK has no \"kty\" string") }
        let crv = jwk["crv"]?.stringValue
        let algorithm: JWSAlgorithm
        if !ignoreAlgorithmMember, let value = jwk["alg"] {
            guard let name = value.stringValue, let parsed = JWSAlgorithm(rawValue: name) else {
                throw KeyError(.unsupported, "the JWK's \"alg\" is not a supported JWS algorithm")
            }
            algorithm = parsed
        } else if let implied = JWSAlgorithm.implied(kty: kty, crv: crv) ?? fallbackAlgorithm {
            algorithm = implied
        } else {
            throw KeyError(.unsupported, "the \(kty) JWK has no \"alg\"; add one (for example \"alg\":\"\(kty == "oct" ? "HS256" : "RS256")\") so the key is bound to one algorithm")
        }
        if let use = jwk["use"] {
            guard use.stringValue == "sig" else { throw KeyError(.unsupported, "the JWK's \"use\" is not \"sig\"") }
        }
        if let ops = jwk["key_ops"] {
            guard case .array(let list) = ops, list.contains(where: { $0.stringValue == "verify" || $0.stringValue == "sign" }) else {
                throw KeyError(.unsupported, "the JWK's \"key_ops\" allow neither \"sign\" nor \"verify\"")
            }
        }
        let kid = try jwk["kid"].map { value -> String in
            guard let text = value.stringValue else { throw KeyError(.invalidKeyID, "the JWK's \"kid\" is not a string") }
            return text
        }
        func member(_ name: String) throws -> [UInt8]? {
            guard let value = jwk[name] else { return nil }
            guard let text = value.stringValue, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
                throw KeyError(.invalidKey, "the JWK member \"\(name)\" is not non-empty base64url")
            }
            return bytes
        }
        func required(_ name: String) throws -> [UInt8] {
            guard let bytes = try member(name) else { throw KeyError(.invalidKey, "the \(kty) JWK has no \"\(name)\"") }
            return bytes
        }

        let material: Material
        var canSign = false
        switch kty {
        case "oct":
            let secret = try required("k")
            guard algorithm.family == .hmac else {
                throw KeyError(.algorithmMismatch, "a symmetric JWK cannot be bound to \(algorithm.rawValue)")
            }
            guard let kid else { throw KeyError(.invalidKeyID, "a symmetric JWK must have a \"kid\"") }
            self = try JWSKey(hmacSecret: secret, algorithm: algorithm, kid: kid)
            return
        case "RSA":
            let n = try required("n"), e = try required("e")
            if let d = try member("d") {
                let p = try required("p"), q = try required("q")
                let dp = try required("dp"), dq = try required("dq"), qi = try required("qi")
                canSign = true
                material = .asymmetric(try EVPKey.fromData(type: "RSA", isPrivate: true, bignums: [
                    ("n", n), ("e", e), ("d", d), ("rsa-factor1", p), ("rsa-factor2", q),
                    ("rsa-exponent1", dp), ("rsa-exponent2", dq), ("rsa-coefficient1", qi),
                ]))
            } else {
                material = .asymmetric(try EVPKey.fromData(type: "RSA", isPrivate: false, bignums: [("n", n), ("e", e)]))
            }
        case "EC":
            guard let crv, let curve = JWSAlgorithm.implied(kty: "EC", crv: crv)?.ecCurve else {
                throw KeyError(.unsupported, "the EC JWK's curve must be P-256, P-384 or P-521")
            }
            let x = try required("x"), y = try required("y")
            guard x.count == curve.coordinateLength, y.count == curve.coordinateLength else {
                throw KeyError(.invalidKey, "the \(crv) JWK's x and y must each be \(curve.coordinateLength) bytes")
            }
            let d = try member("d")
            if let d, d.count != curve.coordinateLength {
                throw KeyError(.invalidKey, "the \(crv) JWK's d must be \(curve.coordinateLength) bytes")
            }
            canSign = d != nil
            let key = try EVPKey.fromData(
                type: "EC", isPrivate: d != nil, bignums: d.map { [("priv", $0)] } ?? [],
                octets: [("pub", [0x04] + x + y)], utf8: [("group", curve.group)])
            guard key.passesPublicCheck() else { throw KeyError(.invalidKey, "the \(crv) JWK's point is not on the curve") }
            material = .asymmetric(key)
        case "OKP":
            guard crv == "Ed25519" else { throw KeyError(.unsupported, "the OKP JWK's curve must be Ed25519") }
            let x = try required("x")
            if let d = try member("d") {
                let key = try EVPKey.ed25519(raw: d, isPrivate: true)
                guard key.rawPublicKey() == x else { throw KeyError(.invalidKey, "the Ed25519 JWK's x does not match its d") }
                canSign = true
                material = .asymmetric(key)
            } else {
                material = .asymmetric(try EVPKey.ed25519(raw: x, isPrivate: false))
            }
        default:
            throw KeyError(.unsupported, "the JWK key type \"\(kty)\" is not supported")
        }
        self = try Self.bind(material, algorithm: algorithm, kid: kid, canSign: canSign)
    }

    /// The public members (`kty`, `crv`/`n`, `e`/`x`, `y`) in RFC 7638 order; `nil` for HMAC keys.
    func publicMembers() -> JSONObject? {
        guard case .asymmetric(let key) = material else { return nil }
        var object = JSONObject()
        switch algorithm.family {
        case .rsaPKCS1, .rsaPSS:
            guard let n = key.bignum("n"), let e = key.bignum("e") else { return nil }
            object["e"] = .string(Base64URL.encode(e))
            object["kty"] = "RSA"
            object["n"] = .string(Base64URL.encode(n))
        case .ecdsa:
            let curve = algorithm.ecCurve!
            guard let x = key.bignum("qx", length: curve.coordinateLength), let y = key.bignum("qy", length: curve.coordinateLength) else { return nil }
            object["crv"] = .string(curve.jwk)
            object["kty"] = "EC"
            object["x"] = .string(Base64URL.encode(x))
            object["y"] = .string(Base64URL.encode(y))
        case .eddsa:
            guard let x = key.rawPublicKey() else { return nil }
            object["crv"] = "Ed25519"
            object["kty"] = "OKP"
            object["x"] = .string(Base64URL.encode(x))
        case .hmac:
            return nil
        }
        return object
    }

    /// The public JWK with `kid`, `alg` and `use`; `nil` for symmetric keys,
    /// which are never published.
    public func publicJWK() -> JSONObject? {
        guard var object = publicMembers() else { return nil }
        object["kid"] = .string(kid)
        object["alg"] = .string(algorithm.rawValue)
        object["use"] = "sig"
        return object
    }

    /// The symmetric key as a JWK with its secret, for `keys/<kid>.jwk` only.
    public func secretJWK() throws -> JSONObject {
        guard case .symmetric(let key) = material else {
            throw KeyError(.unsupported, "key \(kid) is not symmetric; its private form is PEM")
        }
        return ["kty": "oct", "kid": .string(kid), "alg": .string(algorithm.rawValue), "k": .string(Base64URL.encode(key.secret))]
    }

    /// The RFC 7638 JWK thumbprint (SHA-256, base64url).
    public func thumbprint() throws -> String {
        let members: JSONObject
        switch material {
        case .symmetric(let key):
            members = ["k": .string(Base64URL.encode(key.secret)), "kty": "oct"]
        case .asymmetric:
            guard let object = publicMembers() else { throw KeyError(.libcrypto, "the public key could not be exported") }
            members = object
        }
        return Base64URL.encode(try Digest.sha256(JSONWriter.bytes(.object(members))))
    }
}
