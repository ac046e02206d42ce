import GRDB

extension SQLiteStateSurface: ProviderUserRepository {
    public func recordProviderUser(_ record: ProviderUserRecord) async throws {
        try await write { db in
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
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.providerUserColumns) FROM provider_users ORDER BY last_seen_at DESC").map(Self.providerUser)
        }
    }

    public func providerUsers(matching text: String) async throws -> [ProviderUserRecord] {
        try await read { db in
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

    public func providerUser(id userID: String) async throws -> ProviderUserRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.providerUserColumns) FROM provider_users WHERE user_id = ?", arguments: [userID]).map(Self.providerUser)
        }
    }

    public func cutOffProviderUser(id userID: String, now: Double, forgetNames: Bool) async throws -> ProviderUserRecord? {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE provider_users SET disabled = 1, tokens_not_before = max(tokens_not_before, ?)\(forgetNames ? ", email = NULL, username = NULL, name = NULL" : "")
                    WHERE user_id = ?
                    """,
                arguments: [now, userID])
            guard let user = try Row.fetchOne(db, sql: "SELECT \(Self.providerUserColumns) FROM provider_users WHERE user_id = ?", arguments: [userID])
                .map(Self.providerUser)
            else { return nil }
            try db.execute(sql: "UPDATE refresh_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL", arguments: [now, userID])
            try Self.revokeOAuthAccessTokens(where: "family_id IN (SELECT family_id FROM oauth_families WHERE user_id = ?)", [userID], now: now, db)
            try db.execute(sql: "DELETE FROM oauth_grants WHERE user_id = ?", arguments: [userID])
            try db.execute(sql: "DELETE FROM provider_sessions WHERE user_id = ?", arguments: [userID])
            try db.execute(sql: "DELETE FROM connected_accounts WHERE user_id = ?", arguments: [userID])
            try db.execute(sql: "DELETE FROM connect_flows WHERE user_id = ?", arguments: [userID])
            try Self.record(
                .accountCutOff(AccountCutoff(userID: userID, tenantID: user.tenantID, notBefore: user.tokensNotBefore, cause: forgetNames ? .deleted : .disabled)),
                at: now, db)
            return user
        }
    }

    public func enableProviderUser(id userID: String, now: Double) async throws -> ProviderUserRecord? {
        try await write { db in
            try db.execute(
                sql: "UPDATE provider_users SET disabled = 0, tokens_not_before = max(tokens_not_before, ?) WHERE user_id = ?", arguments: [now, userID])
            guard let user = try Row.fetchOne(db, sql: "SELECT \(Self.providerUserColumns) FROM provider_users WHERE user_id = ?", arguments: [userID])
                .map(Self.providerUser)
            else { return nil }
            try Self.record(.accountCutOff(AccountCutoff(userID: userID, tenantID: user.tenantID, notBefore: user.tokensNotBefore, cause: .enabled)), at: now, db)
            return user
        }
    }

    static let providerUserColumns = "user_id, issuer, subject, tenant_id, email, username, name, first_seen_at, last_seen_at, disabled, tokens_not_before"

    static func providerUser(_ row: Row) -> ProviderUserRecord {
        ProviderUserRecord(
            userID: row["user_id"], issuer: row["issuer"], subject: row["subject"], tenantID: row["tenant_id"], email: row["email"],
            username: row["username"], name: row["name"], firstSeenAt: row["first_seen_at"], lastSeenAt: row["last_seen_at"], disabled: row["disabled"],
            tokensNotBefore: row["tokens_not_before"])
    }
}
