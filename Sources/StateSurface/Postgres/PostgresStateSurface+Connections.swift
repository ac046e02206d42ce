import PostgresNIO

extension PostgresStateSurface: ConnectionRepository {
    public func insertConnectFlow(_ record: ConnectFlowRecord) async throws {
        _ = try await rows(
            """
            INSERT INTO connect_flows (state_hash, connection, user_id, tenant_id, cookie_hash, code_verifier, return_to, created_at, expires_at)
            VALUES (\(record.stateHash), \(record.connection), \(record.userID), \(record.tenantID), \(record.cookieHash), \(record.codeVerifier),
                    \(record.returnTo), \(record.createdAt), \(record.expiresAt))
            """)
    }

    public func takeConnectFlow(stateHash: String, now: Double) async throws -> ConnectFlowRecord? {
        // DELETE ... RETURNING in one statement: of two callbacks with one state (on any instance), one gets the row.
        let found = try await rows(
            """
            DELETE FROM connect_flows WHERE state_hash = \(stateHash)
            RETURNING state_hash, connection, user_id, tenant_id, cookie_hash, code_verifier, return_to, created_at, expires_at
            """)
        guard let row = found.first else { return nil }
        let (hash, connection, user, tenant, cookie, verifier, returnTo, createdAt, expiresAt) = try row.decode(
            (String, String, String, String, String, String, String, Double, Double).self)
        let record = ConnectFlowRecord(
            stateHash: hash, connection: connection, userID: user, tenantID: tenant, cookieHash: cookie, codeVerifier: verifier, returnTo: returnTo,
            createdAt: createdAt, expiresAt: expiresAt)
        return record.expiresAt > now ? record : nil
    }

    public func deleteExpiredConnectFlows(before cutoff: Double) async throws -> Int {
        try await rows("DELETE FROM connect_flows WHERE expires_at < \(cutoff) RETURNING 1").count
            + rows("DELETE FROM connect_elicitations WHERE expires_at < \(cutoff) RETURNING 1").count
    }

    static func connectElicitation(from row: PostgresRow) throws -> ConnectElicitationRecord {
        let (id, connection, user, tenant, client, createdAt, expiresAt) = try row.decode((String, String, String, String, String, Double, Double).self)
        return ConnectElicitationRecord(
            id: id, connection: connection, userID: user, tenantID: tenant, clientID: client, createdAt: createdAt, expiresAt: expiresAt)
    }

    public func connectElicitation(making record: ConnectElicitationRecord) async throws -> ConnectElicitationRecord {
        // One statement: of racing callers, each gets the one live row.
        let kept = try await rows(
            """
            INSERT INTO connect_elicitations (id, connection, user_id, tenant_id, client_id, created_at, expires_at)
            VALUES (\(record.id), \(record.connection), \(record.userID), \(record.tenantID), \(record.clientID), \(record.createdAt), \(record.expiresAt))
            ON CONFLICT (user_id, tenant_id, connection, client_id) DO UPDATE SET
                id = CASE WHEN connect_elicitations.expires_at <= excluded.created_at THEN excluded.id ELSE connect_elicitations.id END,
                created_at = CASE WHEN connect_elicitations.expires_at <= excluded.created_at THEN excluded.created_at ELSE connect_elicitations.created_at END,
                expires_at = CASE WHEN connect_elicitations.expires_at <= excluded.created_at THEN excluded.expires_at ELSE connect_elicitations.expires_at END
            RETURNING id, connection, user_id, tenant_id, client_id, created_at, expires_at
            """)
        return try kept.first.map(Self.connectElicitation(from:)) ?? record
    }

    public func connectElicitation(id: String, now: Double) async throws -> ConnectElicitationRecord? {
        try await rows(
            """
            SELECT id, connection, user_id, tenant_id, client_id, created_at, expires_at FROM connect_elicitations
            WHERE id = \(id) AND expires_at > \(now)
            """
        ).first.map(Self.connectElicitation(from:))
    }

    static func connectedAccount(from row: PostgresRow) throws -> ConnectedAccountRecord {
        let (user, tenant, connection, access, refresh, scope, expiresAt, createdAt, updatedAt, lastUsedAt) = try row.decode(
            (String, String, String, String, String?, String, Double?, Double, Double, Double?).self)
        return ConnectedAccountRecord(
            userID: user, tenantID: tenant, connection: connection, accessToken: access, refreshToken: refresh, scope: scope, expiresAt: expiresAt,
            createdAt: createdAt, updatedAt: updatedAt, lastUsedAt: lastUsedAt)
    }

    public func upsertConnectedAccount(_ record: ConnectedAccountRecord) async throws -> [ElicitationCompletion] {
        let logger = self.logger
        return try await transaction { db in
            try await db.query(
                """
                INSERT INTO connected_accounts (user_id, tenant_id, connection, access_token, refresh_token, scope, expires_at, created_at, updated_at, last_used_at)
                VALUES (\(record.userID), \(record.tenantID), \(record.connection), \(record.accessToken), \(record.refreshToken), \(record.scope),
                        \(record.expiresAt), \(record.createdAt), \(record.updatedAt), \(record.lastUsedAt))
                ON CONFLICT (user_id, tenant_id, connection) DO UPDATE SET
                    access_token = excluded.access_token, refresh_token = excluded.refresh_token, scope = excluded.scope,
                    expires_at = excluded.expires_at, created_at = excluded.created_at, updated_at = excluded.updated_at,
                    last_used_at = excluded.last_used_at, refresh_claimed_until = NULL
                """, logger: logger)
            try await Self.record(
                .connectionReplaced(userID: record.userID, tenantID: record.tenantID, connection: record.connection), at: record.updatedAt, db, logger: logger)
            var completed: [ElicitationCompletion] = []
            for try await row in try await db.query(
                """
                DELETE FROM connect_elicitations WHERE user_id = \(record.userID) AND tenant_id = \(record.tenantID) AND connection = \(record.connection)
                RETURNING id, connection, user_id, tenant_id, client_id, created_at, expires_at
                """, logger: logger)
            {
                let elicitation = try Self.connectElicitation(from: row)
                if elicitation.expiresAt > record.updatedAt { completed.append(elicitation.completion) }
            }
            for done in completed { try await Self.record(.elicitationCompleted(done), at: record.updatedAt, db, logger: logger) }
            return completed
        }
    }

    public func claimConnectedAccountRefresh(userID: String, tenantID: String, connection: String, now: Double, until: Double) async throws
        -> ConnectedAccountRecord?
    {
        // One statement: the row lock orders racing claims on any instance, and the second sees the first's claim.
        try await rows(
            """
            UPDATE connected_accounts SET refresh_claimed_until = \(until)
            WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND connection = \(connection)
              AND (refresh_claimed_until IS NULL OR refresh_claimed_until <= \(now))
            RETURNING user_id, tenant_id, connection, access_token, refresh_token, scope, expires_at, created_at, updated_at, last_used_at
            """
        ).first.map(Self.connectedAccount(from:))
    }

    public func completeConnectedAccountRefresh(_ record: ConnectedAccountRecord, claimedUntil: Double, previousUpdatedAt: Double) async throws -> Bool {
        try await rows(
            """
            UPDATE connected_accounts SET access_token = \(record.accessToken), refresh_token = \(record.refreshToken), scope = \(record.scope),
                expires_at = \(record.expiresAt), updated_at = \(record.updatedAt), refresh_claimed_until = NULL
            WHERE user_id = \(record.userID) AND tenant_id = \(record.tenantID) AND connection = \(record.connection)
              AND refresh_claimed_until = \(claimedUntil) AND updated_at = \(previousUpdatedAt)
            RETURNING 1
            """
        ).count > 0
    }

    public func releaseConnectedAccountRefresh(userID: String, tenantID: String, connection: String, claimedUntil: Double) async throws {
        _ = try await rows(
            """
            UPDATE connected_accounts SET refresh_claimed_until = NULL
            WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND connection = \(connection) AND refresh_claimed_until = \(claimedUntil)
            """)
    }

    public func markConnectedAccountUsed(userID: String, tenantID: String, connection: String, at: Double) async throws {
        _ = try await rows(
            """
            UPDATE connected_accounts SET last_used_at = \(at)
            WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND connection = \(connection) AND (last_used_at IS NULL OR last_used_at < \(at))
            """)
    }

    public func connectedAccount(userID: String, tenantID: String, connection: String) async throws -> ConnectedAccountRecord? {
        try await rows(
            """
            SELECT user_id, tenant_id, connection, access_token, refresh_token, scope, expires_at, created_at, updated_at, last_used_at
            FROM connected_accounts WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND connection = \(connection)
            """
        ).first.map(Self.connectedAccount(from:))
    }

    public func connectedAccounts(userID: String?) async throws -> [ConnectedAccountRecord] {
        let found =
            if let userID {
                try await rows(
                    """
                    SELECT user_id, tenant_id, connection, access_token, refresh_token, scope, expires_at, created_at, updated_at, last_used_at
                    FROM connected_accounts WHERE user_id = \(userID) ORDER BY tenant_id, connection
                    """)
            } else {
                try await rows(
                    """
                    SELECT user_id, tenant_id, connection, access_token, refresh_token, scope, expires_at, created_at, updated_at, last_used_at
                    FROM connected_accounts ORDER BY user_id, tenant_id, connection
                    """)
            }
        return try found.map(Self.connectedAccount(from:))
    }

    public func deleteConnectedAccount(userID: String, tenantID: String, connection: String, now: Double, ifUpdatedAt: Double?) async throws -> Bool {
        let logger = self.logger
        return try await transaction { db in
            let deleted = try await db.query(
                """
                DELETE FROM connected_accounts WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND connection = \(connection)
                  AND (\(ifUpdatedAt)::DOUBLE PRECISION IS NULL OR updated_at = \(ifUpdatedAt))
                RETURNING 1
                """,
                logger: logger
            ).collect().count > 0
            guard deleted else { return false }
            try await Self.record(.connectionEnded(userID: userID, tenantID: tenantID, connection: connection), at: now, db, logger: logger)
            return true
        }
    }
}
