import JOSE
import Resilience
import StateSurface
import Synchronization
import TrustedIssuers

/// A browser session as a request meets it: its record and its claims, read once.
public struct BrowserSession: Sendable {
    public let record: BrowserSessionRecord
    /// The record's claims, parsed.
    public let claims: JSONObject

    /// The caller the session speaks for, as a verified token's would (route policies and
    /// identity fields read it the same way).
    public var caller: AuthenticatedCaller {
        AuthenticatedCaller(
            userID: record.userID, tenantID: record.tenantID, clientID: nil, tokenID: "browser:" + record.cookieHash, issuedAt: record.createdAt,
            expiresAt: record.expiresAt,
            external: record.issuer.map { ExternalIdentity(issuer: $0, subject: record.subject ?? "", tenantID: record.tenantID) }, claims: claims)
    }
}

/// The browser sessions this instance has met, by their cookie's value: a request with a known
/// cookie is answered from memory, without a hash computed or a store round trip.
///
/// The record says who signed in and until when; whether the gateway session behind it still
/// lives is the session ownership view's to say (kept true within a second across instances by
/// the access-change feed), so a logout, a back-channel logout or a disabled account anywhere
/// ends the cookie everywhere. The idle limit is kept in memory and written to the store at most
/// once a minute per session and instance; a session idle here is read again from the store
/// before it is declared ended (another instance may have seen it since). The store knows a
/// cookie by its SHA-256 only; memory holds the value, as the process receiving it does anyway.
public final class BrowserSessionBook: Sendable {
    let store: any BrowserSessionRepository
    /// `gateway.browser_sessions.idle_minutes`, in seconds.
    public let idleSeconds: Double
    /// `gateway.browser_sessions.max_hours`, in seconds.
    public let maximumSeconds: Double
    /// `gateway.browser_sessions.recheck_minutes`, in seconds: how often a provider's sign-in in
    /// use is re-checked with the provider's refresh token.
    public let recheckSeconds: Double

    /// One session in memory; its times change under `entries`' lock only (a class: a lookup
    /// moves them without storing the entry again).
    private final class Entry: @unchecked Sendable {
        let session: BrowserSession
        /// The last request seen here, and the last time that was written to the store.
        var lastSeen: Double
        var lastWritten: Double

        init(session: BrowserSession, lastSeen: Double, lastWritten: Double) {
            self.session = session
            self.lastSeen = lastSeen
            self.lastWritten = lastWritten
        }
    }

    private let entries: Mutex<BoundedDictionary<String, Entry>>

    /// How often a session's last-seen time is written to the store (at most).
    static let writeInterval: Double = 60

    public init(store: any BrowserSessionRepository, idleSeconds: Double, maximumSeconds: Double, recheckSeconds: Double = 900, capacity: Int = 100_000) {
        self.store = store
        self.idleSeconds = idleSeconds
        self.maximumSeconds = maximumSeconds
        self.recheckSeconds = recheckSeconds
        entries = Mutex(BoundedDictionary(capacity: capacity))
    }

    /// How a cookie's value is kept in the store: SHA-256, base64url.
    public static func hash(_ cookieValue: String) throws -> String {
        try Digest.sha256Base64URL(cookieValue)
    }

    /// Whether `value` has the form of a session cookie's value: 43 base64url characters (256 bits).
    public static func isWellFormed(_ value: String) -> Bool {
        value.utf8.count == 43 && Base64URL.isCanonical(value.utf8)
    }

    /// What memory says of a cookie.
    public enum Lookup: Sendable {
        /// A live session.
        case live(BrowserSession)
        /// Not known here, or idle here: ask the store (`load`).
        case unknown
        /// Past its absolute end.
        case ended
    }

    /// Looks a cookie up in memory, marking it seen at `now`; at most once a `writeInterval` the
    /// last-seen time is written to the store too (in the background), whoever asked: every
    /// reader of a session (a proxied request, forward-auth, the gateway's own pages) keeps it
    /// from its idle limit on every instance.
    public func lookup(cookieValue: String, now: Double) -> Lookup {
        let (found, due) = entries.withLock { entries -> (Lookup, Bool) in
            guard let entry = entries[cookieValue] else { return (.unknown, false) }
            if entry.session.record.expiresAt <= now {
                entries.removeValue(forKey: cookieValue)
                return (.ended, false)
            }
            if now - entry.lastSeen > idleSeconds { return (.unknown, false) }
            entry.lastSeen = now
            let due = now - entry.lastWritten >= Self.writeInterval
            if due { entry.lastWritten = now }
            return (.live(entry.session), due)
        }
        if due, case .live(let session) = found {
            let store = self.store
            Task { try? await store.touchBrowserSession(cookieHash: session.record.cookieHash, lastSeenAt: now) }
        }
        return found
    }

    /// Reads a cookie's record from the store: the session when it is live at `now` (kept in
    /// memory from then on, its last-seen time written), `nil` when there is none or it has ended
    /// (an ended one is deleted). A value that is not a cookie's form is not looked for.
    public func load(cookieValue: String, now: Double) async throws -> BrowserSession? {
        guard Self.isWellFormed(cookieValue) else { return nil }
        let cookieHash = try Self.hash(cookieValue)
        guard let record = try await store.browserSession(cookieHash: cookieHash) else { return nil }
        guard record.expiresAt > now, now - record.lastSeenAt <= idleSeconds else {
            forget(cookieValue: cookieValue)
            try await store.deleteBrowserSession(cookieHash: cookieHash)
            return nil
        }
        let session = BrowserSession(record: record, claims: (try? StrictJSONReader().parseObject(Array(record.claims.utf8))) ?? [:])
        try await store.touchBrowserSession(cookieHash: cookieHash, lastSeenAt: now)
        entries.withLock { _ = $0.insert(Entry(session: session, lastSeen: now, lastWritten: now), for: cookieValue) }
        return session
    }

    /// Stores a new session, whose cookie holds `cookieValue`, and keeps it in memory.
    public func insert(_ record: BrowserSessionRecord, cookieValue: String, claims: JSONObject) async throws {
        try await store.insertBrowserSession(record)
        let session = BrowserSession(record: record, claims: claims)
        entries.withLock { _ = $0.insert(Entry(session: session, lastSeen: record.lastSeenAt, lastWritten: record.lastSeenAt), for: cookieValue) }
    }

    /// Forgets a cookie here (its session ended, or it was signed out).
    public func forget(cookieValue: String) {
        _ = entries.withLock { $0.removeValue(forKey: cookieValue) }
    }

    /// Ends a cookie's session record everywhere (sign-out): deleted from the store and forgotten here.
    public func end(_ session: BrowserSession, cookieValue: String) async throws {
        forget(cookieValue: cookieValue)
        try await store.deleteBrowserSession(cookieHash: session.record.cookieHash)
    }

    /// Deletes the records past their end or idle limit.
    public func sweep(now: Double) async throws -> Int {
        try await store.deleteExpiredBrowserSessions(now: now, idleCutoff: now - idleSeconds)
    }
}
