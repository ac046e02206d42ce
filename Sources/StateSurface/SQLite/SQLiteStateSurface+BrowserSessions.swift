import GRDB

extension SQLiteStateSurface: BrowserSessionRepository {
    public func insertBrowserSession(_ record: BrowserSessionRecord) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO browser_sessions (cookie_hash, session_id, user_id, tenant_id, issuer, subject, provider, claims, created_at, last_seen_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    record.cookieHash, record.sessionID, record.userID, record.tenantID, record.issuer, record.subject, record.provider, record.claims,
                    record.createdAt, record.lastSeenAt, record.expiresAt,
                ])
        }
    }

    public func browserSession(cookieHash: String) async throws -> BrowserSessionRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM browser_sessions WHERE cookie_hash = ?", arguments: [cookieHash]).map { row in
                BrowserSessionRecord(
                    cookieHash: row["cookie_hash"], sessionID: row["session_id"], userID: row["user_id"], tenantID: row["tenant_id"], issuer: row["issuer"],
                    subject: row["subject"], provider: row["provider"], claims: row["claims"], createdAt: row["created_at"], lastSeenAt: row["last_seen_at"],
                    expiresAt: row["expires_at"])
            }
        }
    }

    public func touchBrowserSession(cookieHash: String, lastSeenAt: Double) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE browser_sessions SET last_seen_at = ? WHERE cookie_hash = ? AND last_seen_at < ?", arguments: [lastSeenAt, cookieHash, lastSeenAt])
        }
    }

    @discardableResult
    public func deleteBrowserSession(cookieHash: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM browser_sessions WHERE cookie_hash = ?", arguments: [cookieHash])
            return db.changesCount > 0
        }
    }

    public func deleteExpiredBrowserSessions(now: Double, idleCutoff: Double) async throws -> Int {
        try await write { db in
            try db.execute(sql: "DELETE FROM browser_sessions WHERE expires_at < ? OR last_seen_at < ?", arguments: [now, idleCutoff])
            return db.changesCount
        }
    }
}
