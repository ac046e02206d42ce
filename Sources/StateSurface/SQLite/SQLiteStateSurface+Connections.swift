import GRDB

extension SQLiteStateSurface: ConnectionRepository {
    public func insertConnectFlow(_ record: ConnectFlowRecord) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO connect_flows (state_hash, connection, user_id, tenant_id, cookie_hash, code_verifier, return_to, created_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    record.stateHash, record.connection, record.userID, record.tenantID, record.cookieHash, record.codeVerifier, record.returnTo,
                    record.createdAt, record.expiresAt,
                ])
        }
    }

    public func takeConnectFlow(stateHash: String, now: Double) async throws -> ConnectFlowRecord? {
        try await write { db in
            // DELETE ... RETURNING in one statement: of two callbacks with one state, one gets the row.
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        DELETE FROM connect_flows WHERE state_hash = ?
                        RETURNING state_hash, connection, user_id, tenant_id, cookie_hash, code_verifier, return_to, created_at, expires_at
                        """,
                    arguments: [stateHash])
            else { return nil }
            let record = ConnectFlowRecord(
                stateHash: row["state_hash"], connection: row["connection"], userID: row["user_id"], tenantID: row["tenant_id"],
                cookieHash: row["cookie_hash"], codeVerifier: row["code_verifier"], returnTo: row["return_to"], createdAt: row["created_at"],
                expiresAt: row["expires_at"])
            return record.expiresAt > now ? record : nil
        }
    }

    public func deleteExpiredConnectFlows(before cutoff: Double) async throws -> Int {
        try await write { db in
            try db.execute(sql: "DELETE FROM connect_flows WHERE expires_at < ?", arguments: [cutoff])
            let flows = db.changesCount
            try db.execute(sql: "DELETE FROM connect_elicitations WHERE expires_at < ?", arguments: [cutoff])
            return flows + db.changesCount
        }
    }

    static let elicitationColumns = "id, connection, user_id, tenant_id, client_id, created_at, expires_at"

    static func connectElicitation(from row: Row) -> ConnectElicitationRecord {
        ConnectElicitationRecord(
            id: row["id"], connection: row["connection"], userID: row["user_id"], tenantID: row["tenant_id"], clientID: row["client_id"],
            createdAt: row["created_at"], expiresAt: row["expires_at"])
    }

    public func connectElicitation(making record: ConnectElicitationRecord) async throws -> ConnectElicitationRecord {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO connect_elicitations (\(Self.elicitationColumns)) VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (user_id, tenant_id, connection, client_id) DO UPDATE SET
                        id = excluded.id, created_at = excluded.created_at, expires_at = excluded.expires_at
                    WHERE connect_elicitations.expires_at <= excluded.created_at
                    """,
                arguments: [record.id, record.connection, record.userID, record.tenantID, record.clientID, record.createdAt, record.expiresAt])
            return try Row.fetchOne(
                db,
                sql: "SELECT \(Self.elicitationColumns) FROM connect_elicitations WHERE user_id = ? AND tenant_id = ? AND connection = ? AND client_id = ?",
                arguments: [record.userID, record.tenantID, record.connection, record.clientID]
            ).map(Self.connectElicitation(from:)) ?? record
        }
    }

    public func connectElicitation(id: String, now: Double) async throws -> ConnectElicitationRecord? {
        try await read { db in
            try Row.fetchOne(
                db, sql: "SELECT \(Self.elicitationColumns) FROM connect_elicitations WHERE id = ? AND expires_at > ?",
                arguments: [id, now]
            ).map(Self.connectElicitation(from:))
        }
    }

    static let connectedAccountColumns =
        "user_id, tenant_id, connection, access_token, refresh_token, scope, expires_at, created_at, updated_at, last_used_at"

    static func connectedAccount(from row: Row) -> ConnectedAccountRecord {
        ConnectedAccountRecord(
            userID: row["user_id"], tenantID: row["tenant_id"], connection: row["connection"], accessToken: row["access_token"],
            refreshToken: row["refresh_token"], scope: row["scope"], expiresAt: row["expires_at"], createdAt: row["created_at"],
            updatedAt: row["updated_at"], lastUsedAt: row["last_used_at"])
    }

    public func upsertConnectedAccount(_ record: ConnectedAccountRecord) async throws -> [ElicitationCompletion] {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO connected_accounts (\(Self.connectedAccountColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (user_id, tenant_id, connection) DO UPDATE SET
                        access_token = excluded.access_token, refresh_token = excluded.refresh_token, scope = excluded.scope,
                        expires_at = excluded.expires_at, created_at = excluded.created_at, updated_at = excluded.updated_at,
                        last_used_at = excluded.last_used_at, refresh_claimed_until = NULL
                    """,
                arguments: [
                    record.userID, record.tenantID, record.connection, record.accessToken, record.refreshToken, record.scope, record.expiresAt,
                    record.createdAt, record.updatedAt, record.lastUsedAt,
                ])
            try Self.record(.connectionReplaced(userID: record.userID, tenantID: record.tenantID, connection: record.connection), at: record.updatedAt, db)
            let completed = try Row.fetchAll(
                db, sql: "DELETE FROM connect_elicitations WHERE user_id = ? AND tenant_id = ? AND connection = ? RETURNING \(Self.elicitationColumns)",
                arguments: [record.userID, record.tenantID, record.connection]
            ).map(Self.connectElicitation(from:)).filter { $0.expiresAt > record.updatedAt }.map(\.completion)
            for done in completed { try Self.record(.elicitationCompleted(done), at: record.updatedAt, db) }
            return completed
        }
    }

    public func claimConnectedAccountRefresh(userID: String, tenantID: String, connection: String, now: Double, until: Double) async throws
        -> ConnectedAccountRecord?
    {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE connected_accounts SET refresh_claimed_until = ?
                    WHERE user_id = ? AND tenant_id = ? AND connection = ? AND (refresh_claimed_until IS NULL OR refresh_claimed_until <= ?)
                    """,
                arguments: [until, userID, tenantID, connection, now])
            guard db.changesCount > 0 else { return nil }
            return try Row.fetchOne(
                db, sql: "SELECT \(Self.connectedAccountColumns) FROM connected_accounts WHERE user_id = ? AND tenant_id = ? AND connection = ?",
                arguments: [userID, tenantID, connection]
            ).map(Self.connectedAccount(from:))
        }
    }

    public func completeConnectedAccountRefresh(_ record: ConnectedAccountRecord, claimedUntil: Double, previousUpdatedAt: Double) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE connected_accounts SET access_token = ?, refresh_token = ?, scope = ?, expires_at = ?, updated_at = ?, refresh_claimed_until = NULL
                    WHERE user_id = ? AND tenant_id = ? AND connection = ? AND refresh_claimed_until = ? AND updated_at = ?
                    """,
                arguments: [
                    record.accessToken, record.refreshToken, record.scope, record.expiresAt, record.updatedAt, record.userID, record.tenantID, record.connection,
                    claimedUntil, previousUpdatedAt,
                ])
            return db.changesCount > 0
        }
    }

    public func releaseConnectedAccountRefresh(userID: String, tenantID: String, connection: String, claimedUntil: Double) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE connected_accounts SET refresh_claimed_until = NULL
                    WHERE user_id = ? AND tenant_id = ? AND connection = ? AND refresh_claimed_until = ?
                    """,
                arguments: [userID, tenantID, connection, claimedUntil])
        }
    }

    public func markConnectedAccountUsed(userID: String, tenantID: String, connection: String, at: Double) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE connected_accounts SET last_used_at = ?
                    WHERE user_id = ? AND tenant_id = ? AND connection = ? AND (last_used_at IS NULL OR last_used_at < ?)
                    """,
                arguments: [at, userID, tenantID, connection, at])
        }
    }

    public func connectedAccount(userID: String, tenantID: String, connection: String) async throws -> ConnectedAccountRecord? {
        try await read { db in
            try Row.fetchOne(
                db, sql: "SELECT \(Self.connectedAccountColumns) FROM connected_accounts WHERE user_id = ? AND tenant_id = ? AND connection = ?",
                arguments: [userID, tenantID, connection]
            ).map(Self.connectedAccount(from:))
        }
    }

    public func connectedAccounts(userID: String?) async throws -> [ConnectedAccountRecord] {
        try await read { db in
            if let userID {
                return try Row.fetchAll(
                    db, sql: "SELECT \(Self.connectedAccountColumns) FROM connected_accounts WHERE user_id = ? ORDER BY tenant_id, connection",
                    arguments: [userID]
                ).map(Self.connectedAccount(from:))
            }
            return try Row.fetchAll(db, sql: "SELECT \(Self.connectedAccountColumns) FROM connected_accounts ORDER BY user_id, tenant_id, connection")
                .map(Self.connectedAccount(from:))
        }
    }

    public func deleteConnectedAccount(userID: String, tenantID: String, connection: String, now: Double, ifUpdatedAt: Double?) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM connected_accounts WHERE user_id = ? AND tenant_id = ? AND connection = ? AND (? IS NULL OR updated_at = ?)",
                arguments: [userID, tenantID, connection, ifUpdatedAt, ifUpdatedAt])
            guard db.changesCount > 0 else { return false }
            try Self.record(.connectionEnded(userID: userID, tenantID: tenantID, connection: connection), at: now, db)
            return true
        }
    }
}
