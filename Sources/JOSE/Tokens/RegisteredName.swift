/// Header and claim names the verifier acts on, recognised by hash.
///
/// The strict reader hands out these exact literals for these names (see
/// `StrictJSONReader`), so classifying a member is an integer comparison and,
/// on a hash match, a string comparison that succeeds on its fast path.
enum RegisteredName: UInt8, CaseIterable {
    case alg, typ, kid, cty, crit, jwk, jku, x5u, x5c, b64, zip
    case iss, sub, aud, exp, nbf, iat, jti, clientID, tenantID, scope, sessionID
    /// The claims only an ID token (`nonce`, `at_hash`, `c_hash`) or a logout token (`events`) carries.
    case nonce, atHash, cHash, events

    var text: String {
        switch self {
        case .alg: return "alg"
        case .typ: return "typ"
        case .kid: return "kid"
        case .cty: return "cty"
        case .crit: return "crit"
        case .jwk: return "jwk"
        case .jku: return "jku"
        case .x5u: return "x5u"
        case .x5c: return "x5c"
        case .b64: return "b64"
        case .zip: return "zip"
        case .iss: return "iss"
        case .sub: return "sub"
        case .aud: return "aud"
        case .exp: return "exp"
        case .nbf: return "nbf"
        case .iat: return "iat"
        case .jti: return "jti"
        case .clientID: return "client_id"
        case .tenantID: return "tenant_id"
        case .scope: return "scope"
        case .sessionID: return "session_id"
        case .nonce: return "nonce"
        case .atHash: return "at_hash"
        case .cHash: return "c_hash"
        case .events: return "events"
        }
    }

    /// A bit for sets of names.
    var bit: UInt32 { 1 << UInt32(rawValue) }

    private static let table: [(hash: UInt32, text: String, name: RegisteredName)] = allCases.map { (JSONMember.hash($0.text), $0.text, $0) }

    /// The registered name a member has, if any.
    @inline(__always)
    static func classify(_ member: JSONMember) -> RegisteredName? {
        classify(member.name, hash: member.nameHash)
    }

    static func classify(_ name: String, hash: UInt32? = nil) -> RegisteredName? {
        let hash = hash ?? JSONMember.hash(name)
        for entry in table where entry.hash == hash {
            return entry.text == name ? entry.name : nil
        }
        return nil
    }

    /// Splits claim names into a mask of registered ones and a list of the rest.
    static func mask(_ names: [String]) -> (mask: UInt32, others: [String]) {
        var mask: UInt32 = 0
        var others: [String] = []
        for name in names {
            if let registered = classify(name) { mask |= registered.bit } else { others.append(name) }
        }
        return (mask, others)
    }
}
