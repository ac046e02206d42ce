/// Where a key is in its rotation (DESIGN.md, "Tokens and keys").
///
/// `next` is published but does not sign; `active` signs; `retired` is
/// published and verifies until every token it signed has expired. All three
/// verify, so that a gateway that has not yet reloaded still accepts tokens
/// from one that has.
public enum KeyStatus: String, Sendable, CaseIterable {
    case next, active, retired
}

/// An immutable set of keys with their rotation states.
public struct KeySet: Sendable, VerificationKeyProvider, SigningKeyProvider {
    public struct Entry: Sendable {
        public let key: JWSKey
        public let status: KeyStatus

        public init(key: JWSKey, status: KeyStatus) {
            self.key = key
            self.status = status
        }
    }

    /// Entries in `keyring.json` order.
    public let entries: [Entry]
    private let byKID: [String: JWSKey]

    /// Builds a set; kids must be unique and at most one key may be active.
    public init(_ entries: [Entry]) throws {
        var byKID: [String: JWSKey] = [:]
        for entry in entries {
            guard byKID.updateValue(entry.key, forKey: entry.key.kid) == nil else {
                throw KeyError(.invalidKeyID, "two keys have the kid \"\(entry.key.kid)\"; kids must be unique")
            }
        }
        guard entries.filter({ $0.status == .active }).count <= 1 else {
            throw KeyError(.invalidKey, "more than one key is active; exactly one key signs at a time")
        }
        self.entries = entries
        self.byKID = byKID
    }

    /// A set of verification keys with no rotation states (a JWKS file, say); all count as active-for-verify.
    public init(verificationKeys keys: [JWSKey]) throws {
        try self.init(keys.map { Entry(key: $0, status: .retired) })
    }

    public func verificationKey(forKID kid: String) -> JWSKey? {
        byKID[kid]
    }

    /// The active key.
    public func currentSigningKey() throws -> JWSKey {
        guard let entry = entries.first(where: { $0.status == .active }) else {
            throw KeyError(.notPrivate, "no key is active; create one with `portcullis keys generate --alg ES256`")
        }
        guard entry.key.canSign else { throw KeyError(.notPrivate, "the active key \(entry.key.kid) has no private part") }
        return entry.key
    }

    /// The public JWKS: next, active and retired public keys. Symmetric keys are never included.
    public func publicJWKS() -> JSONObject {
        ["keys": .array(entries.compactMap { $0.key.publicJWK().map(JSONValue.object) })]
    }

    /// Reads a JWKS document (which may hold symmetric keys) for verification.
    ///
    /// Each key is bound to its `alg`, or the one its curve implies; see
    /// `JWSKey.init(jwk:)`. Any key that cannot be loaded fails the whole set,
    /// naming the key, so a typo never silently removes a key.
    public static func fromJWKS(_ bytes: [UInt8]) throws -> KeySet {
        let document: JSONObject
        do {
            document = try StrictJSONReader().parseObject(bytes)
        } catch {
            throw KeyError(.invalidKey, "the JWKS is not strict JSON: \(error.message)")
        }
        let list: [JSONValue]
        if case .array(let keys)? = document["keys"] {
            list = keys
        } else if document["kty"] != nil {
            list = [.object(document)]  // a single JWK is accepted as a set of one
        } else {
            throw KeyError(.invalidKey, "the JWKS has no \"keys\" array")
        }
        var keys: [JWSKey] = []
        for (index, value) in list.enumerated() {
            guard let object = value.objectValue else { throw KeyError(.invalidKey, "key \(index) in the JWKS is not an object") }
            do {
                keys.append(try JWSKey(jwk: object))
            } catch let error as KeyError {
                let name = object["kid"]?.stringValue.map { "\"\(JSONValue.clip($0))\"" } ?? "at index \(index)"
                throw KeyError(error.code, "JWKS key \(name): \(error.message)")
            }
        }
        // A set that mixes HMAC secrets with public keys is the setting of the
        // key-confusion attack; each kind must come in a set of its own.
        if keys.contains(where: \.isSymmetric), keys.contains(where: { !$0.isSymmetric }) {
            throw KeyError(.invalidKey, "the JWKS mixes symmetric (HMAC) keys with public keys; keep HMAC secrets in a JWKS of their own")
        }
        return try KeySet(verificationKeys: keys)
    }
}
