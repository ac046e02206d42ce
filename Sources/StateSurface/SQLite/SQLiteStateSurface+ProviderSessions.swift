import GRDB

extension SQLiteStateSurface: ProviderSessionRepository {
    public func insertLoginCode(_ record: LoginCodeRecord) async throws {
        let identity = record.provider
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO login_codes (code_hash, session_id, login_challenge, provider, issuer, subject, tenant_id, provider_sid,
                                             id_token, refresh_token, created_at, expires_at, access_token, access_token_expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    record.codeHash, record.sessionID, record.loginChallenge, identity.provider, identity.issuer, identity.subject, identity.tenantID,
                    identity.providerSessionID, identity.sealedIDToken, identity.sealedRefreshToken, record.createdAt, record.expiresAt,
                    identity.sealedAccessToken, identity.accessTokenExpiresAt,
                ])
        }
    }

    public func takeLoginCode(codeHash: String, now: Double) async throws -> LoginCodeRecord? {
        try await write { db in
            // DELETE ... RETURNING in one statement: of two completions with one code, one gets the row.
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        DELETE FROM login_codes WHERE code_hash = ?
                        RETURNING code_hash, session_id, login_challenge, provider, issuer, subject, tenant_id, provider_sid, id_token,
                                  refresh_token, created_at, expires_at, access_token, access_token_expires_at
                        """,
                    arguments: [codeHash])
            else { return nil }
            let record = LoginCodeRecord(
                codeHash: row["code_hash"], sessionID: row["session_id"], loginChallenge: row["login_challenge"], provider: Self.identity(row),
                createdAt: row["created_at"], expiresAt: row["expires_at"])
            return record.expiresAt > now ? record : nil
        }
    }

    public func saveProviderSession(_ record: ProviderSessionRecord) async throws {
        let identity = record.identity
        try await write { db in
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO provider_sessions (session_id, user_id, provider, issuer, subject, tenant_id, provider_sid, id_token,
                                                             refresh_token, created_at, expires_at, access_token, access_token_expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    record.sessionID, record.userID, identity.provider, identity.issuer, identity.subject, identity.tenantID, identity.providerSessionID,
                    identity.sealedIDToken, identity.sealedRefreshToken, record.createdAt, record.expiresAt, identity.sealedAccessToken,
                    identity.accessTokenExpiresAt,
                ])
        }
    }

    public func updateProviderSession(_ record: ProviderSessionRecord) async throws -> Bool {
        let identity = record.identity
        return try await write { db in
            try db.execute(
                sql: """
                    UPDATE provider_sessions SET user_id = ?, provider = ?, issuer = ?, subject = ?, tenant_id = ?, provider_sid = ?, id_token = ?,
                                                 refresh_token = ?, created_at = ?, expires_at = ?, access_token = ?, access_token_expires_at = ?,
                                                 recheck_failing_since = NULL, recheck_failed_at = NULL
                    WHERE session_id = ?
                    """,
                arguments: [
                    record.userID, identity.provider, identity.issuer, identity.subject, identity.tenantID, identity.providerSessionID,
                    identity.sealedIDToken, identity.sealedRefreshToken, record.createdAt, record.expiresAt, identity.sealedAccessToken,
                    identity.accessTokenExpiresAt, record.sessionID,
                ])
            return db.changesCount == 1
        }
    }

    public func providerSession(sessionID: String) async throws -> ProviderSessionRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM provider_sessions WHERE session_id = ?", arguments: [sessionID]).map(Self.providerSession)
        }
    }

    public func providerSessions(userID: String, now: Double) async throws -> [ProviderSessionRecord] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM provider_sessions WHERE user_id = ? AND expires_at > ? ORDER BY created_at DESC", arguments: [userID, now]
            ).map(Self.providerSession)
        }
    }

    public func providerSessions(issuer: String, providerSessionID: String?, subject: String?) async throws -> [ProviderSessionRecord] {
        guard providerSessionID != nil || subject != nil else { return [] }
        return try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM provider_sessions
                    WHERE issuer = ? AND (? IS NULL OR provider_sid = ?) AND (? IS NULL OR subject = ?)
                    """,
                arguments: [issuer, providerSessionID, providerSessionID, subject, subject]
            ).map(Self.providerSession)
        }
    }

    @discardableResult
    public func deleteProviderSession(sessionID: String) async throws -> [(tokenID: String, expiresAt: Double)] {
        try await write { db in
            try db.execute(sql: "DELETE FROM provider_sessions WHERE session_id = ?", arguments: [sessionID])
            let tokens = try Row.fetchAll(db, sql: "SELECT token_id, expires_at FROM session_access_tokens WHERE session_id = ?", arguments: [sessionID])
                .map { row -> (tokenID: String, expiresAt: Double) in (tokenID: row["token_id"], expiresAt: row["expires_at"]) }
            try db.execute(sql: "DELETE FROM session_access_tokens WHERE session_id = ?", arguments: [sessionID])
            return tokens
        }
    }

    public func scheduleProviderRecheck(sessionID: String, at: Double?) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE provider_sessions SET recheck_at = ? WHERE session_id = ?", arguments: [at, sessionID])
        }
    }

    public func providerRechecksDue(now: Double, interval: Double, limit: Int) async throws -> [(record: ProviderSessionRecord, due: Double)] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT p.* FROM provider_sessions p
                    WHERE p.recheck_at IS NOT NULL AND p.recheck_at <= ?
                      AND (p.agent_used_at >= p.recheck_at - ?
                           OR EXISTS (SELECT 1 FROM browser_sessions b WHERE b.session_id = p.session_id AND b.last_seen_at >= p.recheck_at - ?))
                    ORDER BY p.recheck_at LIMIT ?
                    """,
                arguments: [now, interval, interval, limit]
            ).map { row -> (record: ProviderSessionRecord, due: Double) in (Self.providerSession(row), row["recheck_at"]) }
        }
    }

    public func useProviderSession(sessionID: String, at: Double, dueBy: Double?) async throws -> (record: ProviderSessionRecord, due: Double)? {
        try await write { db in
            try db.execute(sql: "UPDATE provider_sessions SET agent_used_at = ? WHERE session_id = ?", arguments: [at, sessionID])
            return try Row.fetchOne(
                db, sql: "SELECT * FROM provider_sessions WHERE session_id = ? AND recheck_at IS NOT NULL AND recheck_at <= ?", arguments: [sessionID, dueBy ?? at]
            ).map { row -> (record: ProviderSessionRecord, due: Double) in (Self.providerSession(row), row["recheck_at"]) }
        }
    }

    public func noteProviderRecheckFailing(sessionID: String, now: Double, restartAfter: Double) async throws -> Double? {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE provider_sessions SET
                        recheck_failing_since = CASE WHEN recheck_failing_since IS NULL OR recheck_failed_at IS NULL OR recheck_failed_at < ? THEN ?
                                                     ELSE recheck_failing_since END,
                        recheck_failed_at = ?
                    WHERE session_id = ?
                    """,
                arguments: [now - restartAfter, now, now, sessionID])
            return try Double.fetchOne(db, sql: "SELECT recheck_failing_since FROM provider_sessions WHERE session_id = ?", arguments: [sessionID])
        }
    }

    public func claimProviderRecheck(sessionID: String, due: Double, next: Double) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE provider_sessions SET recheck_at = ? WHERE session_id = ? AND recheck_at = ?", arguments: [next, sessionID, due])
            return db.changesCount == 1
        }
    }

    public func recordSessionAccessToken(sessionID: String, tokenID: String, expiresAt: Double) async throws {
        try await write { db in
            try db.execute(
                sql: "INSERT OR IGNORE INTO session_access_tokens (token_id, session_id, expires_at) VALUES (?, ?, ?)",
                arguments: [tokenID, sessionID, expiresAt])
        }
    }

    public func sessionAccessTokens(sessionID: String, now: Double) async throws -> [(tokenID: String, expiresAt: Double)] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT token_id, expires_at FROM session_access_tokens WHERE session_id = ? AND expires_at > ?", arguments: [sessionID, now]
            ).map { (tokenID: $0["token_id"], expiresAt: $0["expires_at"]) }
        }
    }

    public func rememberLogoutToken(id: String, expiresAt: Double, now: Double) async throws -> Bool {
        try await write { db in
            // A new id is inserted; a known one is taken over only once it has expired.
            try db.execute(
                sql: """
                    INSERT INTO logout_token_ids (id, expires_at) VALUES (?, ?)
                    ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at WHERE logout_token_ids.expires_at <= ?
                    """,
                arguments: [id, expiresAt, now])
            return db.changesCount == 1
        }
    }

    public func deleteExpiredProviderSignIns(before cutoff: Double) async throws -> Int {
        try await write { db in
            var count = 0
            for table in ["login_codes", "provider_sessions", "session_access_tokens", "logout_token_ids"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE expires_at < ?", arguments: [cutoff])
                count += db.changesCount
            }
            return count
        }
    }

    static func identity(_ row: Row) -> ProviderIdentityRecord {
        ProviderIdentityRecord(
            provider: row["provider"], issuer: row["issuer"], subject: row["subject"], tenantID: row["tenant_id"], providerSessionID: row["provider_sid"],
            sealedIDToken: row["id_token"], sealedRefreshToken: row["refresh_token"], sealedAccessToken: row["access_token"],
            accessTokenExpiresAt: row["access_token_expires_at"])
    }

    static func providerSession(_ row: Row) -> ProviderSessionRecord {
        ProviderSessionRecord(
            sessionID: row["session_id"], userID: row["user_id"], identity: identity(row), createdAt: row["created_at"], expiresAt: row["expires_at"])
    }
}
