/// The State Surface's schema history, each step written for both stores.
///
/// SQLite and PostgreSQL apply the same steps in the same order under the same
/// names (GRDB's migrator records them in `grdb_migrations`; PostgreSQL in
/// `portcullis_migrations`). The two sides differ only in types (REAL and
/// INTEGER flags on SQLite, DOUBLE PRECISION, BIGINT and BOOLEAN on PostgreSQL).
/// Never edit a shipped step; add a new one.
struct SchemaMigration: Sendable {
    let name: String
    let sqlite: String
    let postgres: String

    /// The v1 tables, with the column types of one store.
    private static func v1(real: String, integer: String, flag: String, falseValue: String) -> String {
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('anonymous', 'authenticated', 'revoked')),
            user_id TEXT,
            tenant_id TEXT,
            created_at \(real) NOT NULL,
            upgraded_at \(real),
            last_seen_at \(real) NOT NULL,
            expires_at \(real) NOT NULL,
            absolute_expires_at \(real),
            metadata TEXT NOT NULL DEFAULT '{}',
            version \(integer) NOT NULL DEFAULT 1,
            CHECK (state <> 'authenticated' OR (user_id IS NOT NULL AND tenant_id IS NOT NULL))
        );
        CREATE INDEX sessions_by_expiry ON sessions (expires_at);
        CREATE INDEX sessions_by_owner ON sessions (tenant_id, user_id);

        CREATE TABLE executions (
            id TEXT PRIMARY KEY NOT NULL,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            intent_type TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('accepted', 'running', 'completed', 'failed')),
            idempotency_key TEXT,
            payload TEXT NOT NULL,
            result TEXT,
            error TEXT,
            created_at \(real) NOT NULL,
            updated_at \(real) NOT NULL,
            UNIQUE (session_id, idempotency_key)
        );

        CREATE TABLE users (
            id TEXT PRIMARY KEY NOT NULL,
            tenant_id TEXT NOT NULL,
            username TEXT NOT NULL,
            password_hash TEXT NOT NULL,
            disabled \(flag) NOT NULL DEFAULT \(falseValue),
            created_at \(real) NOT NULL,
            UNIQUE (tenant_id, username)
        );

        CREATE TABLE refresh_tokens (
            id TEXT PRIMARY KEY NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            family_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            created_at \(real) NOT NULL,
            expires_at \(real) NOT NULL,
            used_at \(real),
            revoked_at \(real)
        );
        CREATE INDEX refresh_tokens_by_family ON refresh_tokens (family_id);
        CREATE INDEX refresh_tokens_by_session ON refresh_tokens (session_id);

        CREATE TABLE revoked_tokens (
            jti TEXT PRIMARY KEY NOT NULL,
            expires_at \(real) NOT NULL,
            revoked_at \(real) NOT NULL
        );
        """
    }

    static let all: [SchemaMigration] = [
        SchemaMigration(
            name: "v1: sessions, executions, users, refresh tokens, revoked tokens",
            sqlite: v1(real: "REAL", integer: "INTEGER", flag: "INTEGER", falseValue: "0"),
            postgres: v1(real: "DOUBLE PRECISION", integer: "BIGINT", flag: "BOOLEAN", falseValue: "FALSE")),
        SchemaMigration(
            name: "v2: account not-before",
            sqlite: """
                ALTER TABLE users ADD COLUMN tokens_not_before REAL NOT NULL DEFAULT 0;
                CREATE INDEX users_by_not_before ON users (tokens_not_before);
                """,
            postgres: """
                ALTER TABLE users ADD COLUMN tokens_not_before DOUBLE PRECISION NOT NULL DEFAULT 0;
                CREATE INDEX users_by_not_before ON users (tokens_not_before);
                """),
        SchemaMigration(
            name: "v3: access changes",
            sqlite: """
                CREATE TABLE access_changes (
                    version INTEGER PRIMARY KEY AUTOINCREMENT,
                    kind TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    tenant_id TEXT,
                    until REAL,
                    at REAL NOT NULL
                );
                CREATE INDEX access_changes_by_time ON access_changes (at);
                """,
            postgres: """
                CREATE TABLE access_changes (
                    version BIGSERIAL PRIMARY KEY,
                    kind TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    tenant_id TEXT,
                    until DOUBLE PRECISION,
                    at DOUBLE PRECISION NOT NULL
                );
                CREATE INDEX access_changes_by_time ON access_changes (at);
                """),
        SchemaMigration(
            name: "v4: login flows",
            sqlite: loginFlows(real: "REAL"),
            postgres: loginFlows(real: "DOUBLE PRECISION")),
        SchemaMigration(
            name: "v5: provider sessions",
            sqlite: providerSessions(real: "REAL"),
            postgres: providerSessions(real: "DOUBLE PRECISION")),
        SchemaMigration(
            name: "v6: browser sessions",
            sqlite: browserSessions(real: "REAL"),
            postgres: browserSessions(real: "DOUBLE PRECISION")),
        SchemaMigration(
            name: "v7: provider re-checks of browser sessions",
            sqlite: """
                ALTER TABLE provider_sessions ADD COLUMN recheck_at REAL;
                CREATE INDEX provider_sessions_by_recheck ON provider_sessions (recheck_at);
                """,
            postgres: """
                ALTER TABLE provider_sessions ADD COLUMN recheck_at DOUBLE PRECISION;
                CREATE INDEX provider_sessions_by_recheck ON provider_sessions (recheck_at);
                """),
        SchemaMigration(
            name: "v8: users seen through providers",
            sqlite: providerUsers(real: "REAL"),
            postgres: providerUsers(real: "DOUBLE PRECISION")),
        SchemaMigration(
            name: "v9: the authorization server's codes, consents, token families and registered clients",
            sqlite: authorizationServer(real: "REAL"),
            postgres: authorizationServer(real: "DOUBLE PRECISION")),
        SchemaMigration(
            name: "v10: the access tokens the authorization server issued, by family and session",
            sqlite: oauthAccessTokens(real: "REAL"),
            postgres: oauthAccessTokens(real: "DOUBLE PRECISION")),
        SchemaMigration(
            name: "v11: provider re-checks of agents' use, bounded for a failing provider; provider users disabled by the operator",
            sqlite: """
                ALTER TABLE provider_sessions ADD COLUMN recheck_failing_since REAL;
                ALTER TABLE provider_sessions ADD COLUMN recheck_failed_at REAL;
                ALTER TABLE provider_sessions ADD COLUMN agent_used_at REAL;
                ALTER TABLE provider_users ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE provider_users ADD COLUMN tokens_not_before REAL NOT NULL DEFAULT 0;
                """,
            postgres: """
                ALTER TABLE provider_sessions ADD COLUMN recheck_failing_since DOUBLE PRECISION;
                ALTER TABLE provider_sessions ADD COLUMN recheck_failed_at DOUBLE PRECISION;
                ALTER TABLE provider_sessions ADD COLUMN agent_used_at DOUBLE PRECISION;
                ALTER TABLE provider_users ADD COLUMN disabled BOOLEAN NOT NULL DEFAULT FALSE;
                ALTER TABLE provider_users ADD COLUMN tokens_not_before DOUBLE PRECISION NOT NULL DEFAULT 0;
                """),
        SchemaMigration(
            name: "v12: groups of the gateway's own accounts; what an account's last cut-off was for",
            sqlite: """
                ALTER TABLE users ADD COLUMN group_names TEXT NOT NULL DEFAULT '';
                ALTER TABLE users ADD COLUMN cutoff_cause TEXT;
                """,
            postgres: """
                ALTER TABLE users ADD COLUMN group_names TEXT NOT NULL DEFAULT '';
                ALTER TABLE users ADD COLUMN cutoff_cause TEXT;
                """),
        SchemaMigration(
            name: "v13: connected accounts and their connecting in flight",
            sqlite: connections(real: "REAL"),
            postgres: connections(real: "DOUBLE PRECISION")),
        SchemaMigration(
            name: "v14: a connected account's refresh, claimed by one instance at a time; the URL elicitations that send a person to connect",
            sqlite: connectionRefreshAndElicitations(real: "REAL"),
            postgres: connectionRefreshAndElicitations(real: "DOUBLE PRECISION")),
        SchemaMigration(
            name: "v15: grants a company's provider made (identity assertion grants), which never stand for a person's consent",
            sqlite: "ALTER TABLE oauth_grants ADD COLUMN by_assertion INTEGER NOT NULL DEFAULT 0;",
            postgres: "ALTER TABLE oauth_grants ADD COLUMN by_assertion BOOLEAN NOT NULL DEFAULT FALSE;"),
        SchemaMigration(
            name: "v16: the provider's access token of a sign-in (sealed), the subject of a token exchange; a person's provider sessions found by user",
            sqlite: providerAccessTokens(real: "REAL"),
            postgres: providerAccessTokens(real: "DOUBLE PRECISION")),
        SchemaMigration(
            name: "v17: a URL elicitation per MCP client, so that its completion is told to the client it was given to",
            sqlite: elicitationsByClient,
            postgres: elicitationsByClient),
    ]

    /// The OAuth client a URL elicitation was given to (`''` for a token that names none), one live
    /// elicitation per person, connection and client.
    static let elicitationsByClient = """
        ALTER TABLE connect_elicitations ADD COLUMN client_id TEXT NOT NULL DEFAULT '';
        DROP INDEX connect_elicitations_by_person;
        CREATE UNIQUE INDEX connect_elicitations_by_client ON connect_elicitations (user_id, tenant_id, connection, client_id);
        """

    /// The provider's access token beside its refresh token, on the login code that carries a
    /// sign-in to its session and on the session, with when it expires.
    static func providerAccessTokens(real: String) -> String {
        """
        ALTER TABLE login_codes ADD COLUMN access_token TEXT;
        ALTER TABLE login_codes ADD COLUMN access_token_expires_at \(real);
        ALTER TABLE provider_sessions ADD COLUMN access_token TEXT;
        ALTER TABLE provider_sessions ADD COLUMN access_token_expires_at \(real);
        CREATE INDEX provider_sessions_by_user ON provider_sessions (user_id);
        """
    }

    /// Who holds a connected account's refresh now, and the URL elicitations an MCP client was
    /// given to send its person to the connect page (one live per person and connection, bound to them).
    static func connectionRefreshAndElicitations(real: String) -> String {
        """
        ALTER TABLE connected_accounts ADD COLUMN refresh_claimed_until \(real);
        CREATE TABLE connect_elicitations (
            id TEXT PRIMARY KEY NOT NULL,
            connection TEXT NOT NULL,
            user_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            created_at \(real) NOT NULL,
            expires_at \(real) NOT NULL
        );
        CREATE UNIQUE INDEX connect_elicitations_by_person ON connect_elicitations (user_id, tenant_id, connection);
        CREATE INDEX connect_elicitations_by_expiry ON connect_elicitations (expires_at);
        """
    }

    /// The services people connected (their tokens sealed) and the connect flows between the
    /// redirect to a service and its callback.
    static func connections(real: String) -> String {
        """
        CREATE TABLE connect_flows (
            state_hash TEXT PRIMARY KEY NOT NULL,
            connection TEXT NOT NULL,
            user_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            cookie_hash TEXT NOT NULL,
            code_verifier TEXT NOT NULL,
            return_to TEXT NOT NULL,
            created_at \(real) NOT NULL,
            expires_at \(real) NOT NULL
        );
        CREATE INDEX connect_flows_by_expiry ON connect_flows (expires_at);

        CREATE TABLE connected_accounts (
            user_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            connection TEXT NOT NULL,
            access_token TEXT NOT NULL,
            refresh_token TEXT,
            scope TEXT NOT NULL,
            expires_at \(real),
            created_at \(real) NOT NULL,
            updated_at \(real) NOT NULL,
            last_used_at \(real),
            PRIMARY KEY (user_id, tenant_id, connection)
        );
        """
    }

    /// The access tokens issued for MCP resources, with their family and the person's session:
    /// a family revoked, a consent withdrawn or a session ended revokes its live tokens at once
    /// (`revoked_tokens`, and the access-change feed), so no agent keeps access for their lifetime.
    static func oauthAccessTokens(real: String) -> String {
        """
        CREATE TABLE oauth_access_tokens (
            token_id TEXT PRIMARY KEY NOT NULL,
            family_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            expires_at \(real) NOT NULL
        );
        CREATE INDEX oauth_access_tokens_by_family ON oauth_access_tokens (family_id);
        CREATE INDEX oauth_access_tokens_by_session ON oauth_access_tokens (session_id);
        CREATE INDEX oauth_access_tokens_by_expiry ON oauth_access_tokens (expires_at);
        ALTER TABLE oauth_grants ADD COLUMN last_used_at \(real);
        """
    }

    /// The authorization server's codes (by hash), the consents people gave, the refresh token
    /// families it started (their tokens are `refresh_tokens` rows), and the clients that
    /// registered themselves (RFC 7591).
    static func authorizationServer(real: String) -> String {
        """
        CREATE TABLE oauth_codes (
            code_hash TEXT PRIMARY KEY NOT NULL,
            client_id TEXT NOT NULL,
            redirect_uri TEXT NOT NULL,
            code_challenge TEXT NOT NULL,
            resource TEXT NOT NULL,
            scope TEXT NOT NULL,
            user_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            claims TEXT NOT NULL,
            created_at \(real) NOT NULL,
            expires_at \(real) NOT NULL,
            used_at \(real),
            family_id TEXT,
            access_token_id TEXT,
            reused_at \(real)
        );
        CREATE INDEX oauth_codes_by_expiry ON oauth_codes (expires_at);
        CREATE TABLE oauth_grants (
            user_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            client_id TEXT NOT NULL,
            client_name TEXT NOT NULL,
            resource TEXT NOT NULL,
            scope TEXT NOT NULL,
            created_at \(real) NOT NULL,
            updated_at \(real) NOT NULL,
            PRIMARY KEY (user_id, tenant_id, client_id, resource)
        );
        CREATE TABLE oauth_families (
            family_id TEXT PRIMARY KEY NOT NULL,
            client_id TEXT NOT NULL,
            resource TEXT NOT NULL,
            scope TEXT NOT NULL,
            user_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            claims TEXT NOT NULL,
            created_at \(real) NOT NULL
        );
        CREATE INDEX oauth_families_by_grant ON oauth_families (user_id, tenant_id, client_id, resource);
        CREATE TABLE oauth_clients (
            client_id TEXT PRIMARY KEY NOT NULL,
            name TEXT NOT NULL,
            redirect_uris TEXT NOT NULL,
            created_at \(real) NOT NULL,
            expires_at \(real) NOT NULL
        );
        CREATE INDEX oauth_clients_by_expiry ON oauth_clients (expires_at);
        """
    }

    /// Who signed in through a provider, by the gateway's id (`users list`, `users find`).
    static func providerUsers(real: String) -> String {
        """
        CREATE TABLE provider_users (
            user_id TEXT PRIMARY KEY NOT NULL,
            issuer TEXT NOT NULL,
            subject TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            email TEXT,
            username TEXT,
            name TEXT,
            first_seen_at \(real) NOT NULL,
            last_seen_at \(real) NOT NULL
        );
        CREATE INDEX provider_users_by_subject ON provider_users (subject);
        CREATE INDEX provider_users_by_username ON provider_users (username);
        CREATE INDEX provider_users_by_email ON provider_users (lower(email));
        """
    }

    /// Browser sign-ins, by the hash of their cookie.
    static func browserSessions(real: String) -> String {
        """
        CREATE TABLE browser_sessions (
            cookie_hash TEXT PRIMARY KEY NOT NULL,
            session_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            issuer TEXT,
            subject TEXT,
            provider TEXT,
            claims TEXT NOT NULL,
            created_at \(real) NOT NULL,
            last_seen_at \(real) NOT NULL,
            expires_at \(real) NOT NULL
        );
        CREATE INDEX browser_sessions_by_session ON browser_sessions (session_id);
        CREATE INDEX browser_sessions_by_expiry ON browser_sessions (expires_at);
        CREATE INDEX browser_sessions_by_last_seen ON browser_sessions (last_seen_at);
        """
    }

    /// Sign-ins through a provider between start and callback, by the hash of their state.
    static func loginFlows(real: String) -> String {
        """
        CREATE TABLE login_flows (
            state_hash TEXT PRIMARY KEY NOT NULL,
            provider TEXT NOT NULL,
            session_id TEXT NOT NULL,
            nonce TEXT NOT NULL,
            code_verifier TEXT NOT NULL,
            return_to TEXT NOT NULL,
            login_challenge TEXT NOT NULL,
            created_at \(real) NOT NULL,
            expires_at \(real) NOT NULL
        );
        CREATE INDEX login_flows_by_expiry ON login_flows (expires_at);
        """
    }

    /// Login codes between callback and completion, the sessions a provider sign-in made, the
    /// access tokens issued to them, and the ids of logout tokens already used.
    static func providerSessions(real: String) -> String {
        """
        CREATE TABLE login_codes (
            code_hash TEXT PRIMARY KEY NOT NULL,
            session_id TEXT NOT NULL,
            login_challenge TEXT NOT NULL,
            provider TEXT NOT NULL,
            issuer TEXT NOT NULL,
            subject TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            provider_sid TEXT,
            id_token TEXT NOT NULL,
            refresh_token TEXT,
            created_at \(real) NOT NULL,
            expires_at \(real) NOT NULL
        );
        CREATE INDEX login_codes_by_expiry ON login_codes (expires_at);

        CREATE TABLE provider_sessions (
            session_id TEXT PRIMARY KEY NOT NULL,
            user_id TEXT NOT NULL,
            provider TEXT NOT NULL,
            issuer TEXT NOT NULL,
            subject TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            provider_sid TEXT,
            id_token TEXT NOT NULL,
            refresh_token TEXT,
            created_at \(real) NOT NULL,
            expires_at \(real) NOT NULL
        );
        CREATE INDEX provider_sessions_by_sid ON provider_sessions (issuer, provider_sid);
        CREATE INDEX provider_sessions_by_subject ON provider_sessions (issuer, subject);
        CREATE INDEX provider_sessions_by_expiry ON provider_sessions (expires_at);

        CREATE TABLE session_access_tokens (
            token_id TEXT PRIMARY KEY NOT NULL,
            session_id TEXT NOT NULL,
            expires_at \(real) NOT NULL
        );
        CREATE INDEX session_access_tokens_by_session ON session_access_tokens (session_id);
        CREATE INDEX session_access_tokens_by_expiry ON session_access_tokens (expires_at);

        CREATE TABLE logout_token_ids (
            id TEXT PRIMARY KEY NOT NULL,
            expires_at \(real) NOT NULL
        );
        CREATE INDEX logout_token_ids_by_expiry ON logout_token_ids (expires_at);
        """
    }
}
