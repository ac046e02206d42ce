import GRDB

extension SQLiteStateSurface: ProviderUserRepository {
    public func recordProviderUser(_ record: ProviderUserRecord) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO provider_users (user_id, issuer, subject, tenant_id, email, username, name, first_seen_at, last_seen_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (user_id) DO UPDATE SET
                        tenant_id = excluded.tenant_id, email = excluded.email, username = excluded.username, name = excluded.name,
                        last_seen_at = excluded.last_seen_at
                    """,
                arguments: [
                    record.userID, record.issuer, record.subject, record.tenantID, record.email, record.username, record.name, record.firstSeenAt,
                    record.lastSeenAt,
                ])
        }
    }

    public func providerUsers() async throws -> [ProviderUserRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.providerUserColumns) FROM provider_users ORDER BY last_seen_at DESC").map(Self.providerUser)
        }
    }

    public func providerUsers(matching text: String) async throws -> [ProviderUserRecord] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.providerUserColumns) FROM provider_users
                    WHERE user_id = ? OR subject = ? OR username = ? OR lower(email) = lower(?) ORDER BY last_seen_at DESC
                    """,
                arguments: [text, text, text, text]
            ).map(Self.providerUser)
        }
    }

    static let providerUserColumns = "user_id, issuer, subject, tenant_id, email, username, name, first_seen_at, last_seen_at"

    static func providerUser(_ row: Row) -> ProviderUserRecord {
        ProviderUserRecord(
            userID: row["user_id"], issuer: row["issuer"], subject: row["subject"], tenantID: row["tenant_id"], email: row["email"],
            username: row["username"], name: row["name"], firstSeenAt: row["first_seen_at"], lastSeenAt: row["last_seen_at"])
    }
}
