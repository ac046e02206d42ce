import PostgresNIO

extension PostgresStateSurface: BrowserSessionRepository {
    public func insertBrowserSession(_ record: BrowserSessionRecord) async throws {
        _ = try await rows(
            """
            INSERT INTO browser_sessions (cookie_hash, session_id, user_id, tenant_id, issuer, subject, provider, claims, created_at, last_seen_at, expires_at)
            VALUES (\(record.cookieHash), \(record.sessionID), \(record.userID), \(record.tenantID), \(record.issuer), \(record.subject), \(record.provider),
                    \(record.claims), \(record.createdAt), \(record.lastSeenAt), \(record.expiresAt))
            """)
    }

    public func browserSession(cookieHash: String) async throws -> BrowserSessionRecord? {
        let found = try await rows(
            """
            SELECT cookie_hash, session_id, user_id, tenant_id, issuer, subject, provider, claims, created_at, last_seen_at, expires_at
            FROM browser_sessions WHERE cookie_hash = \(cookieHash)
            """)
        guard let row = found.first else { return nil }
        let (hash, session, user, tenant, issuer, subject, provider, claims, createdAt, lastSeenAt, expiresAt) = try row.decode(
            (String, String, String, String, String?, String?, String?, String, Double, Double, Double).self)
        return BrowserSessionRecord(
            cookieHash: hash, sessionID: session, userID: user, tenantID: tenant, issuer: issuer, subject: subject, provider: provider, claims: claims,
            createdAt: createdAt, lastSeenAt: lastSeenAt, expiresAt: expiresAt)
    }

    public func touchBrowserSession(cookieHash: String, lastSeenAt: Double) async throws {
        _ = try await rows(
            "UPDATE browser_sessions SET last_seen_at = \(lastSeenAt) WHERE cookie_hash = \(cookieHash) AND last_seen_at < \(lastSeenAt)")
    }

    @discardableResult
    public func deleteBrowserSession(cookieHash: String) async throws -> Bool {
        try await !rows("DELETE FROM browser_sessions WHERE cookie_hash = \(cookieHash) RETURNING 1").isEmpty
    }

    public func deleteExpiredBrowserSessions(now: Double, idleCutoff: Double) async throws -> Int {
        try await rows("DELETE FROM browser_sessions WHERE expires_at < \(now) OR last_seen_at < \(idleCutoff) RETURNING 1").count
    }
}
