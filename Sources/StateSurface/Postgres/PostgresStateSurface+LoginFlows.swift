import PostgresNIO

extension PostgresStateSurface: LoginFlowRepository {
    public func insertLoginFlow(_ record: LoginFlowRecord) async throws {
        _ = try await rows(
            """
            INSERT INTO login_flows (state_hash, provider, session_id, nonce, code_verifier, return_to, login_challenge, created_at, expires_at)
            VALUES (\(record.stateHash), \(record.provider), \(record.sessionID), \(record.nonce), \(record.codeVerifier), \(record.returnTo),
                    \(record.loginChallenge), \(record.createdAt), \(record.expiresAt))
            """)
    }

    public func takeLoginFlow(stateHash: String, now: Double) async throws -> LoginFlowRecord? {
        // DELETE ... RETURNING in one statement: of two callbacks with one state (on any instance), one gets the row.
        let found = try await rows(
            """
            DELETE FROM login_flows WHERE state_hash = \(stateHash)
            RETURNING state_hash, provider, session_id, nonce, code_verifier, return_to, login_challenge, created_at, expires_at
            """)
        guard let row = found.first else { return nil }
        let (hash, provider, session, nonce, verifier, returnTo, challenge, createdAt, expiresAt) = try row.decode(
            (String, String, String, String, String, String, String, Double, Double).self)
        let record = LoginFlowRecord(
            stateHash: hash, provider: provider, sessionID: session, nonce: nonce, codeVerifier: verifier, returnTo: returnTo,
            loginChallenge: challenge, createdAt: createdAt, expiresAt: expiresAt)
        return record.expiresAt > now ? record : nil
    }

    public func deleteExpiredLoginFlows(before cutoff: Double) async throws -> Int {
        try await rows("DELETE FROM login_flows WHERE expires_at < \(cutoff) RETURNING 1").count
    }
}
