import GRDB

extension SQLiteStateSurface: AccessChangeFeed {
    /// Records a change inside the caller's write transaction (SQLite serialises writers,
    /// so versions are in commit order).
    static func record(_ change: AccessChange, at now: Double, _ db: Database) throws {
        let row = change.row
        try db.execute(
            sql: "INSERT INTO access_changes (kind, subject, tenant_id, until, at) VALUES (?, ?, ?, ?, ?)",
            arguments: [row.kind, row.subject, row.tenantID, row.until, now])
    }

    public func recordAccessChange(_ change: AccessChange, now: Double) async throws {
        try await write { db in try Self.record(change, at: now, db) }
    }

    public func latestAccessChangeVersion() async throws -> Int64 {
        try await read { db in try Int64.fetchOne(db, sql: "SELECT coalesce(max(version), 0) FROM access_changes") ?? 0 }
    }

    public func accessChanges(after version: Int64, limit: Int) async throws -> [VersionedAccessChange] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT version, kind, subject, tenant_id, until FROM access_changes WHERE version > ? ORDER BY version LIMIT ?",
                arguments: [version, limit]
            ).map { row in
                VersionedAccessChange(
                    version: row["version"], change: AccessChange(kind: row["kind"], subject: row["subject"], tenantID: row["tenant_id"], until: row["until"]))
            }
        }
    }

    /// SQLite cannot signal another process: readers poll.
    public func accessChangeSignals() -> AsyncStream<Void>? { nil }
}
