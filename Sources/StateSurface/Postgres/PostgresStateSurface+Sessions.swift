import PostgresNIO
import RuntimeAPI

extension PostgresStateSurface: SessionRepository, ExecutionRepository, StateStore {
    static let sessionColumns = "id, state, user_id, tenant_id, created_at, upgraded_at, last_seen_at, expires_at, absolute_expires_at, metadata, version"

    static func session(from row: PostgresRow) throws -> SessionRecord {
        let r = row.makeRandomAccess()
        guard let state = SessionState(rawValue: try r["state"].decode(String.self)) else {
            throw StateSurfaceError(.corrupt, "a session row has an unknown state")
        }
        return SessionRecord(
            id: try r["id"].decode(String.self), state: state, userID: try r["user_id"].decode(String?.self),
            tenantID: try r["tenant_id"].decode(String?.self), createdAt: try r["created_at"].decode(Double.self),
            upgradedAt: try r["upgraded_at"].decode(Double?.self), lastSeenAt: try r["last_seen_at"].decode(Double.self),
            expiresAt: try r["expires_at"].decode(Double.self), absoluteExpiresAt: try r["absolute_expires_at"].decode(Double?.self),
            metadata: try r["metadata"].decode(String.self), version: try r["version"].decode(Int.self))
    }

    static func fetchSession(_ connection: PostgresConnection, id: String, logger: Logger) async throws -> SessionRecord? {
        try await connection.query("SELECT \(unescaped: sessionColumns) FROM sessions WHERE id = \(id)", logger: logger).collect().first.map(session(from:))
    }

    static func liveSessionCount(_ connection: PostgresConnection, userID: String, tenantID: String, now: Double, logger: Logger) async throws -> Int {
        let rows = try await connection.query(
            "SELECT count(*) FROM sessions WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND state = 'authenticated' AND expires_at > \(now)",
            logger: logger
        ).collect()
        return try rows.first?.decode(Int.self) ?? 0
    }

    public func insertSession(_ session: SessionRecord, maximumLiveForOwner: Int?) async throws {
        let logger = self.logger
        do {
            try await transaction { connection in
                if let limit = maximumLiveForOwner, let userID = session.userID, let tenantID = session.tenantID {
                    try await Self.lockOwner(connection, userID: userID, tenantID: tenantID, logger: logger)
                    if try await Self.liveSessionCount(connection, userID: userID, tenantID: tenantID, now: session.createdAt, logger: logger) >= limit {
                        throw StateSurfaceError(.limitReached, "the owner already holds \(limit) live sessions")
                    }
                }
                try await connection.query(
                    """
                    INSERT INTO sessions (\(unescaped: Self.sessionColumns)) VALUES (\(session.id), \(session.state.rawValue), \(session.userID),
                        \(session.tenantID), \(session.createdAt), \(session.upgradedAt), \(session.lastSeenAt), \(session.expiresAt),
                        \(session.absoluteExpiresAt), \(session.metadata), \(session.version))
                    """, logger: logger)
            }
        } catch let error as StateSurfaceError where error.code == .conflict {
            throw StateSurfaceError(.conflict, "a session with that id already exists")
        }
    }

    public func session(id: String) async throws -> SessionRecord? {
        try await rows("SELECT \(unescaped: Self.sessionColumns) FROM sessions WHERE id = \(id)").first.map(Self.session(from:))
    }

    public func upgradeSession(
        id: String, userID: String, tenantID: String, now: Double, expiresAt: Double, absoluteExpiresAt: Double, maximumLiveForOwner: Int?
    ) async throws -> SessionUpgradeOutcome {
        let logger = self.logger
        return try await transaction { connection in
            if let limit = maximumLiveForOwner {
                try await Self.lockOwner(connection, userID: userID, tenantID: tenantID, logger: logger)
                guard let current = try await Self.fetchSession(connection, id: id, logger: logger), current.isLive(at: now) else { return .notFound }
                if current.isOwned(by: userID, tenantID: tenantID) { return .alreadyOwned(current) }
                if current.state == .anonymous,
                    try await Self.liveSessionCount(connection, userID: userID, tenantID: tenantID, now: now, logger: logger) >= limit
                {
                    return .limitReached
                }
            }
            // The compare-and-set: only a live anonymous row changes (PostgreSQL re-checks the
            // condition on the row it waited for, so of two concurrent upgrades one changes it).
            let changed = try await connection.query(
                """
                UPDATE sessions
                SET state = 'authenticated', user_id = \(userID), tenant_id = \(tenantID), upgraded_at = \(now), last_seen_at = \(now),
                    expires_at = \(min(expiresAt, absoluteExpiresAt)), absolute_expires_at = \(absoluteExpiresAt), version = version + 1
                WHERE id = \(id) AND state = 'anonymous' AND expires_at > \(now)
                RETURNING id
                """, logger: logger
            ).collect().count == 1
            guard let current = try await Self.fetchSession(connection, id: id, logger: logger), current.isLive(at: now) else { return .notFound }
            if changed { return .upgraded(current) }
            return current.isOwned(by: userID, tenantID: tenantID) ? .alreadyOwned(current) : .lost
        }
    }

    public func revokeSession(id: String, now: Double) async throws -> Bool {
        let logger = self.logger
        return try await transaction { connection in
            let changed = try await connection.query(
                "UPDATE sessions SET state = 'revoked', last_seen_at = \(now), version = version + 1 WHERE id = \(id) AND state <> 'revoked' RETURNING id",
                logger: logger
            ).collect()
            if !changed.isEmpty {
                try await Self.record(.sessionEnded(sessionID: id), at: now, connection, logger: logger)
                let tokens = try await connection.query("DELETE FROM oauth_access_tokens WHERE session_id = \(id) RETURNING token_id, expires_at", logger: logger).collect()
                try await Self.revokeOAuthAccessTokens(tokens, now: now, connection, logger: logger)
                return true
            }
            return try await Self.fetchSession(connection, id: id, logger: logger) != nil
        }
    }

    public func touchSession(id: String, now: Double, newExpiry: Double) async throws -> SessionRecord? {
        try await rows(
            """
            UPDATE sessions SET last_seen_at = \(now), expires_at = LEAST(\(newExpiry), coalesce(absolute_expires_at, \(newExpiry)))
            WHERE id = \(id) AND state <> 'revoked' AND expires_at > \(now)
            RETURNING \(unescaped: Self.sessionColumns)
            """
        ).first.map(Self.session(from:))
    }

    public func replaceMetadata(id: String, expectedVersion: Int, metadata: String, now: Double) async throws -> SessionRecord? {
        try await rows(
            """
            UPDATE sessions SET metadata = \(metadata), last_seen_at = \(now), version = version + 1
            WHERE id = \(id) AND version = \(expectedVersion) AND state <> 'revoked' AND expires_at > \(now)
            RETURNING \(unescaped: Self.sessionColumns)
            """
        ).first.map(Self.session(from:))
    }

    public func deleteSessions(endedBefore cutoff: Double) async throws -> Int {
        try await rows("DELETE FROM sessions WHERE expires_at <= \(cutoff) OR (state = 'revoked' AND last_seen_at <= \(cutoff)) RETURNING id").count
    }

    public func revokeSessions(userID: String, tenantID: String, now: Double) async throws -> Int {
        let logger = self.logger
        return try await transaction { connection in
            let ended = try await connection.query(
                """
                UPDATE sessions SET state = 'revoked', last_seen_at = \(now), version = version + 1
                WHERE user_id = \(userID) AND tenant_id = \(tenantID) AND state <> 'revoked' RETURNING id
                """, logger: logger
            ).collect().map { try $0.decode(String.self) }
            for id in ended {
                try await Self.record(.sessionEnded(sessionID: id), at: now, connection, logger: logger)
                let tokens = try await connection.query("DELETE FROM oauth_access_tokens WHERE session_id = \(id) RETURNING token_id, expires_at", logger: logger).collect()
                try await Self.revokeOAuthAccessTokens(tokens, now: now, connection, logger: logger)
            }
            return ended.count
        }
    }

    public func endedSessionIDs(among ids: [String], now: Double) async throws -> [String] {
        guard !ids.isEmpty else { return [] }
        let live = Set(
            try await rows("SELECT id FROM sessions WHERE id = ANY(\(ids)) AND state <> 'revoked' AND expires_at > \(now)").map { try $0.decode(String.self) })
        return ids.filter { !live.contains($0) }
    }

    // MARK: Executions

    static let executionColumns = "id, session_id, intent_type, status, idempotency_key, payload, result, error, created_at, updated_at"

    static func execution(from row: PostgresRow) throws -> ExecutionRecord {
        let r = row.makeRandomAccess()
        guard let status = ExecutionStatus(rawValue: try r["status"].decode(String.self)) else {
            throw StateSurfaceError(.corrupt, "an execution row has an unknown status")
        }
        return ExecutionRecord(
            id: try r["id"].decode(String.self), sessionID: try r["session_id"].decode(String.self), intentType: try r["intent_type"].decode(String.self),
            status: status, idempotencyKey: try r["idempotency_key"].decode(String?.self), payload: try r["payload"].decode(String.self),
            result: try r["result"].decode(String?.self), error: try r["error"].decode(String?.self), createdAt: try r["created_at"].decode(Double.self),
            updatedAt: try r["updated_at"].decode(Double.self))
    }

    public func insertExecution(_ execution: ExecutionRecord) async throws -> ExecutionInsertOutcome {
        let logger = self.logger
        return try await transaction { connection in
            // The unique (session_id, idempotency_key) decides between concurrent inserts with one key.
            let inserted = try await connection.query(
                """
                INSERT INTO executions (\(unescaped: Self.executionColumns)) VALUES (\(execution.id), \(execution.sessionID), \(execution.intentType),
                    \(execution.status.rawValue), \(execution.idempotencyKey), \(execution.payload), \(execution.result), \(execution.error),
                    \(execution.createdAt), \(execution.updatedAt))
                ON CONFLICT (session_id, idempotency_key) DO NOTHING
                RETURNING id
                """, logger: logger
            ).collect()
            if !inserted.isEmpty { return .inserted(execution) }
            guard let key = execution.idempotencyKey,
                let existing = try await connection.query(
                    "SELECT \(unescaped: Self.executionColumns) FROM executions WHERE session_id = \(execution.sessionID) AND idempotency_key = \(key)",
                    logger: logger
                ).collect().first
            else { throw StateSurfaceError(.conflict, "an execution with that id already exists") }
            return .existing(try Self.execution(from: existing))
        }
    }

    public func updateExecution(id: String, status: ExecutionStatus, result: String?, error: String?, now: Double) async throws {
        _ = try await rows("UPDATE executions SET status = \(status.rawValue), result = \(result), error = \(error), updated_at = \(now) WHERE id = \(id)")
    }

    public func execution(id: String) async throws -> ExecutionRecord? {
        try await rows("SELECT \(unescaped: Self.executionColumns) FROM executions WHERE id = \(id)").first.map(Self.execution(from:))
    }
}
