import GRDB

extension SQLiteStateSurface: LoginFlowRepository {
    public func insertLoginFlow(_ record: LoginFlowRecord) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO login_flows (state_hash, provider, session_id, nonce, code_verifier, return_to, login_challenge, created_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    record.stateHash, record.provider, record.sessionID, record.nonce, record.codeVerifier, record.returnTo, record.loginChallenge,
                    record.createdAt, record.expiresAt,
                ])
        }
    }

    public func takeLoginFlow(stateHash: String, now: Double) async throws -> LoginFlowRecord? {
        try await write { db in
            // DELETE ... RETURNING in one statement: of two callbacks with one state, one gets the row.
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        DELETE FROM login_flows WHERE state_hash = ?
                        RETURNING state_hash, provider, session_id, nonce, code_verifier, return_to, login_challenge, created_at, expires_at
                        """,
                    arguments: [stateHash])
            else { return nil }
            let record = LoginFlowRecord(
                stateHash: row["state_hash"], provider: row["provider"], sessionID: row["session_id"], nonce: row["nonce"],
                codeVerifier: row["code_verifier"], returnTo: row["return_to"], loginChallenge: row["login_challenge"],
                createdAt: row["created_at"], expiresAt: row["expires_at"])
            return record.expiresAt > now ? record : nil
        }
    }

    public func deleteExpiredLoginFlows(before cutoff: Double) async throws -> Int {
        try await write { db in
            try db.execute(sql: "DELETE FROM login_flows WHERE expires_at < ?", arguments: [cutoff])
            return db.changesCount
        }
    }
}
