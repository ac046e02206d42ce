/// The rules an access token must meet beyond its signature (RFC 9068, DESIGN.md).
///
/// Defaults are strict: `typ` `at+jwt`, `kid` required, `iss`, `sub`, `aud`
/// and `exp` required, 60 s leeway, at most 24 h of remaining lifetime, 8 KiB.
public struct AccessTokenPolicy: Sendable {
    /// The exact `iss` required; `nil` checks only that `iss` is a string.
    public var issuer: String?
    /// The audiences `aud` must contain one of; empty checks only its form.
    public var audiences: [String]
    /// The audience that `aud` must contain; `nil` checks only its form.
    public var audience: String? {
        get { audiences.first }
        set { audiences = newValue.map { [$0] } ?? [] }
    }
    /// Whether the header must carry `typ` (a provider's tokens may have none; the gateway's always do).
    public var requiresType = true
    /// Whether the header must carry `kid` (a provider signing with one key may leave it out).
    public var requiresKeyID = true
    /// Clock skew tolerated on `exp`, `nbf` and `iat`, in seconds.
    public var leeway: Double
    /// Furthest `exp` may lie beyond the checking instant (and beyond `iat`), in seconds.
    public var maximumLifetime: Double
    /// Accepted `typ` values, compared case-insensitively (media types are).
    public var acceptedTypes: [String]
    /// Claims that must be present.
    public var requiredClaims: [String] { didSet { required = RegisteredName.mask(requiredClaims) } }
    /// Claims an access token must never carry.
    ///
    /// For a provider's tokens, also those of its other tokens (`otherTokenClaims`): an ID token's
    /// `aud` may be an audience an access token's is too, and it must never pass as one.
    public var forbiddenClaims: [String] { didSet { forbidden = RegisteredName.mask(forbiddenClaims) } }
    /// The same lists split for the hot path: a bit mask of registered names, and the rest.
    private var required: (mask: UInt32, others: [String])
    private var forbidden: (mask: UInt32, others: [String])
    /// The claims that mark an ID token (`nonce`, `at_hash`, `c_hash`) or a logout token (`events`):
    /// an access token carries none of them.
    public static let otherTokenClaims = ["nonce", "at_hash", "c_hash", "events"]
    /// Longest token accepted, in bytes; checked before anything else.
    public var maximumTokenBytes: Int
    /// Deepest JSON nesting accepted in header and claims.
    public var maximumJSONDepth: Int

    /// The `token verify` defaults.
    public init(
        issuer: String? = nil, audience: String? = nil, leeway: Double = 60, maximumLifetime: Double = 86_400,
        acceptedTypes: [String] = ["at+jwt", "application/at+jwt"],
        requiredClaims: [String] = ["iss", "sub", "aud", "exp"], forbiddenClaims: [String] = ["session_id"],
        maximumTokenBytes: Int = JWSCompact.defaultMaximumBytes, maximumJSONDepth: Int = 32
    ) {
        self.issuer = issuer
        self.audiences = audience.map { [$0] } ?? []
        self.leeway = leeway
        self.maximumLifetime = maximumLifetime
        self.acceptedTypes = acceptedTypes
        self.requiredClaims = requiredClaims
        self.forbiddenClaims = forbiddenClaims
        self.required = RegisteredName.mask(requiredClaims)
        self.forbidden = RegisteredName.mask(forbiddenClaims)
        self.maximumTokenBytes = maximumTokenBytes
        self.maximumJSONDepth = maximumJSONDepth
    }

    /// The gateway's policy for its own tokens: issuer and audience fixed, and
    /// every claim the issuer writes required.
    public static func gateway(issuer: String, audience: String, leeway: Double = 60, maximumLifetime: Double = 86_400) -> AccessTokenPolicy {
        AccessTokenPolicy(
            issuer: issuer, audience: audience, leeway: leeway, maximumLifetime: maximumLifetime,
            requiredClaims: ["iss", "sub", "aud", "exp", "iat", "nbf", "jti", "client_id", "tenant_id"])
    }

    /// Latest NumericDate accepted (9999-12-31T23:59:59Z); anything larger is an attack or a bug.
    public static let latestNumericDate: Double = 253_402_300_799

    // MARK: Header rules

    /// Header members refused outright (`crit` is refused with its own reason).
    static let forbiddenHeaders = ["jwk", "jku", "x5u", "x5c", "b64", "zip", "cty"]

    /// Checks the header: forbidden members, `crit`, `typ` and `kid`. Returns the `kid`.
    public func checkHeader(_ header: JSONObject) throws(TokenValidationError) -> String {
        var typ: JSONValue? = nil
        var kidValue: JSONValue? = nil
        for member in header.members {
            switch RegisteredName.classify(member) {
            case .jwk, .jku, .x5u, .x5c, .b64, .zip, .cty:
                throw TokenValidationError(.forbiddenHeader, "the header member \"\(member.name)\" is not accepted; keys come only from the configured key set")
            case .crit:
                throw TokenValidationError(.unsupportedCriticalHeader, "the header lists critical extensions (\"crit\"), which Portcullis does not implement")
            case .typ: typ = member.value
            case .kid: kidValue = member.value
            default: continue
            }
        }
        if let typ {
            guard let type = typ.stringValue, acceptedTypes.contains(where: { $0 == type || $0.caseInsensitiveEquals(type) }) else {
                let shown = typ.stringValue.map { "\"\(JSONValue.clip($0))\"" } ?? typ.typeDescription
                throw TokenValidationError(.wrongType, "the token type is \(shown), not an access token (\"at+jwt\")")
            }
        } else if requiresType {
            throw TokenValidationError(.wrongType, "the header has no \"typ\"; access tokens are typed \"at+jwt\"")
        }
        guard let kidValue else {
            // "" asks the key provider for its only key; a provider with several refuses it.
            if !requiresKeyID { return "" }
            throw TokenValidationError(.unknownKey, "the header has no \"kid\"")
        }
        guard let kid = kidValue.stringValue else { throw TokenValidationError(.unknownKey, "the header's \"kid\" is not a string") }
        return kid
    }

    // MARK: Claim rules

    /// All problems with `claims` as of `now`, in a fixed order; empty if none.
    ///
    /// The verifier stops at the first; `token inspect` shows them all.
    public func problems(in claims: JSONObject, at now: Double, stopAtFirst: Bool = false) -> [TokenValidationError] {
        var found: [TokenValidationError] = []
        func add(_ reason: TokenValidationError.Reason, _ message: String) -> Bool {
            found.append(TokenValidationError(reason, message))
            return stopAtFirst
        }
        // One pass over the members: classify each, type-check the registered ones.
        var seen: UInt32 = 0
        var exp: Double? = nil, nbf: Double? = nil, iat: Double? = nil
        var aud: JSONValue? = nil, iss: String? = nil
        var typeProblems: [TokenValidationError] = []
        for member in claims.members {
            guard let name = RegisteredName.classify(member) else { continue }
            seen |= name.bit
            switch name {
            case .iss, .sub, .jti, .clientID, .tenantID, .scope:
                guard let text = member.value.stringValue, !(name == .sub && text.isEmpty) else {
                    typeProblems.append(TokenValidationError(.invalidClaim, "the claim \"\(member.name)\" must be a non-empty string, not \(member.value.typeDescription)"))
                    continue
                }
                if name == .iss { iss = text }
            case .exp, .nbf, .iat:
                guard let seconds = member.value.numberValue else {
                    typeProblems.append(TokenValidationError(.invalidClaim, "the claim \"\(member.name)\" must be a NumericDate (a JSON number), not \(member.value.typeDescription)"))
                    continue
                }
                guard seconds >= 0, seconds <= Self.latestNumericDate else {
                    typeProblems.append(TokenValidationError(.invalidClaim, "the claim \"\(member.name)\" is outside the range of valid dates"))
                    continue
                }
                switch name {
                case .exp: exp = seconds
                case .nbf: nbf = seconds
                default: iat = seconds
                }
            case .aud:
                aud = member.value
            default:
                continue
            }
        }
        if required.mask & ~seen != 0 || !required.others.isEmpty {
            for name in requiredClaims where claims[name] == nil {
                if add(.missingClaim, "the required claim \"\(name)\" is missing") { return found }
            }
        }
        if forbidden.mask & seen != 0 || !forbidden.others.isEmpty {
            for name in forbiddenClaims where claims[name] != nil {
                let why =
                    switch name {
                    case "session_id": "an access token must not carry a session_id; send it separately"
                    case "nonce":
                        "an ID token was sent where an access token is expected (it carries nonce); send the provider's access token (Keycloak 24 and earlier put nonce in access tokens too: see access_tokens_carry_nonce)"
                    case "at_hash", "c_hash": "an ID token was sent where an access token is expected (it carries \(name)); send the provider's access token"
                    case "events": "a logout token was sent where an access token is expected (it carries events)"
                    default: "the claim \"\(name)\" is not allowed in an access token"
                    }
                if add(.invalidClaim, why) { return found }
            }
        }
        for problem in typeProblems {
            if add(problem.reason, problem.message) { return found }
        }
        var audienceMatches = audiences.isEmpty
        if let aud {
            switch aud {
            case .string(let single):
                audienceMatches = audienceMatches || audiences.contains(single)
            case .array(let list) where !list.isEmpty && list.allSatisfy({ $0.stringValue != nil }):
                audienceMatches = audienceMatches || list.contains { $0.stringValue.map(audiences.contains) ?? false }
            default:
                audienceMatches = true  // reported as invalid just below; not also as wrong
                if add(.invalidClaim, "the claim \"aud\" must be a string or a non-empty array of strings") { return found }
            }
        }
        if let issuer, let iss, iss != issuer {
            if add(.wrongIssuer, "the token was issued by \"\(JSONValue.clip(iss))\", not by the expected issuer") { return found }
        }
        if !audiences.isEmpty, aud != nil, !audienceMatches {
            let expected = audiences.count == 1 ? "the audience \"\(audiences[0])\"" : "any of the audiences \(audiences.map { "\"\($0)\"" }.joined(separator: ", "))"
            if add(.wrongAudience, "the token is not meant for \(expected)") { return found }
        }
        if let exp, exp <= now - leeway {
            if add(.expired, "the token expired \(Self.describe(now - exp)) ago") { return found }
        }
        if let nbf, nbf > now + leeway {
            if add(.notYetValid, "the token is not valid for another \(Self.describe(nbf - now))") { return found }
        }
        if let iat, iat > now + leeway {
            if add(.issuedInFuture, "the token claims to be issued \(Self.describe(iat - now)) in the future") { return found }
        }
        if let exp {
            if exp - now > maximumLifetime {
                if add(.lifetimeTooLong, "the token expires in \(Self.describe(exp - now)); at most \(Self.describe(maximumLifetime)) is accepted") { return found }
            } else if let iat, exp - iat > maximumLifetime {
                if add(.lifetimeTooLong, "the token was issued for \(Self.describe(exp - iat)); at most \(Self.describe(maximumLifetime)) is accepted") { return found }
            }
        }
        return found
    }

    /// A duration in words: "42 seconds", "14 minutes", "3 hours", "2 days".
    public static func describe(_ seconds: Double) -> String {
        let value = abs(seconds)
        func unit(_ count: Double, _ name: String) -> String {
            let whole = Int(count.rounded())
            return "\(whole) \(name)\(whole == 1 ? "" : "s")"
        }
        if value < 120 { return unit(value, "second") }
        if value < 7_200 { return unit(value / 60, "minute") }
        if value < 172_800 { return unit(value / 3_600, "hour") }
        return unit(value / 86_400, "day")
    }
}

extension String {
    func caseInsensitiveEquals(_ other: String) -> Bool {
        utf8.count == other.utf8.count && lowercased() == other.lowercased()
    }
}
