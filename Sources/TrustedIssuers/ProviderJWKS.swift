import JOSE

/// A provider's JWKS, read strictly but key by key: a key the gateway cannot
/// use safely is left out with its reason, and the rest are kept.
///
/// Left out: keys for encryption (`use` other than `sig`), symmetric keys (an
/// HMAC secret is never taken from a URL), kinds and curves Portcullis does
/// not verify, RSA keys under 2048 bits, EC keys whose curve does not fit
/// their `alg`, keys whose algorithm the issuer does not allow, and RSA keys
/// without `alg` when the issuer allows more than one RSA algorithm (their
/// hash cannot be guessed safely).
struct ProviderJWKS: Sendable {
    let keys: [String: JWSKey]
    /// One line per key left out: its kid (or index) and why.
    let skipped: [String]

    /// - Throws: `KeyError` when the document is not a strict JSON object with a `keys` array,
    ///   or when no key in it can be used.
    init(_ bytes: [UInt8], allowed: [JWSAlgorithm]?) throws {
        let document: JSONObject
        do {
            document = try StrictJSONReader().parseObject(bytes)
        } catch {
            throw KeyError(.invalidKey, "the JWKS is not strict JSON: \(error.message)")
        }
        guard case .array(let list)? = document["keys"] else { throw KeyError(.invalidKey, "the JWKS has no \"keys\" array") }
        var keys: [String: JWSKey] = [:]
        var skipped: [String] = []
        for (index, value) in list.enumerated() {
            guard let object = value.objectValue else {
                skipped.append("key \(index): not an object")
                continue
            }
            let name = object["kid"]?.stringValue.map { "\"\(JSONValue.clip($0))\"" } ?? "at index \(index)"
            do {
                let key = try Self.key(object, allowed: allowed)
                guard keys[key.kid] == nil else {
                    skipped.append("key \(name): its kid repeats an earlier key's")
                    continue
                }
                keys[key.kid] = key
            } catch let error as KeyError {
                skipped.append("key \(name): \(error.message)")
            }
        }
        guard !keys.isEmpty else {
            throw KeyError(.invalidKey, "the JWKS has no key this gateway can use" + (skipped.isEmpty ? "" : " (" + skipped.joined(separator: "; ") + ")"))
        }
        self.keys = keys
        self.skipped = skipped
    }

    private static func key(_ object: JSONObject, allowed: [JWSAlgorithm]?) throws -> JWSKey {
        if let use = object["use"], use.stringValue != "sig" { throw KeyError(.unsupported, "its use is not sig") }
        guard let kty = object["kty"]?.stringValue, ["RSA", "EC", "OKP"].contains(kty) else {
            throw KeyError(.unsupported, "its kty is not RSA, EC or OKP (symmetric keys are never taken from a URL)")
        }
        // An RSA key without alg takes the issuer's one RSA algorithm, if it allows exactly one.
        var fallback: JWSAlgorithm?
        if kty == "RSA", object["alg"] == nil {
            let rsa = (allowed ?? []).filter { $0.family == .rsaPKCS1 || $0.family == .rsaPSS }
            guard rsa.count == 1 else {
                throw KeyError(.unsupported, "an RSA key without alg needs exactly one RSA algorithm in the issuer's algorithms")
            }
            fallback = rsa[0]
        }
        let key = try JWSKey(jwk: object, fallbackAlgorithm: fallback)
        guard !key.isSymmetric else { throw KeyError(.unsupported, "it is symmetric") }
        if let allowed, !allowed.contains(key.algorithm) {
            throw KeyError(.unsupported, "its algorithm \(key.algorithm.rawValue) is not among the issuer's algorithms")
        }
        return key
    }
}
