import PostgresNIO

extension PostgresStateSurface: ProviderUserRepository {
    public func recordProviderUser(_ record: ProviderUserRecord) async throws {
        _ = try await rows(
            """
            INSERT INTO provider_users (user_id, issuer, subject, tenant_id, email, username, name, first_seen_at, last_seen_at)
            VALUES (\(record.userID), \(record.issuer), \(record.subject), \(record.tenantID), \(record.email), \(record.username), \(record.name),
                    \(record.firstSeenAt), \(record.lastSeenAt))
            ON CONFLICT (user_id) DO UPDATE SET
                tenant_id = excluded.tenant_id, email = excluded.email, username = excluded.username, name = excluded.name,
                last_seen_at = excluded.last_seen_at
            """)
    }

    public func providerUsers() async throws -> [ProviderUserRecord] {
        try await rows(
            """
            SELECT user_id, issuer, subject, tenant_id, email, username, name, first_seen_at, last_seen_at
            FROM provider_users ORDER BY last_seen_at DESC
            """
        ).map(Self.providerUser)
    }

    public func providerUsers(matching text: String) async throws -> [ProviderUserRecord] {
        try await rows(
            """
            SELECT user_id, issuer, subject, tenant_id, email, username, name, first_seen_at, last_seen_at
            FROM provider_users
            WHERE user_id = \(text) OR subject = \(text) OR username = \(text) OR lower(email) = lower(\(text)) ORDER BY last_seen_at DESC
            """
        ).map(Self.providerUser)
    }

    static func providerUser(_ row: PostgresRow) throws -> ProviderUserRecord {
        let (userID, issuer, subject, tenantID, email, username, name, firstSeenAt, lastSeenAt) = try row.decode(
            (String, String, String, String, String?, String?, String?, Double, Double).self)
        return ProviderUserRecord(
            userID: userID, issuer: issuer, subject: subject, tenantID: tenantID, email: email, username: username, name: name, firstSeenAt: firstSeenAt,
            lastSeenAt: lastSeenAt)
    }
}
