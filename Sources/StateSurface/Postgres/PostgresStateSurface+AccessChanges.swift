import Logging
import PostgresNIO

extension PostgresStateSurface: AccessChangeFeed {
    /// The channel every instance LISTENs on.
    static let accessChannel = "portcullis_access_changes"
    /// The advisory lock change writers hold until they commit ("portcull" + 1).
    static let accessChangeLock: Int64 = migrationLock + 1

    /// Records a change inside the caller's transaction and notifies the listeners at commit.
    ///
    /// The transaction-scoped lock makes change-writing transactions commit in version
    /// order, so a reader that has seen version N has seen everything before it.
    static func record(_ change: AccessChange, at now: Double, _ connection: PostgresConnection, logger: Logger) async throws {
        let row = change.row
        try await connection.query("SELECT pg_advisory_xact_lock(\(accessChangeLock))", logger: logger)
        try await connection.query(
            "INSERT INTO access_changes (kind, subject, tenant_id, until, at) VALUES (\(row.kind), \(row.subject), \(row.tenantID), \(row.until), \(now))",
            logger: logger)
        try await connection.query("SELECT pg_notify(\(accessChannel), '')", logger: logger)
    }

    public func recordAccessChange(_ change: AccessChange, now: Double) async throws {
        let logger = self.logger
        try await transaction { connection in try await Self.record(change, at: now, connection, logger: logger) }
    }

    public func latestAccessChangeVersion() async throws -> Int64 {
        try await rows("SELECT coalesce(max(version), 0)::BIGINT FROM access_changes").first?.decode(Int64.self) ?? 0
    }

    public func accessChanges(after version: Int64, limit: Int) async throws -> [VersionedAccessChange] {
        try await rows("SELECT version, kind, subject, tenant_id, until FROM access_changes WHERE version > \(version) ORDER BY version LIMIT \(limit)")
            .map { row in
                let (version, kind, subject, tenant, until) = try row.decode((Int64, String, String, String?, Double?).self)
                return VersionedAccessChange(version: version, change: AccessChange(kind: kind, subject: subject, tenantID: tenant, until: until))
            }
    }

    /// Yields once per notification and once after every (re)connection of the store's
    /// one LISTEN (`PostgresChangeListener`, on a connection outside the pool).
    public func accessChangeSignals() -> AsyncStream<Void>? {
        changeListener.subscribe()
    }
}
