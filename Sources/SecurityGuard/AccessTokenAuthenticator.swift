import JOSE
import StateSurface
import TrustedIssuers

/// Why a presented access token was not accepted.
public enum AuthenticationFailure: Error, Sendable, Equatable {
    /// No token was presented.
    case missing
    /// A `ses_` session id was presented as the token.
    case sessionIDGiven
    /// A refresh token was presented as the access token.
    case refreshTokenGiven
    /// The verifier refused it.
    case invalid(TokenValidationError)
    /// It was valid but has been revoked (logout, or its account was disabled). Carries the caller
    /// its verified signature proves, for the access log's line of the refusal.
    case revoked(AuthenticatedCaller)
    /// Its issuer is trusted but its keys cannot be had now (never fetched, too old, or not fetched
    /// in time for a new kid): 503, not 401.
    case issuerUnavailable(String)
    /// Valid, but it names a tenant its issuer may not produce: 403.
    case tenantNotAllowed(String)

    /// Who a refused token was issued to, when its signature verified (a revoked token): the access
    /// log names them, so a leaver's agent that keeps trying is seen as theirs, not as anonymous.
    public var verifiedCaller: AuthenticatedCaller? {
        if case .revoked(let caller) = self { caller } else { nil }
    }

    /// One sentence a person can act on; never repeats the token.
    public var message: String {
        switch self {
        case .missing: "this needs an access token: send Authorization: Bearer <access_token>"
        case .sessionIDGiven: "a session_id was sent where an access token is expected; send the access_token from login"
        case .refreshTokenGiven: "a refresh token was sent where an access token is expected; exchange it at /api/auth/refresh"
        case .invalid(let error): "the access token was refused (\(error.reason.rawValue)): \(error.message)"
        case .revoked: "the access token was revoked (logged out, or the account was disabled); log in again"
        case .issuerUnavailable(let why): "the token's issuer cannot be checked right now (\(why)); try again shortly"
        case .tenantNotAllowed(let why): "the token's tenant is not one its issuer may name: \(why)"
        }
    }
}

/// The caller an access token proved.
///
/// A class: a request hands its caller from the token check to the policy, the assertion, the
/// log line and (on an MCP route) its registration, and a struct of ten references was copied,
/// a retain and a release each, at every step. Immutable, so shared safely.
public final class AuthenticatedCaller: Sendable, Equatable {
    public let userID: String
    public let tenantID: String
    public let clientID: String?
    /// `jti`, to revoke the token at logout.
    public let tokenID: String
    /// `iat`: compared with the account's not-before.
    public let issuedAt: Double
    public let expiresAt: Double
    /// For a trusted issuer's token: who it speaks for there (`nil` for the gateway's own tokens).
    public let external: ExternalIdentity?
    /// The verified token's claims, for route policies (kept with the caller in the verified-token cache).
    public let claims: JSONObject
    /// For a gateway token issued for an MCP server: that resource (its `aud`). Such a token is taken
    /// at that resource only, and the gateway's API token (`nil` here) never there.
    public let resource: String?

    public init(
        userID: String, tenantID: String, clientID: String?, tokenID: String, issuedAt: Double, expiresAt: Double, external: ExternalIdentity? = nil,
        claims: JSONObject = [:], resource: String? = nil
    ) {
        self.resource = resource
        self.userID = userID
        self.tenantID = tenantID
        self.clientID = clientID
        self.tokenID = tokenID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.external = external
        self.claims = claims
    }

    /// Field by field, as the struct it was compared.
    public static func == (lhs: AuthenticatedCaller, rhs: AuthenticatedCaller) -> Bool {
        lhs === rhs
            || (lhs.userID == rhs.userID && lhs.tenantID == rhs.tenantID && lhs.clientID == rhs.clientID && lhs.tokenID == rhs.tokenID
                && lhs.issuedAt == rhs.issuedAt && lhs.expiresAt == rhs.expiresAt && lhs.external == rhs.external && lhs.claims == rhs.claims
                && lhs.resource == rhs.resource)
    }

    /// The caller a trusted issuer's verified token proves.
    ///
    /// The user is the pair (issuer, subject), so the same `sub` from another issuer, or a
    /// local account's id, is another user: `ext_` and 22 characters of SHA-256 over both.
    /// The token id (for revocation at logout) is derived from the issuer and the `jti`,
    /// or from the whole token when it has none, so two issuers' `jti`s never collide.
    public convenience init(_ identity: ExternalIdentity, token: VerifiedAccessToken, raw: String) throws {
        let tokenID = token.tokenID.map { identity.issuer + "\n" + $0 } ?? identity.issuer + "\n" + raw
        self.init(
            userID: try Self.externalID(identity.issuer + "\n" + identity.subject), tenantID: identity.tenantID,
            clientID: token.clientID ?? token.claims["azp"]?.stringValue, tokenID: try Self.externalID(tokenID),
            issuedAt: token.claims["iat"]?.numberValue ?? token.claims["nbf"]?.numberValue ?? 0, expiresAt: token.expiresAt, external: identity,
            claims: token.claims)
    }

    /// The gateway's user id for `subject` at `issuer`: `ext_` and 22 characters of SHA-256 over both.
    public static func externalUserID(issuer: String, subject: String) throws -> String {
        try externalID(issuer + "\n" + subject)
    }

    static func externalID(_ text: String) throws -> String {
        "ext_" + Base64URL.encode(Array(try Digest.sha256(Array(text.utf8)).prefix(16)))
    }
}

/// Checks a presented access token: the JOSE verifier (or the cache of
/// tokens it recently passed), then, on every use, the revoked token ids and
/// the account's not-before.
///
/// A class: every proxied request calls it through the data plane, and as a struct (the
/// verifier's policy and keys inside) each call copied it, a retain and a release per reference.
public final class AccessTokenAuthenticator: Sendable {
    public let verifier: AccessTokenVerifier
    public let revocations: RevocationList
    public let cache: VerifiedTokenCache?
    /// Identity providers whose tokens count too; a token's `iss` picks its issuer's keys.
    public let trusted: TrustedIssuers?

    public init(verifier: AccessTokenVerifier, revocations: RevocationList, cache: VerifiedTokenCache? = nil, trusted: TrustedIssuers? = nil) {
        self.verifier = verifier
        self.revocations = revocations
        self.cache = cache
        self.trusted = trusted
    }

    /// A token checked as far as the keys at hand allow.
    enum Verification {
        case caller(AuthenticatedCaller)
        /// A trusted issuer's token whose kid its held keys lack; a fetch may bring it.
        case awaitingKeys(issuer: String)
    }

    /// The Bearer token of `value` on a route that also takes the session cookie (`auth: browser`):
    /// an `Authorization` of another scheme is no credential of the gateway's there, so `nil`, and
    /// the cookie decides.
    ///
    /// A WebDAV app's own pages send `Basic` (Radicale's web interface does, for an app that
    /// trusts the proxy's user field and ignores it); refused, the app could not be used behind
    /// the gateway at all. The field is never forwarded either way. A `Bearer` one is read (and
    /// a malformed one refused) as `bearerToken(fromAuthorization:)` reads it.
    public static func bearerTokenBesideCookie(fromAuthorization value: String?) throws(AuthenticationFailure) -> String? {
        guard let value else { return nil }
        let scheme = value.drop(while: { $0 == " " }).prefix(while: { $0 != " " })
        guard scheme.lowercased() == "bearer" else { return nil }
        return try bearerToken(fromAuthorization: value)
    }

    /// The token from an `Authorization` header value: `Bearer <token>` (scheme case-insensitive).
    ///
    /// - Returns: `nil` when there is no header; throws `.invalid` for another scheme.
    public static func bearerToken(fromAuthorization value: String?) throws(AuthenticationFailure) -> String? {
        guard let value, !value.isEmpty else { return nil }
        // Over the bytes, on every request: leading spaces, the scheme up to the first space (`Bearer`
        // in any case), then the rest without its trailing spaces and tabs; one copy, of the token.
        let bytes = value.utf8
        let space = UInt8(ascii: " ")
        guard let start = bytes.firstIndex(where: { $0 != space }), let gap = bytes[start...].firstIndex(of: space),
            bytes.distance(from: start, to: gap) == 6,
            zip(bytes[start..<gap], "bearer".utf8).allSatisfy({ (($0 >= 0x41 && $0 <= 0x5A) ? $0 + 32 : $0) == $1 })
        else {
            throw .invalid(TokenValidationError(.malformed, "the Authorization header must be \"Bearer <access_token>\""))
        }
        let rest = bytes[bytes.index(after: gap)...]
        // "Bearer " alone: no credential after the scheme.
        guard !rest.isEmpty else {
            throw .invalid(TokenValidationError(.malformed, "the Authorization header must be \"Bearer <access_token>\""))
        }
        var end = rest.endIndex
        while end > rest.startIndex, case let last = bytes[bytes.index(before: end)], last == space || last == UInt8(ascii: "\t") {
            end = bytes.index(before: end)
        }
        return String(Substring(value.utf8[rest.startIndex..<end]))
    }

    /// Verifies `token` and checks it is not revoked.
    ///
    /// - Throws: `AuthenticationFailure`; storage failures are rethrown as they are
    ///   (the caller answers 503 for them, never 401).
    /// - Parameter resource: the MCP resource asked (`nil`: the gateway's API, a route, a socket);
    ///   a token bound to another audience is refused naming the mix-up.
    public func authenticate(_ token: String?, resource: String? = nil) async throws -> AuthenticatedCaller {
        var caller: AuthenticatedCaller
        switch try verified(token, resource: resource) {
        case .caller(let verified):
            caller = verified
        case .awaitingKeys(let issuer):
            // Joins (or starts, once per cooldown) the issuer's fetch, then checks once more; a fetch
            // that has not ended within its few seconds is the issuer's outage, not the token's fault.
            guard await trusted?.refreshForUnknownKey(issuer: issuer) ?? true else {
                throw AuthenticationFailure.issuerUnavailable("the keys of \(issuer) could not be fetched in time")
            }
            switch try verified(token, resource: resource, fetchedAgain: true) {
            case .caller(let verified): caller = verified
            case .awaitingKeys: throw AuthenticationFailure.invalid(TokenValidationError(.unknownKey, "the issuer publishes no key with the token's kid"))
            }
        }
        if try await revocations.isRevoked(caller) { throw AuthenticationFailure.revoked(caller) }
        return caller
    }

    /// The same check without suspending, for callers on an event loop: the
    /// verifier's work is CPU only, and revocation is answered from the mirror.
    ///
    /// - Returns: the caller, or `nil` when the mirror is stale and only the
    ///   store can say whether the token was revoked (use `authenticate`).
    public func authenticateInMemory(_ token: String?, resource: String? = nil) throws(AuthenticationFailure) -> AuthenticatedCaller? {
        guard case .caller(let caller) = try verified(token, resource: resource) else { return nil }
        guard let revoked = revocations.isRevokedInMemory(caller) else { return nil }
        if revoked { throw .revoked(caller) }
        return caller
    }

    /// The caller a token proves (cache, a trusted issuer's keys, or the gateway's verifier), before revocation.
    ///
    /// - Parameter fetchedAgain: the issuer's keys were just fetched for this token; an unknown kid is final.
    /// - Parameter resource: the MCP resource asked, whose tokens carry it as `aud`; `nil` for the gateway's own audience.
    func verified(_ token: String?, resource: String? = nil, fetchedAgain: Bool = false) throws(AuthenticationFailure) -> Verification {
        guard let token, !token.isEmpty else { throw .missing }
        if token.hasPrefix("ses_") { throw .sessionIDGiven }
        if token.hasPrefix(RefreshTokenService.prefix) { throw .refreshTokenGiven }
        let now = verifier.clock.now()
        // The generation the lookup saw: a reload that empties the cache meanwhile keeps this result out of it.
        let (cached, generation) = cache?.lookup(token, now: now) ?? (nil, 0)
        if let cached {
            // One cache for every audience: the binding is checked on every use, whichever filled it.
            try checkBinding(cached, resource: resource)
            return .caller(cached)
        }
        let verified: VerifiedAccessToken
        do {
            let verifier = resource.map(verifier.forAudience) ?? verifier
            // (Trusted issuers kept while empty: a reload may add issuers.)
            if let trusted, !trusted.isEmpty {
                let jws = try verifier.parse(token)
                // `iss` as the token states it, before any check: it picks whose keys check the token, nothing more.
                if case let claims = try Self.claims(jws, reader: verifier.reader), let issuer = claims["iss"]?.stringValue,
                    trusted.handles(issuer: issuer)
                {
                    switch trusted.verify(jws, claims: claims, issuer: issuer) {
                    case .verified(let identity, let external):
                        guard let caller = try? AuthenticatedCaller(identity, token: external, raw: token) else {
                            throw TokenValidationError(.malformed, "the token could not be read")
                        }
                        cache?.insert(caller, for: token, now: now, generation: generation)
                        try checkBinding(caller, resource: resource)
                        return .caller(caller)
                    case .refused(let error):
                        throw error
                    case .unavailable(let why):
                        throw AuthenticationFailure.issuerUnavailable(why)
                    case .tenantNotAllowed(let why):
                        throw AuthenticationFailure.tenantNotAllowed(why)
                    case .keysMayHaveChanged:
                        if fetchedAgain { throw TokenValidationError(.unknownKey, "\(issuer) publishes no key with the token's kid") }
                        return .awaitingKeys(issuer: issuer)
                    }
                }
                verified = try verifier.verify(jws)
            } else {
                // No trusted issuer: the token is the gateway's or nothing, verified from its own bytes (no array made).
                verified = try verifier.verify(token)
            }
        } catch let failure as AuthenticationFailure {
            throw failure
        } catch let error as TokenValidationError {
            if error.reason == .wrongAudience, let resource { throw .invalid(Self.audienceMixUp(token: token, resource: resource, gatewayAudience: verifier.policy.audience)) }
            throw .invalid(error)
        } catch {
            throw .invalid(TokenValidationError(.malformed, "the token could not be read"))
        }
        guard let tenantID = verified.tenantID, let tokenID = verified.tokenID, let issuedAt = verified.claims["iat"]?.numberValue else {
            throw .invalid(TokenValidationError(.missingClaim, "the access token lacks tenant_id, jti or iat"))
        }
        // A token the gateway issued after a provider sign-in names the provider's user too; it counts
        // only when `sub` is the gateway's id for that pair (as a provider token's caller would be).
        var external: ExternalIdentity? = nil
        if let idpIssuer = verified.claims["idp_iss"]?.stringValue, let idpSubject = verified.claims["idp_sub"]?.stringValue {
            guard (try? AuthenticatedCaller.externalUserID(issuer: idpIssuer, subject: idpSubject)) == verified.subject else {
                throw .invalid(TokenValidationError(.invalidClaim, "the access token's idp_iss and idp_sub do not name its sub"))
            }
            external = ExternalIdentity(issuer: idpIssuer, subject: idpSubject, tenantID: tenantID)
        }
        let caller = AuthenticatedCaller(
            userID: verified.subject, tenantID: tenantID, clientID: verified.clientID, tokenID: tokenID, issuedAt: issuedAt,
            expiresAt: verified.expiresAt, external: external, claims: verified.claims, resource: resource)
        cache?.insert(caller, for: token, now: now, generation: generation)
        return .caller(caller)
    }

    /// Refuses a caller whose token was made for another audience than the one asked: an MCP
    /// resource's token anywhere but there, the gateway's API token at an MCP resource, a trusted
    /// issuer's token at an MCP resource its `aud` does not name.
    ///
    /// A gateway token is one whose `iss` is the gateway's (a provider's user's included, whose
    /// token names `idp_iss` too); only such a token can be bound to a resource (`resource`).
    func checkBinding(_ caller: AuthenticatedCaller, resource: String?) throws(AuthenticationFailure) {
        if let bound = caller.resource {
            guard bound != resource else { return }
            guard let resource else {
                throw .invalid(TokenValidationError(.wrongAudience, "this token was issued for the MCP server \(bound) and is taken there only; use the gateway's API token here"))
            }
            throw .invalid(TokenValidationError(.wrongAudience, "this token was issued for the MCP server \(bound), not for \(resource); get a token for this server"))
        }
        guard let resource else { return }
        if caller.claims["iss"]?.stringValue != verifier.policy.issuer {
            // A trusted issuer's token: its issuer's audiences were checked; this resource must be one of its own.
            guard !Self.audiences(caller.claims).contains(resource) else { return }
            throw .invalid(
                TokenValidationError(
                    .wrongAudience, "this token's issuer did not make it for the MCP server \(resource) (its aud does not name it); get a token for this server"))
        }
        throw .invalid(
            TokenValidationError(
                .wrongAudience,
                "this is the gateway's API token, not one for the MCP server \(resource); a client gets one from the gateway's authorization server with resource=\(resource)"))
    }

    /// The wrong-audience refusal at an MCP resource, naming what the token was for when it is the
    /// gateway's API token (its unverified `aud` only chooses the sentence).
    static func audienceMixUp(token: String, resource: String, gatewayAudience: String?) -> TokenValidationError {
        let claims = try? JWSCompact.parse(token, maximumBytes: 16_384, reader: StrictJSONReader()).payload
        let audience = claims.flatMap { try? StrictJSONReader().parseObject($0) }.map(Self.audiences) ?? []
        if let gatewayAudience, audience.contains(gatewayAudience) {
            return TokenValidationError(
                .wrongAudience,
                "this is the gateway's API token, not one for the MCP server \(resource); a client gets one from the gateway's authorization server with resource=\(resource)")
        }
        return TokenValidationError(.wrongAudience, "this token was not issued for the MCP server \(resource) (its aud must be exactly that); get a token for this server")
    }

    /// A token's `aud`, one string or a list.
    static func audiences(_ claims: JSONObject) -> [String] {
        switch claims["aud"] {
        case .string(let one)?: [one]
        case .array(let list)?: list.compactMap(\.stringValue)
        default: []
        }
    }

    /// The claims of a parsed token, strictly read (nothing is trusted yet).
    static func claims(_ jws: JWSCompact, reader: StrictJSONReader) throws(TokenValidationError) -> JSONObject {
        do {
            return try reader.parseObject(jws.payload)
        } catch {
            throw TokenValidationError(.malformed, "the claims are not a strict JSON object: \(error.message)")
        }
    }
}
