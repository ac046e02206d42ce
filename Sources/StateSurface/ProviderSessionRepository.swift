/// A sign-in the provider confirmed, between the callback and `POST /api/auth/oidc/complete`
/// (`login_codes`, at most 60 s).
///
/// Kept by the hash of its code (the code itself travels only in the browser's fragment). The
/// provider's tokens are sealed (AES-256-GCM) before they are stored here.
public struct LoginCodeRecord: Sendable, Equatable {
    /// SHA-256 of the login code, base64url.
    public var codeHash: String
    /// The anonymous session the flow was started from: the code completes only with it.
    public var sessionID: String
    /// The base64url SHA-256 of the verifier the browser kept: the code completes only with that verifier.
    public var loginChallenge: String
    public var provider: ProviderIdentityRecord
    public var createdAt: Double
    public var expiresAt: Double

    public init(codeHash: String, sessionID: String, loginChallenge: String, provider: ProviderIdentityRecord, createdAt: Double, expiresAt: Double) {
        self.codeHash = codeHash
        self.sessionID = sessionID
        self.loginChallenge = loginChallenge
        self.provider = provider
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// Who a provider said signed in, and the provider's tokens for them (sealed).
public struct ProviderIdentityRecord: Sendable, Equatable {
    /// The provider's name (`trust.issuers[N].login.name`).
    public var provider: String
    /// The provider's `iss` and the user's `sub` there.
    public var issuer: String
    public var subject: String
    public var tenantID: String
    /// The provider's session (`sid` of the ID token), which a back-channel logout may name.
    public var providerSessionID: String?
    /// The ID token, sealed: the `id_token_hint` of the provider's end-session URL.
    public var sealedIDToken: String
    /// The provider's refresh token, sealed, when it gave one.
    public var sealedRefreshToken: String?
    /// The provider's access token from the sign-in or its latest refresh, sealed: the subject token
    /// a token exchange (`upstream_credential: {exchange: ...}`) presents for the person.
    public var sealedAccessToken: String?
    /// When that access token expires (`expires_in` from when it was given; five minutes when the provider did not say).
    public var accessTokenExpiresAt: Double?

    public init(
        provider: String, issuer: String, subject: String, tenantID: String, providerSessionID: String?, sealedIDToken: String, sealedRefreshToken: String?,
        sealedAccessToken: String? = nil, accessTokenExpiresAt: Double? = nil
    ) {
        self.sealedAccessToken = sealedAccessToken
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.provider = provider
        self.issuer = issuer
        self.subject = subject
        self.tenantID = tenantID
        self.providerSessionID = providerSessionID
        self.sealedIDToken = sealedIDToken
        self.sealedRefreshToken = sealedRefreshToken
    }
}

/// A gateway session made by a provider sign-in (`provider_sessions`).
public struct ProviderSessionRecord: Sendable, Equatable {
    /// The gateway's session.
    public var sessionID: String
    /// The gateway's user (`ext_...`).
    public var userID: String
    public var identity: ProviderIdentityRecord
    public var createdAt: Double
    /// Forgotten after this (the gateway's refresh tokens of the session have expired by then).
    public var expiresAt: Double

    public init(sessionID: String, userID: String, identity: ProviderIdentityRecord, createdAt: Double, expiresAt: Double) {
        self.sessionID = sessionID
        self.userID = userID
        self.identity = identity
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// What a provider sign-in leaves behind: login codes, the sessions it made, the access
/// tokens issued to them, and the logout tokens already used.
public protocol ProviderSessionRepository: Sendable {
    func insertLoginCode(_ record: LoginCodeRecord) async throws
    /// Removes the code with `codeHash` and returns it when it had not expired at `now`: a
    /// code is taken once, whoever presents it (a wrong session or verifier spends it too).
    func takeLoginCode(codeHash: String, now: Double) async throws -> LoginCodeRecord?

    /// Records (or replaces) the provider behind a session.
    func saveProviderSession(_ record: ProviderSessionRecord) async throws
    /// Replaces the record of a session whose provider record still exists (after a refresh the
    /// provider granted, so a failing streak it was on ends); `false` (and nothing written) once
    /// it was deleted: a refresh racing a logout never brings the session back.
    func updateProviderSession(_ record: ProviderSessionRecord) async throws -> Bool
    func providerSession(sessionID: String) async throws -> ProviderSessionRecord?
    /// The sessions of `issuer`'s provider session `providerSessionID`, or of its user `subject`,
    /// or of both when both are given (a back-channel logout's `sid` and `sub`).
    func providerSessions(issuer: String, providerSessionID: String?, subject: String?) async throws -> [ProviderSessionRecord]
    /// The provider sessions of the gateway user `userID` that have not expired at `now`, the newest first.
    func providerSessions(userID: String, now: Double) async throws -> [ProviderSessionRecord]
    /// Forgets the provider behind a session, and the access tokens issued to it; returns the ids
    /// and expiries of those access tokens, taken in the same step as the record (so a token
    /// recorded after this call finds no session, and one recorded before is among these).
    @discardableResult
    func deleteProviderSession(sessionID: String) async throws -> [(tokenID: String, expiresAt: Double)]

    /// Sets when a browser sign-in's provider session is next re-checked with its refresh token
    /// (`nil`: never, as for a session the API refreshes itself).
    func scheduleProviderRecheck(sessionID: String, at: Double?) async throws
    /// Provider sessions whose re-check is due at `now` and that were used since the previous one
    /// (their browser session last seen, or an agent's use recorded, at or after `due - interval`):
    /// a session nobody uses is never refreshed at the provider by the gateway alone. At most
    /// `limit`, the longest overdue first.
    func providerRechecksDue(now: Double, interval: Double, limit: Int) async throws -> [(record: ProviderSessionRecord, due: Double)]
    /// Records an agent's use of the session (a refresh, an authorization, a token exchange) at `at`,
    /// and returns the session with the time its re-check is due when that is at or before `dueBy`
    /// (`at` when nil): the caller re-checks it before answering.
    func useProviderSession(sessionID: String, at: Double, dueBy: Double?) async throws -> (record: ProviderSessionRecord, due: Double)?
    /// Notes that the provider could not be asked for the session at `now`; returns since when it
    /// has not been: the first such note since the last success, unless the previous note is older
    /// than `restartAfter` seconds (nobody used the session meanwhile: a new streak starts now).
    /// `nil` once the record is gone.
    func noteProviderRecheckFailing(sessionID: String, now: Double, restartAfter: Double) async throws -> Double?
    /// Moves a re-check that is still due at `due` to `next`; `true` for the one caller (on any
    /// instance) that moved it, which then asks the provider: a rotating refresh token is never
    /// presented twice.
    func claimProviderRecheck(sessionID: String, due: Double, next: Double) async throws -> Bool

    /// Remembers an access token issued to a provider session, so that a back-channel logout can revoke it.
    func recordSessionAccessToken(sessionID: String, tokenID: String, expiresAt: Double) async throws
    /// The ids and expiries of the session's access tokens still live at `now`.
    func sessionAccessTokens(sessionID: String, now: Double) async throws -> [(tokenID: String, expiresAt: Double)]

    /// Records a logout token's id; `false` when it was already recorded and has not expired
    /// (a replay), whichever instance recorded it.
    func rememberLogoutToken(id: String, expiresAt: Double, now: Double) async throws -> Bool

    /// Forgets expired login codes, provider sessions, access-token ids and logout-token ids.
    @discardableResult
    func deleteExpiredProviderSignIns(before cutoff: Double) async throws -> Int
}

extension ProviderSessionRepository {
    /// Records the id of a single-use assertion other than a logout token (an identity assertion
    /// grant's); `false` when it was recorded already and has not expired (a replay), on any instance.
    ///
    /// Kept beside the logout tokens' ids (`logout_token_ids`): the caller makes `id` a hash over
    /// a prefix of its own, the issuer and the `jti`, so ids of different kinds never meet.
    public func rememberPresentedAssertion(id: String, expiresAt: Double, now: Double) async throws -> Bool {
        try await rememberLogoutToken(id: id, expiresAt: expiresAt, now: now)
    }
}

extension ProviderSessionRepository {
    /// `useProviderSession(sessionID:at:dueBy:)` with the re-check due by `at`.
    public func useProviderSession(sessionID: String, at: Double) async throws -> (record: ProviderSessionRecord, due: Double)? {
        try await useProviderSession(sessionID: sessionID, at: at, dueBy: nil)
    }
}
