/// A browser's sign-in to the gateway (`browser_sessions`): what its session cookie stands for.
///
/// Kept by the SHA-256 of the cookie's value (an opaque 256-bit secret): the value itself is
/// never stored, so a copy of the store signs nobody in. The cookie is never the session id
/// and never a token; the gateway session it stands for (`sessionID`) is the Runtime's.
public struct BrowserSessionRecord: Sendable, Equatable {
    /// SHA-256 of the cookie's value, base64url.
    public var cookieHash: String
    /// The gateway session the browser is signed in to (owned by `userID`).
    public var sessionID: String
    public var userID: String
    public var tenantID: String
    /// The provider's `iss` and the user's `sub` there; `nil` for the gateway's own accounts.
    public var issuer: String?
    public var subject: String?
    /// The provider's name, for its end-session URL at sign-out; `nil` for the gateway's own accounts.
    public var provider: String?
    /// The identity's claims as a JSON object (a provider's ID token's, less its one-time ones):
    /// what route policies and identity fields read.
    public var claims: String
    public var createdAt: Double
    /// The last request seen with the cookie, as last written (written at most once a minute).
    public var lastSeenAt: Double
    /// The absolute end (`gateway.browser_sessions.max_hours` after `createdAt`).
    public var expiresAt: Double

    public init(
        cookieHash: String, sessionID: String, userID: String, tenantID: String, issuer: String?, subject: String?, provider: String?, claims: String,
        createdAt: Double, lastSeenAt: Double, expiresAt: Double
    ) {
        self.cookieHash = cookieHash
        self.sessionID = sessionID
        self.userID = userID
        self.tenantID = tenantID
        self.issuer = issuer
        self.subject = subject
        self.provider = provider
        self.claims = claims
        self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt
        self.expiresAt = expiresAt
    }
}

/// The browser sessions' records.
public protocol BrowserSessionRepository: Sendable {
    /// Stores a new browser session.
    func insertBrowserSession(_ record: BrowserSessionRecord) async throws
    /// The record of a cookie (by its hash), whether or not it has expired.
    func browserSession(cookieHash: String) async throws -> BrowserSessionRecord?
    /// Moves a record's `lastSeenAt` forward (never back).
    func touchBrowserSession(cookieHash: String, lastSeenAt: Double) async throws
    /// Deletes one record (sign-out); `true` when there was one.
    @discardableResult
    func deleteBrowserSession(cookieHash: String) async throws -> Bool
    /// Deletes the records past their absolute end, or idle since before `idleCutoff`.
    func deleteExpiredBrowserSessions(now: Double, idleCutoff: Double) async throws -> Int
}
