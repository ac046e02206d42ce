import Foundation
import GRDB
import RuntimeAPI

/// The State Surface on one SQLite file in WAL mode, through a GRDB `DatabasePool`.
///
/// Writes are serialised by SQLite and each is one transaction; reads run
/// concurrently from snapshots. `synchronous=FULL`: a commit has reached the
/// disk when the call returns, so acknowledged writes survive `kill -9` and
/// power loss. GRDB runs every statement on its own dispatch queues, never on
/// the caller's thread, so the async methods do not block an event loop.
public final class SQLiteStateSurface: SessionRepository, ExecutionRepository {
    public let path: String
    let pool: DatabasePool

    /// Opens (creating if needed) the database at `path` and applies migrations.
    ///
    /// - Parameter busyTimeout: how long a write waits for another process's lock.
    public init(path: String, busyTimeout: TimeInterval = 5) throws {
        self.path = path
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw StateSurfaceError(.unavailable, "cannot create the database directory \(directory): \(error.localizedDescription)")
            }
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.foreignKeysEnabled = true
        configuration.label = "portcullis.state"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(pool)
        } catch let error as DatabaseError {
            throw StateSurfaceError(.unavailable, "cannot open the database at \(path): \(error.message ?? "\(error.resultCode)")")
        }
    }

    /// The schema's history (`SchemaMigration.all`, the SQLite side of each step).
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for step in SchemaMigration.all {
            migrator.registerMigration(step.name) { db in try db.execute(sql: step.sqlite) }
        }
        return migrator
    }

    /// The schema steps a file has, read without changing it (none when there is no file yet).
    static func appliedMigrations(atPath path: String) throws -> Set<String> {
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        var configuration = Configuration()
        configuration.readonly = true
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            return try queue.read { db in try migrator.appliedIdentifiers(db) }
        } catch let error as DatabaseError {
            throw StateSurfaceError(.unavailable, "cannot read the database at \(path): \(error.message ?? "\(error.resultCode)")")
        }
    }

    /// The names of the schema steps applied to this file, in order.
    public func appliedMigrations() async throws -> [String] {
        // In the schema's order (by name, v10 would come before v2).
        let applied = try await read { db in try Self.migrator.appliedIdentifiers(db) }
        return SchemaMigration.all.map(\.name).filter(applied.contains)
    }

    /// Runs `PRAGMA integrity_check`; "ok" when the file is sound.
    public func integrityCheck() async throws -> String {
        try await read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") ?? "no answer" }
    }

    /// The journal mode in force ("wal").
    public func journalMode() async throws -> String {
        try await read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "" }
    }

    // MARK: Sessions

    static let sessionColumns = "id, state, user_id, tenant_id, created_at, upgraded_at, last_seen_at, expires_at, absolute_expires_at, metadata, version"

    static func session(from row: Row) throws -> SessionRecord {
        guard let state = SessionState(rawValue: row["state"]) else {
            throw StateSurfaceError(.corrupt, "a session row has an unknown state")
        }
        return SessionRecord(
            id: row["id"], state: state, userID: row["user_id"], tenantID: row["tenant_id"], createdAt: row["created_at"],
            upgradedAt: row["upgraded_at"], lastSeenAt: row["last_seen_at"], expiresAt: row["expires_at"],
            absoluteExpiresAt: row["absolute_expires_at"], metadata: row["metadata"], version: row["version"])
    }

    static func fetchSession(_ db: Database, id: String) throws -> SessionRecord? {
        try Row.fetchOne(db, sql: "SELECT \(sessionColumns) FROM sessions WHERE id = ?", arguments: [id]).map(session(from:))
    }

    public func insertSession(_ session: SessionRecord, maximumLiveForOwner: Int?) async throws {
        do {
            try await write { db in
                if let limit = maximumLiveForOwner, let userID = session.userID, let tenantID = session.tenantID,
                    try Self.liveSessionCount(db, userID: userID, tenantID: tenantID, now: session.createdAt) >= limit
                {
                    throw StateSurfaceError(.limitReached, "the owner already holds \(limit) live sessions")
                }
                try db.execute(
                    sql: "INSERT INTO sessions (\(Self.sessionColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    arguments: [
                        session.id, session.state.rawValue, session.userID, session.tenantID, session.createdAt, session.upgradedAt,
                        session.lastSeenAt, session.expiresAt, session.absoluteExpiresAt, session.metadata, session.version,
                    ])
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw StateSurfaceError(.conflict, "a session with that id already exists")
        }
    }

    static func liveSessionCount(_ db: Database, userID: String, tenantID: String, now: Double) throws -> Int {
        try Int.fetchOne(
            db, sql: "SELECT count(*) FROM sessions WHERE user_id = ? AND tenant_id = ? AND state = 'authenticated' AND expires_at > ?",
            arguments: [userID, tenantID, now]) ?? 0
    }

    public func session(id: String) async throws -> SessionRecord? {
        try await read { db in try Self.fetchSession(db, id: id) }
    }

    public func upgradeSession(
        id: String, userID: String, tenantID: String, now: Double, expiresAt: Double, absoluteExpiresAt: Double, maximumLiveForOwner: Int?
    ) async throws -> SessionUpgradeOutcome {
        try await write { db in
            if let limit = maximumLiveForOwner {
                guard let current = try Self.fetchSession(db, id: id), current.isLive(at: now) else { return .notFound }
                if current.isOwned(by: userID, tenantID: tenantID) { return .alreadyOwned(current) }
                if current.state == .anonymous, try Self.liveSessionCount(db, userID: userID, tenantID: tenantID, now: now) >= limit {
                    return .limitReached
                }
            }
            // The compare-and-set: only a live anonymous row changes.
            try db.execute(
                sql: """
                    UPDATE sessions
                    SET state = 'authenticated', user_id = ?, tenant_id = ?, upgraded_at = ?, last_seen_at = ?,
                        expires_at = ?, absolute_expires_at = ?, version = version + 1
                    WHERE id = ? AND state = 'anonymous' AND expires_at > ?
                    """,
                arguments: [userID, tenantID, now, now, min(expiresAt, absoluteExpiresAt), absoluteExpiresAt, id, now])
            let changed = db.changesCount == 1
            guard let current = try Self.fetchSession(db, id: id), current.isLive(at: now) else { return .notFound }
            if changed { return .upgraded(current) }
            return current.isOwned(by: userID, tenantID: tenantID) ? .alreadyOwned(current) : .lost
        }
    }

    public func revokeSession(id: String, now: Double) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE sessions SET state = 'revoked', last_seen_at = ?, version = version + 1 WHERE id = ? AND state <> 'revoked'",
                arguments: [now, id])
            if db.changesCount == 1 {
                try Self.record(.sessionEnded(sessionID: id), at: now, db)
                try Self.revokeOAuthAccessTokens(where: "session_id = ?", [id], now: now, db)
                return true
            }
            return try Self.fetchSession(db, id: id) != nil
        }
    }

    public func touchSession(id: String, now: Double, newExpiry: Double) async throws -> SessionRecord? {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE sessions SET last_seen_at = ?, expires_at = min(?, coalesce(absolute_expires_at, ?))
                    WHERE id = ? AND state <> 'revoked' AND expires_at > ?
                    """,
                arguments: [now, newExpiry, newExpiry, id, now])
            guard db.changesCount == 1 else { return nil }
            return try Self.fetchSession(db, id: id)
        }
    }

    public func replaceMetadata(id: String, expectedVersion: Int, metadata: String, now: Double) async throws -> SessionRecord? {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE sessions SET metadata = ?, last_seen_at = ?, version = version + 1
                    WHERE id = ? AND version = ? AND state <> 'revoked' AND expires_at > ?
                    """,
                arguments: [metadata, now, id, expectedVersion, now])
            guard db.changesCount == 1 else { return nil }
            return try Self.fetchSession(db, id: id)
        }
    }

    public func deleteSessions(endedBefore cutoff: Double) async throws -> Int {
        try await write { db in
            try db.execute(sql: "DELETE FROM sessions WHERE expires_at <= ? OR (state = 'revoked' AND last_seen_at <= ?)", arguments: [cutoff, cutoff])
            return db.changesCount
        }
    }

    public func revokeSessions(userID: String, tenantID: String, now: Double) async throws -> Int {
        try await write { db in
            let ended = try String.fetchAll(
                db, sql: "SELECT id FROM sessions WHERE user_id = ? AND tenant_id = ? AND state <> 'revoked'", arguments: [userID, tenantID])
            try db.execute(
                sql: "UPDATE sessions SET state = 'revoked', last_seen_at = ?, version = version + 1 WHERE user_id = ? AND tenant_id = ? AND state <> 'revoked'",
                arguments: [now, userID, tenantID])
            for id in ended {
                try Self.record(.sessionEnded(sessionID: id), at: now, db)
                try Self.revokeOAuthAccessTokens(where: "session_id = ?", [id], now: now, db)
            }
            return ended.count
        }
    }

    public func endedSessionIDs(among ids: [String], now: Double) async throws -> [String] {
        guard !ids.isEmpty else { return [] }
        return try await read { db in
            var live = Set<String>()
            for chunk in stride(from: 0, to: ids.count, by: 500).map({ Array(ids[$0..<min($0 + 500, ids.count)]) }) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                let rows = try String.fetchAll(
                    db, sql: "SELECT id FROM sessions WHERE id IN (\(marks)) AND state <> 'revoked' AND expires_at > ?",
                    arguments: StatementArguments(chunk.map(\.databaseValue) + [now.databaseValue]))
                live.formUnion(rows)
            }
            return ids.filter { !live.contains($0) }
        }
    }

    public func ping() async throws {
        _ = try await read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    // MARK: Executions

    static let executionColumns = "id, session_id, intent_type, status, idempotency_key, payload, result, error, created_at, updated_at"

    static func execution(from row: Row) throws -> ExecutionRecord {
        guard let status = ExecutionStatus(rawValue: row["status"]) else {
            throw StateSurfaceError(.corrupt, "an execution row has an unknown status")
        }
        return ExecutionRecord(
            id: row["id"], sessionID: row["session_id"], intentType: row["intent_type"], status: status,
            idempotencyKey: row["idempotency_key"], payload: row["payload"], result: row["result"], error: row["error"],
            createdAt: row["created_at"], updatedAt: row["updated_at"])
    }

    public func insertExecution(_ execution: ExecutionRecord) async throws -> ExecutionInsertOutcome {
        try await write { db in
            if let key = execution.idempotencyKey,
                let existing = try Row.fetchOne(
                    db, sql: "SELECT \(Self.executionColumns) FROM executions WHERE session_id = ? AND idempotency_key = ?",
                    arguments: [execution.sessionID, key])
            {
                return .existing(try Self.execution(from: existing))
            }
            try db.execute(
                sql: "INSERT INTO executions (\(Self.executionColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                arguments: [
                    execution.id, execution.sessionID, execution.intentType, execution.status.rawValue, execution.idempotencyKey,
                    execution.payload, execution.result, execution.error, execution.createdAt, execution.updatedAt,
                ])
            return .inserted(execution)
        }
    }

    public func updateExecution(id: String, status: ExecutionStatus, result: String?, error: String?, now: Double) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE executions SET status = ?, result = ?, error = ?, updated_at = ? WHERE id = ?",
                arguments: [status.rawValue, result, error, now, id])
        }
    }

    public func execution(id: String) async throws -> ExecutionRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.executionColumns) FROM executions WHERE id = ?", arguments: [id]).map(Self.execution(from:))
        }
    }
}
