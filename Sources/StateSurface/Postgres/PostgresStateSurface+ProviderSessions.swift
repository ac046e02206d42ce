import PostgresNIO

extension PostgresStateSurface: ProviderSessionRepository {
    public func insertLoginCode(_ record: LoginCodeRecord) async throws {
        let identity = record.provider
        _ = try await rows(
            """
            INSERT INTO login_codes (code_hash, session_id, login_challenge, provider, issuer, subject, tenant_id, provider_sid,
                                     id_token, refresh_token, created_at, expires_at, access_token, access_token_expires_at)
            VALUES (\(record.codeHash), \(record.sessionID), \(record.loginChallenge), \(identity.provider), \(identity.issuer), \(identity.subject),
                    \(identity.tenantID), \(identity.providerSessionID), \(identity.sealedIDToken), \(identity.sealedRefreshToken),
                    \(record.createdAt), \(record.expiresAt), \(identity.sealedAccessToken), \(identity.accessTokenExpiresAt))
            """)
    }

    public func takeLoginCode(codeHash: String, now: Double) async throws -> LoginCodeRecord? {
        // DELETE ... RETURNING in one statement: of two completions with one code (on any instance), one gets the row.
        let found = try await rows(
            """
            DELETE FROM login_codes WHERE code_hash = \(codeHash)
            RETURNING code_hash, session_id, login_challenge, created_at, expires_at,
                      provider, issuer, subject, tenant_id, provider_sid, id_token, refresh_token, access_token, access_token_expires_at
            """)
        guard let row = found.first else { return nil }
        let (hash, session, challenge, createdAt, expiresAt) = try row.decode((String, String, String, Double, Double).self)
        let record = LoginCodeRecord(
            codeHash: hash, sessionID: session, loginChallenge: challenge, provider: try Self.identity(row, from: 5), createdAt: createdAt,
            expiresAt: expiresAt)
        return record.expiresAt > now ? record : nil
    }

    public func saveProviderSession(_ record: ProviderSessionRecord) async throws {
        let identity = record.identity
        _ = try await rows(
            """
            INSERT INTO provider_sessions (session_id, user_id, created_at, expires_at, provider, issuer, subject, tenant_id, provider_sid,
                                           id_token, refresh_token, access_token, access_token_expires_at)
            VALUES (\(record.sessionID), \(record.userID), \(record.createdAt), \(record.expiresAt), \(identity.provider), \(identity.issuer),
                    \(identity.subject), \(identity.tenantID), \(identity.providerSessionID), \(identity.sealedIDToken), \(identity.sealedRefreshToken),
                    \(identity.sealedAccessToken), \(identity.accessTokenExpiresAt))
            ON CONFLICT (session_id) DO UPDATE SET
                user_id = excluded.user_id, created_at = excluded.created_at, expires_at = excluded.expires_at, provider = excluded.provider,
                issuer = excluded.issuer, subject = excluded.subject, tenant_id = excluded.tenant_id, provider_sid = excluded.provider_sid,
                id_token = excluded.id_token, refresh_token = excluded.refresh_token, access_token = excluded.access_token,
                access_token_expires_at = excluded.access_token_expires_at
            """)
    }

    public func providerSession(sessionID: String) async throws -> ProviderSessionRecord? {
        try await rows(
            """
            SELECT session_id, user_id, created_at, expires_at, provider, issuer, subject, tenant_id, provider_sid, id_token, refresh_token,
                   access_token, access_token_expires_at
            FROM provider_sessions WHERE session_id = \(sessionID)
            """
        ).first.map(Self.providerSession)
    }

    public func providerSessions(userID: String, now: Double) async throws -> [ProviderSessionRecord] {
        try await rows(
            """
            SELECT session_id, user_id, created_at, expires_at, provider, issuer, subject, tenant_id, provider_sid, id_token, refresh_token,
                   access_token, access_token_expires_at
            FROM provider_sessions WHERE user_id = \(userID) AND expires_at > \(now) ORDER BY created_at DESC
            """
        ).map(Self.providerSession)
    }

    public func providerSessions(issuer: String, providerSessionID: String?, subject: String?) async throws -> [ProviderSessionRecord] {
        guard providerSessionID != nil || subject != nil else { return [] }
        return try await rows(
            """
            SELECT session_id, user_id, created_at, expires_at, provider, issuer, subject, tenant_id, provider_sid, id_token, refresh_token,
                   access_token, access_token_expires_at
            FROM provider_sessions
            WHERE issuer = \(issuer) AND (\(providerSessionID)::text IS NULL OR provider_sid = \(providerSessionID))
              AND (\(subject)::text IS NULL OR subject = \(subject))
            """
        ).map(Self.providerSession)
    }

    @discardableResult
    public func deleteProviderSession(sessionID: String) async throws -> [(tokenID: String, expiresAt: Double)] {
        // The record first: a token recorded after the second statement finds no session (the refresh that
        // recorded it revokes it), and one recorded before it is returned here.
        _ = try await rows("DELETE FROM provider_sessions WHERE session_id = \(sessionID)")
        return try await rows("DELETE FROM session_access_tokens WHERE session_id = \(sessionID) RETURNING token_id, expires_at").map { row in
            let (tokenID, expiresAt) = try row.decode((String, Double).self)
            return (tokenID: tokenID, expiresAt: expiresAt)
        }
    }

    public func updateProviderSession(_ record: ProviderSessionRecord) async throws -> Bool {
        let identity = record.identity
        return try await !rows(
            """
            UPDATE provider_sessions SET user_id = \(record.userID), created_at = \(record.createdAt), expires_at = \(record.expiresAt),
                provider = \(identity.provider), issuer = \(identity.issuer), subject = \(identity.subject), tenant_id = \(identity.tenantID),
                provider_sid = \(identity.providerSessionID), id_token = \(identity.sealedIDToken), refresh_token = \(identity.sealedRefreshToken),
                access_token = \(identity.sealedAccessToken), access_token_expires_at = \(identity.accessTokenExpiresAt),
                recheck_failing_since = NULL, recheck_failed_at = NULL
            WHERE session_id = \(record.sessionID)
            RETURNING 1
            """
        ).isEmpty
    }

    public func scheduleProviderRecheck(sessionID: String, at: Double?) async throws {
        _ = try await rows("UPDATE provider_sessions SET recheck_at = \(at) WHERE session_id = \(sessionID)")
    }

    public func providerRechecksDue(now: Double, interval: Double, limit: Int) async throws -> [(record: ProviderSessionRecord, due: Double)] {
        try await rows(
            """
            SELECT p.session_id, p.user_id, p.created_at, p.expires_at, p.provider, p.issuer, p.subject, p.tenant_id, p.provider_sid, p.id_token,
                   p.refresh_token, p.access_token, p.access_token_expires_at, p.recheck_at
            FROM provider_sessions p
            WHERE p.recheck_at IS NOT NULL AND p.recheck_at <= \(now)
              AND (p.agent_used_at >= p.recheck_at - \(interval)
                   OR EXISTS (SELECT 1 FROM browser_sessions b WHERE b.session_id = p.session_id AND b.last_seen_at >= p.recheck_at - \(interval)))
            ORDER BY p.recheck_at LIMIT \(limit)
            """
        ).map { row in (record: try Self.providerSession(row), due: try Array(row)[13].decode(Double.self)) }
    }

    public func useProviderSession(sessionID: String, at: Double, dueBy: Double?) async throws -> (record: ProviderSessionRecord, due: Double)? {
        try await rows(
            """
            UPDATE provider_sessions p SET agent_used_at = \(at) WHERE p.session_id = \(sessionID)
            RETURNING p.session_id, p.user_id, p.created_at, p.expires_at, p.provider, p.issuer, p.subject, p.tenant_id, p.provider_sid, p.id_token,
                      p.refresh_token, p.access_token, p.access_token_expires_at, p.recheck_at
            """
        ).compactMap { row -> (record: ProviderSessionRecord, due: Double)? in
            guard let due = try Array(row)[13].decode(Double?.self), due <= dueBy ?? at else { return nil }
            return (record: try Self.providerSession(row), due: due)
        }.first
    }

    public func noteProviderRecheckFailing(sessionID: String, now: Double, restartAfter: Double) async throws -> Double? {
        try await rows(
            """
            UPDATE provider_sessions SET
                recheck_failing_since = CASE WHEN recheck_failing_since IS NULL OR recheck_failed_at IS NULL OR recheck_failed_at < \(now - restartAfter)
                                             THEN \(now) ELSE recheck_failing_since END,
                recheck_failed_at = \(now)
            WHERE session_id = \(sessionID)
            RETURNING recheck_failing_since
            """
        ).first.map { try $0.decode(Double.self) }
    }

    public func claimProviderRecheck(sessionID: String, due: Double, next: Double) async throws -> Bool {
        try await !rows(
            "UPDATE provider_sessions SET recheck_at = \(next) WHERE session_id = \(sessionID) AND recheck_at = \(due) RETURNING 1"
        ).isEmpty
    }

    public func recordSessionAccessToken(sessionID: String, tokenID: String, expiresAt: Double) async throws {
        _ = try await rows(
            """
            INSERT INTO session_access_tokens (token_id, session_id, expires_at) VALUES (\(tokenID), \(sessionID), \(expiresAt))
            ON CONFLICT (token_id) DO NOTHING
            """)
    }

    public func sessionAccessTokens(sessionID: String, now: Double) async throws -> [(tokenID: String, expiresAt: Double)] {
        try await rows("SELECT token_id, expires_at FROM session_access_tokens WHERE session_id = \(sessionID) AND expires_at > \(now)").map { row in
            let (id, expiresAt) = try row.decode((String, Double).self)
            return (tokenID: id, expiresAt: expiresAt)
        }
    }

    public func rememberLogoutToken(id: String, expiresAt: Double, now: Double) async throws -> Bool {
        // A new id is inserted; a known one is taken over only once it has expired. One statement, so
        // two instances receiving the same token cannot both see it as new.
        try await !rows(
            """
            INSERT INTO logout_token_ids (id, expires_at) VALUES (\(id), \(expiresAt))
            ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at WHERE logout_token_ids.expires_at <= \(now)
            RETURNING 1
            """
        ).isEmpty
    }

    public func deleteExpiredProviderSignIns(before cutoff: Double) async throws -> Int {
        var count = 0
        count += try await rows("DELETE FROM login_codes WHERE expires_at < \(cutoff) RETURNING 1").count
        count += try await rows("DELETE FROM provider_sessions WHERE expires_at < \(cutoff) RETURNING 1").count
        count += try await rows("DELETE FROM session_access_tokens WHERE expires_at < \(cutoff) RETURNING 1").count
        count += try await rows("DELETE FROM logout_token_ids WHERE expires_at < \(cutoff) RETURNING 1").count
        return count
    }

    /// The nine identity columns from column `first` on: provider, issuer, subject, tenant_id, provider_sid, id_token, refresh_token,
    /// access_token, access_token_expires_at.
    static func identity(_ row: PostgresRow, from first: Int) throws -> ProviderIdentityRecord {
        let columns = Array(row)
        func text(_ offset: Int) throws -> String? { try columns[first + offset].decode(String?.self) }
        return ProviderIdentityRecord(
            provider: try text(0) ?? "", issuer: try text(1) ?? "", subject: try text(2) ?? "", tenantID: try text(3) ?? "",
            providerSessionID: try text(4), sealedIDToken: try text(5) ?? "", sealedRefreshToken: try text(6), sealedAccessToken: try text(7),
            accessTokenExpiresAt: try columns[first + 8].decode(Double?.self))
    }

    static func providerSession(_ row: PostgresRow) throws -> ProviderSessionRecord {
        let columns = Array(row)
        return ProviderSessionRecord(
            sessionID: try columns[0].decode(String.self), userID: try columns[1].decode(String.self), identity: try identity(row, from: 4),
            createdAt: try columns[2].decode(Double.self), expiresAt: try columns[3].decode(Double.self))
    }
}
