/// Supplies verification keys by `kid`.
public protocol VerificationKeyProvider: Sendable {
    /// The key named `kid`, or `nil`. Keys are chosen by `kid` only.
    func verificationKey(forKID kid: String) -> JWSKey?
}

/// An access token that passed every check.
public struct VerifiedAccessToken: Sendable {
    public let header: JSONObject
    public let claims: JSONObject
    /// The key that verified the signature.
    public let keyID: String
    public let algorithm: JWSAlgorithm

    public init(header: JSONObject, claims: JSONObject, keyID: String, algorithm: JWSAlgorithm) {
        self.header = header
        self.claims = claims
        self.keyID = keyID
        self.algorithm = algorithm
    }

    /// `sub`: who the token is about.
    public var subject: String { claims.value(of: .sub)?.stringValue ?? "" }
    /// `iss`.
    public var issuer: String { claims.value(of: .iss)?.stringValue ?? "" }
    /// `exp`, in seconds since the epoch.
    public var expiresAt: Double { claims.value(of: .exp)?.numberValue ?? 0 }
    /// `tenant_id`, when present.
    public var tenantID: String? { claims.value(of: .tenantID)?.stringValue }
    /// `jti`, when present.
    public var tokenID: String? { claims.value(of: .jti)?.stringValue }
    /// `client_id`, when present.
    public var clientID: String? { claims.value(of: .clientID)?.stringValue }
    /// `scope`, when present.
    public var scope: String? { claims.value(of: .scope)?.stringValue }
}

/// Verifies access tokens against a key set and an `AccessTokenPolicy`.
///
/// Order of work, cheapest and most structural first: size cap, three
/// segments, canonical base64url, strict JSON header, `alg`, header rules,
/// strict JSON claims (so a hostile token costs no public-key operation), key
/// by `kid`, `alg` equal to the key's bound algorithm, signature, then the
/// claim rules. Between calls it keeps only what a verified token's header read to
/// (`KnownHeaders`): every check still runs on every token. Safe to share across threads.
public struct AccessTokenVerifier: Sendable {
    public let keys: any VerificationKeyProvider
    public let policy: AccessTokenPolicy
    public let clock: any TokenClock
    /// The strict reader for header and claims (its depth limit from the policy).
    public let reader: StrictJSONReader
    /// Headers of tokens this verifier (or one made from it by `forAudience`) has verified, as
    /// read: a header's reading depends on its text and the reader's depth limit only.
    let knownHeaders: KnownHeaders

    public init(keys: any VerificationKeyProvider, policy: AccessTokenPolicy, clock: any TokenClock = SystemClock()) {
        self.init(keys: keys, policy: policy, clock: clock, knownHeaders: KnownHeaders(maxDepth: policy.maximumJSONDepth))
    }

    private init(keys: any VerificationKeyProvider, policy: AccessTokenPolicy, clock: any TokenClock, knownHeaders: KnownHeaders) {
        self.keys = keys
        self.policy = policy
        self.clock = clock
        self.reader = StrictJSONReader(maxDepth: policy.maximumJSONDepth)
        self.knownHeaders = knownHeaders
    }

    /// This verifier for tokens whose `aud` must be `audience` instead of the policy's: an MCP
    /// resource's tokens, checked with the same keys, issuer and limits (and the headers read so far).
    public func forAudience(_ audience: String) -> AccessTokenVerifier {
        var policy = policy
        policy.audiences = [audience]
        return AccessTokenVerifier(keys: keys, policy: policy, clock: clock, knownHeaders: knownHeaders)
    }

    /// Verifies `token` and returns its header and claims.
    ///
    /// - Throws: `TokenValidationError` with a stable `reason`.
    public func verify(_ token: String) throws(TokenValidationError) -> VerifiedAccessToken {
        var token = token  // withUTF8 makes the string contiguous in place, once
        let outcome = token.withUTF8 { utf8 in
            Result { () throws(TokenValidationError) -> VerifiedAccessToken in
                try JWSCompact.withParts(of: UnsafeRawBufferPointer(utf8), maximumBytes: policy.maximumTokenBytes, reader: reader, known: knownHeaders) {
                    (parts) throws(TokenValidationError) in try verify(parts)
                }
            }
        }
        return try outcome.get()
    }

    /// Parses `token` as `verify` does (its size, segments, base64url and header), the header taken
    /// from the headers this verifier has read when it read the same text: for a caller that reads
    /// the claims before choosing whose keys verify the token.
    public func parse(_ token: String) throws(TokenValidationError) -> JWSCompact {
        try JWSCompact.parse(token, maximumBytes: policy.maximumTokenBytes, reader: reader, known: knownHeaders)
    }

    /// Verifies an already parsed token (its size was checked by `parse`).
    public func verify(_ jws: JWSCompact) throws(TokenValidationError) -> VerifiedAccessToken {
        try jws.withParts { (parts) throws(TokenValidationError) in try verify(parts) }
    }

    /// Every check after the structural ones, on borrowed parts.
    private func verify(_ parts: JWSCompact.BorrowedParts) throws(TokenValidationError) -> VerifiedAccessToken {
        let algorithm = try JWSCompact.algorithm(named: parts.algorithmName)
        let kid = try policy.checkHeader(parts.header)
        let claims: JSONObject
        do {
            claims = try reader.parseObject(parts.payload)
        } catch {
            throw TokenValidationError(.malformed, "the claims are not a strict JSON object: \(error.message)")
        }
        guard let key = keys.verificationKey(forKID: kid) else {
            throw TokenValidationError(.unknownKey, "no key has the kid \"\(JSONValue.clip(kid))\"")
        }
        try JWSCompact.verifySignature(of: parts, algorithm: algorithm, with: key)
        if let problem = policy.problems(in: claims, at: clock.now(), stopAtFirst: true).first {
            throw problem
        }
        if !parts.headerWasKnown {
            knownHeaders.remember(parts.headerText, header: parts.header, algorithmName: parts.algorithmName, readDepth: parts.headerReadDepth)
        }
        return VerifiedAccessToken(header: parts.header, claims: claims, keyID: key.kid, algorithm: algorithm)
    }
}
