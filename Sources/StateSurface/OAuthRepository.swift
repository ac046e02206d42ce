/// An authorization code of the gateway's authorization server (`oauth_codes`), kept by its hash.
///
/// One use, short-lived, bound to its client, `redirect_uri`, PKCE challenge and resource. When it
/// is exchanged, the family of tokens it gave and the access token's id are written on it, so that a
/// second use can revoke what the first issued (OAuth 2.1 §4.1.3).
public struct OAuthCodeRecord: Sendable, Equatable {
    /// SHA-256 of the code, base64url.
    public var codeHash: String
    public var clientID: String
    public var redirectURI: String
    /// The S256 PKCE challenge the verifier must hash to.
    public var codeChallenge: String
    /// The MCP resource (canonical URL) the tokens are for.
    public var resource: String
    /// The scopes granted, space-separated.
    public var scope: String
    public var userID: String
    public var tenantID: String
    /// The person's gateway session: the tokens end with it.
    public var sessionID: String
    /// Claims about the person the access tokens carry (`preferred_username`, `email`, ...), as JSON text.
    public var claims: String
    public var createdAt: Double
    public var expiresAt: Double
    /// When it was exchanged; with the family and access token id it gave.
    public var usedAt: Double?
    public var familyID: String?
    public var accessTokenID: String?

    public init(
        codeHash: String, clientID: String, redirectURI: String, codeChallenge: String, resource: String, scope: String, userID: String, tenantID: String,
        sessionID: String, claims: String, createdAt: Double, expiresAt: Double, usedAt: Double? = nil, familyID: String? = nil, accessTokenID: String? = nil
    ) {
        self.codeHash = codeHash
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.codeChallenge = codeChallenge
        self.resource = resource
        self.scope = scope
        self.userID = userID
        self.tenantID = tenantID
        self.sessionID = sessionID
        self.claims = claims
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.usedAt = usedAt
        self.familyID = familyID
        self.accessTokenID = accessTokenID
    }
}

/// What a person consented to: this client may act for them at this resource with these scopes
/// (`oauth_grants`). A later authorization asking no more skips the consent page.
public struct OAuthGrantRecord: Sendable, Equatable {
    public var userID: String
    public var tenantID: String
    public var clientID: String
    /// The client's name when consent was given, for listings.
    public var clientName: String
    public var resource: String
    /// Space-separated.
    public var scope: String
    public var createdAt: Double
    public var updatedAt: Double
    /// When a token was last issued under it (an exchange or a refresh); `nil`: never.
    public var lastUsedAt: Double?
    /// Made by an identity assertion grant (the company's provider decided), not by the person's
    /// consent: it never lets an authorization skip the consent page. A consent given later makes it the person's.
    public var byAssertion: Bool

    public init(
        userID: String, tenantID: String, clientID: String, clientName: String, resource: String, scope: String, createdAt: Double, updatedAt: Double,
        lastUsedAt: Double? = nil, byAssertion: Bool = false
    ) {
        self.byAssertion = byAssertion
        self.lastUsedAt = lastUsedAt
        self.userID = userID
        self.tenantID = tenantID
        self.clientID = clientID
        self.clientName = clientName
        self.resource = resource
        self.scope = scope
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// A refresh token family the authorization server started (`oauth_families`): which client,
/// resource and scopes its tokens carry. Its refresh tokens are rows of `refresh_tokens` like any.
public struct OAuthFamilyRecord: Sendable, Equatable {
    /// How old a family must be before an ended one is forgotten (`deleteExpiredOAuthCodes`): an
    /// exchange makes the family before its first refresh token.
    public static let endedGrace: Double = 3_600
    public var familyID: String
    public var clientID: String
    public var resource: String
    public var scope: String
    public var userID: String
    public var tenantID: String
    public var sessionID: String
    /// Claims about the person the access tokens carry, as JSON text.
    public var claims: String
    public var createdAt: Double

    public init(familyID: String, clientID: String, resource: String, scope: String, userID: String, tenantID: String, sessionID: String, claims: String, createdAt: Double) {
        self.familyID = familyID
        self.clientID = clientID
        self.resource = resource
        self.scope = scope
        self.userID = userID
        self.tenantID = tenantID
        self.sessionID = sessionID
        self.claims = claims
        self.createdAt = createdAt
    }
}

/// A client that registered itself (RFC 7591, `oauth_clients`): public, no secret.
public struct OAuthClientRecord: Sendable, Equatable {
    public var clientID: String
    public var name: String
    /// As a JSON array of strings.
    public var redirectURIs: String
    public var createdAt: Double
    /// Unused registrations go; each authorization pushes this back.
    public var expiresAt: Double

    public init(clientID: String, name: String, redirectURIs: String, createdAt: Double, expiresAt: Double) {
        self.clientID = clientID
        self.name = name
        self.redirectURIs = redirectURIs
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// What an exchange of a code found.
public enum OAuthCodeRedemption: Sendable, Equatable {
    /// The code was live and is now spent, with the family and token id written on it.
    case redeemed(OAuthCodeRecord)
    /// The code had been exchanged before: what that exchange issued must be revoked (the code is
    /// marked reused, for an exchange still issuing to see).
    case reused(OAuthCodeRecord)
    /// No such code, or it expired.
    case unknown
}

/// The authorization server's state: codes, consents and token families, on any instance.
public protocol OAuthRepository: Sendable {
    func insertOAuthCode(_ record: OAuthCodeRecord) async throws
    /// Spends the code with `codeHash` if it is live at `now`, writing `familyID` and
    /// `accessTokenID` on it, in one step: of two exchanges of one code, one redeems it.
    func redeemOAuthCode(codeHash: String, familyID: String, accessTokenID: String, now: Double) async throws -> OAuthCodeRedemption
    /// Whether a code was presented again after its redemption (`redeemOAuthCode` marks it so).
    func oauthCodeReused(codeHash: String) async throws -> Bool
    /// Records (or widens) a consent.
    func upsertOAuthGrant(_ record: OAuthGrantRecord) async throws
    func oauthGrant(userID: String, tenantID: String, clientID: String, resource: String) async throws -> OAuthGrantRecord?
    /// Notes that a token was issued under a consent (`lastUsedAt`).
    func touchOAuthGrant(userID: String, tenantID: String, clientID: String, resource: String, now: Double) async throws
    /// Every consent, or one person's, newest first.
    func oauthGrants(userID: String?) async throws -> [OAuthGrantRecord]
    /// Removes the consent and revokes the refresh tokens of its families; returns how many consents were removed.
    @discardableResult
    func deleteOAuthGrant(userID: String, tenantID: String, clientID: String, resource: String, now: Double) async throws -> Int
    func insertOAuthFamily(_ record: OAuthFamilyRecord) async throws
    /// Records an access token issued for a family, so that the family's end (`revokeRefreshFamily`,
    /// `deleteOAuthGrant`, `deleteOAuthClient`) or its session's (`revokeSession`, `revokeSessions`)
    /// revokes it too: a `revoked_tokens` row and a `tokenRevoked` access change, every instance refusing it at once.
    /// Recorded only while the session is live and the family has a live refresh token, in one step
    /// with those checks; `false` (nothing recorded, the token must not be issued) otherwise.
    func recordOAuthAccessToken(tokenID: String, familyID: String, sessionID: String, expiresAt: Double, now: Double) async throws -> Bool
    /// Records an access token issued for a family that has no session and no refresh token (an
    /// identity assertion grant's: the company's provider decided, no gateway session was used),
    /// so that the family's end (`deleteOAuthGrant`, `deleteOAuthClient`) revokes it too.
    /// Recorded only while the family's grant (`oauth_grants`, same person, client and resource)
    /// stands and its person is a provider user who is not disabled, in one step with those checks (on
    /// PostgreSQL their rows are held until it commits): `false` (nothing recorded, the token must
    /// not be issued) otherwise, or when the family does not exist.
    func recordAssertionAccessToken(tokenID: String, familyID: String, expiresAt: Double) async throws -> Bool
    func oauthFamily(id: String) async throws -> OAuthFamilyRecord?
    /// Revokes every refresh token of a family, and its live access tokens; returns how many refresh tokens were live.
    @discardableResult
    func revokeRefreshFamily(_ familyID: String, now: Double) async throws -> Int
    /// Forgets codes and registered clients that expired before `cutoff`, and refresh families
    /// that ended (no live refresh token, no access token recorded) and are over an hour old; returns how many.
    @discardableResult
    func deleteExpiredOAuthCodes(before cutoff: Double) async throws -> Int
    /// Stores a registration unless `unusedLimit` registrations stand unused already: live at
    /// `now` and never used (their expiry never pushed back, so it lies no further from their
    /// registration than `record`'s does). Counted and stored in one step across instances.
    ///
    /// - Returns: `false` (nothing stored) when the limit is reached.
    func insertOAuthClient(_ record: OAuthClientRecord, unusedLimit: Int, now: Double) async throws -> Bool
    /// The registered client, when it has not expired at `now`.
    func oauthClient(id: String, now: Double) async throws -> OAuthClientRecord?
    /// Pushes a registration's expiry back to `expiresAt` (never forward).
    func extendOAuthClient(id: String, expiresAt: Double) async throws
    /// Every live registration, newest first.
    func oauthClients(now: Double) async throws -> [OAuthClientRecord]
    /// Removes a registration, its consents, and revokes its refresh tokens; returns how many registrations went.
    @discardableResult
    func deleteOAuthClient(id: String, now: Double) async throws -> Int
}
