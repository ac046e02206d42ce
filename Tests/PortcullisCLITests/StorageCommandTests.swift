import Foundation
import PortcullisTestSupport
import StateSurface
import Testing

@Suite("portcullis storage migrate")
struct StorageCommandTests {
    @Test("on a new SQLite file it applies every schema step and says so; a second run applies none")
    func sqlite() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let first = try cli.run(["storage", "migrate"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("applied: v1: sessions") && first.stdout.contains("applied: v3: access changes") && first.stdout.contains("applied: v4: login flows") && first.stdout.contains("applied: v5: provider sessions") && first.stdout.contains("applied: v6: browser sessions") && first.stdout.contains("applied: v7: provider re-checks") && first.stdout.contains("applied: v8: users seen through providers") && first.stdout.contains("applied: v9: the authorization server") && first.stdout.contains("applied: v10: the access tokens") && first.stdout.contains("applied: v11: provider re-checks of agents") && first.stdout.contains("applied: v12: groups of the gateway's own accounts") && first.stdout.contains("applied: v13: connected accounts") && first.stdout.contains("applied: v14: a connected account's refresh") && first.stdout.contains("applied: v15: grants a company's provider made") && first.stdout.contains("applied: v16: the provider's access token") && first.stdout.contains("applied: v17: a URL elicitation per MCP client"))
        #expect(first.stdout.contains("sqlite:data/portcullis.sqlite: schema current (17 steps; 17 applied now)"), "\(first.stdout)")
        let second = try cli.run(["storage", "migrate"])
        #expect(second.status == 0 && second.stdout.contains("(17 steps; 0 applied now)") && !second.stdout.contains("applied:"), "\(second.stdout)")
    }

    @Test("on PostgreSQL (STORAGE_POSTGRES_URL) it migrates the database, names it without the user, and a second run applies none",
          .enabled(if: TestPostgres.enabled, "PostgreSQL is not installed (apt-get install postgresql)"))
    func postgres() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let url = try TestPostgres.shared().createDatabase()
        let first = try cli.run(["storage", "migrate"], environment: ["STORAGE_POSTGRES_URL": url])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("(17 steps; 17 applied now)") && first.stdout.contains("postgresql://127.0.0.1:"), "\(first.stdout)")
        #expect(!first.stdout.contains("portcullis@"))
        let second = try cli.run(["storage", "migrate"], environment: ["STORAGE_POSTGRES_URL": url])
        #expect(second.status == 0 && second.stdout.contains("(17 steps; 0 applied now)"), "\(second.stdout)")
        #expect(!FileManager.default.fileExists(atPath: cli.directory + "/data"), "no SQLite file was made")
    }

    @Test("a role or database PostgreSQL does not have is named at once, in the server's words (not a wait until the deadline), and no password",
          .enabled(if: TestPostgres.enabled, "PostgreSQL is not installed (apt-get install postgresql)"))
    func refusedLogin() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let server = try TestPostgres.shared()
        for (url, said) in [
            ("postgres://nobody_here:not-a-real-secret@127.0.0.1:\(server.port)/postgres", #"role "nobody_here" does not exist"#),
            ("postgres://portcullis:not-a-real-secret@127.0.0.1:\(server.port)/no_such_db", #"database "no_such_db" does not exist"#),
        ] {
            let result = try cli.run(["storage", "migrate"], environment: ["STORAGE_POSTGRES_URL": url])
            #expect(result.status == 2)
            #expect(result.stderr.contains(said) && result.stderr.contains("storage.postgres_url"), "\(result.stderr)")
            #expect(!result.stderr.contains("did not answer"), "the cause, not the deadline")
            #expect(!result.stderr.contains("not-a-real-secret") && !result.stdout.contains("not-a-real-secret"))
        }
    }

    @Test("a role that may not create the tables (a database it does not own, PostgreSQL 15 and newer) is told the privilege it lacks and how to give it",
          .enabled(if: TestPostgres.enabled, "PostgreSQL is not installed (apt-get install postgresql)"))
    func missingPrivilege() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let server = try TestPostgres.shared()
        let database = "not_owned_\(UInt32.random(in: 0...UInt32.max))"
        _ = try server.psql("CREATE DATABASE \(database)")
        _ = try server.psql("DO $$ BEGIN CREATE ROLE guest_writer LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        // Before PostgreSQL 15 every role could create in `public`; take that away as 15 does.
        _ = try server.psql("REVOKE CREATE ON SCHEMA public FROM PUBLIC", database: database)
        let result = try cli.run(["storage", "migrate"], environment: ["STORAGE_POSTGRES_URL": "postgres://guest_writer@127.0.0.1:\(server.port)/\(database)"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("SQLSTATE 42501: permission denied for schema public") && result.stderr.contains("createdb --owner"), "\(result.stderr)")
        _ = try server.psql("DROP DATABASE \(database)")
    }

    @Test("an unreachable PostgreSQL is exit 2 with one sentence naming the database, and no password")
    func unreachable() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let port = try TestPostgres.freePort()
        let result = try cli.run(
            ["storage", "migrate"],
            environment: ["STORAGE_POSTGRES_URL": "postgres://gate:not-a-real-secret@127.0.0.1:\(port)/auth", "STORAGE_POSTGRES_CONNECT_TIMEOUT_SECONDS": "1"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("postgresql://127.0.0.1:\(port)/auth"), "\(result.stderr)")
        #expect(!result.stderr.contains("not-a-real-secret") && !result.stdout.contains("not-a-real-secret"))
    }
}

/// `users list` and `users find` show who came through a provider (issue 54).
@Suite("portcullis users list and find (the real binary)", .serialized)
struct UsersFindTests {
    @Test("users list shows accounts and the users seen through providers (issuer, subject, last email); users find matches an id, a username, a subject or an email in any case, and exits 1 with a sentence when nothing does")
    func listAndFind() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let database = cli.directory + "/users.sqlite"
        let added = try cli.run(["users", "add", "alice", "--tenant", "acme", "--password-stdin", "--database", database], stdin: "alice password 1\n")
        #expect(added.status == 0, "\(added.stderr)")
        var storage = StorageConfiguration()
        storage.sqlitePath = database
        let state = try await StateStores.open(storage)
        try await state.recordProviderUser(
            ProviderUserRecord(
                userID: "ext_JnMGexample", issuer: "https://idp.example.test/realms/acme", subject: "248289761001", tenantID: "acme",
                email: "Ann@Example.com", username: "ann.lee", name: "Ann Lée", firstSeenAt: 1_795_000_000, lastSeenAt: 1_795_000_100))
        let list = try cli.run(["users", "list", "--database", database])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("alice") && list.stdout.contains("usr_"), "\(list.stdout)")
        let external = try #require(list.stdout.split(separator: "\n").first { $0.contains("ext_JnMGexample") }, "\(list.stdout)")
        #expect(external.contains("https://idp.example.test/realms/acme") && external.contains("248289761001") && external.contains("Ann@Example.com") && external.contains("ann.lee"))
        for text in ["ext_JnMGexample", "248289761001", "ann.lee", "ann@EXAMPLE.com"] {
            let found = try cli.run(["users", "find", text, "--database", database])
            #expect(found.status == 0 && found.stdout.contains("ext_JnMGexample") && !found.stdout.contains("alice"), "\(text): \(found.stdout)")
        }
        let byName = try cli.run(["users", "find", "alice", "--database", database])
        #expect(byName.status == 0 && byName.stdout.contains("alice") && !byName.stdout.contains("ext_"), "\(byName.stdout)")
        let none = try cli.run(["users", "find", "nobody@example.com", "--database", database])
        #expect(none.status == 1 && none.stderr.contains("no user matches nobody@example.com") && none.stdout.isEmpty, "\(none.stderr)")
    }
}

/// `portcullis oauth`: the authorization server's clients and grants, listed and revoked (issue 55).
@Suite("portcullis oauth (the real binary)", .serialized)
struct OAuthCommandTests {
    @Test("oauth clients lists the configured and the self-registered clients; oauth grants lists what people allowed (all, or one person's), each person named as users names them; oauth revoke takes the resource with or without its trailing slash; oauth revoke removes a grant and ends its refresh tokens, and says so when there is none; remove-client removes a registration")
    func clientsAndGrants() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let database = cli.directory + "/oauth.sqlite"
        for name in ["alice", "bob"] {
            #expect(try cli.run(["users", "add", name, "--tenant", "acme", "--password-stdin", "--database", database], stdin: "correct horse battery\n").status == 0)
        }
        try "authorization_server:\n  dynamic_registration: true\n  clients:\n    - {client_id: ops-cli, name: Ops CLI, redirect_uris: ['http://127.0.0.1/callback']}\n"
            .write(toFile: cli.directory + "/oauth.yaml", atomically: true, encoding: .utf8)
        let options = ["--config", cli.directory + "/oauth.yaml", "--database", database]
        #expect(try cli.run(["oauth", "grants"] + options).stdout.contains("no grants yet"))
        var storage = StorageConfiguration()
        storage.sqlitePath = database
        let state = try await StateStores.open(storage)
        let alice = try #require(try await state.user(tenantID: "acme", username: "alice")).id
        let now = Date().timeIntervalSince1970
        _ = try await state.insertOAuthClient(
            OAuthClientRecord(clientID: "dyn_agentexample", name: "Agent X", redirectURIs: #"["http://127.0.0.1/cb"]"#, createdAt: now, expiresAt: now + 3_600), unusedLimit: 10, now: now)
        try await state.upsertOAuthGrant(
            OAuthGrantRecord(userID: alice, tenantID: "acme", clientID: "dyn_agentexample", clientName: "Agent X", resource: "https://auth.example.com/mcp/github", scope: "github", createdAt: now, updatedAt: now))
        try await state.insertOAuthFamily(
            OAuthFamilyRecord(familyID: "rtf_x", clientID: "dyn_agentexample", resource: "https://auth.example.com/mcp/github", scope: "github", userID: alice, tenantID: "acme",
                              sessionID: "ses_1", claims: "{}", createdAt: now))
        try await state.insertRefreshToken(
            RefreshTokenRecord(id: "rtk_x", tokenHash: "hx", familyID: "rtf_x", sessionID: "ses_1", userID: alice, tenantID: "acme", createdAt: now, expiresAt: now + 600))
        let clients = try cli.run(["oauth", "clients"] + options)
        #expect(clients.status == 0 && clients.stdout.contains("ops-cli  Ops CLI  (configured)") && clients.stdout.contains("dyn_agentexample  Agent X  (registered itself"), "\(clients.stdout)\(clients.stderr)")
        // The person by their username, as an operator names them; or their id.
        let grants = try cli.run(["oauth", "grants", "--user", "alice"] + options)
        #expect(grants.status == 0 && grants.stdout.contains("dyn_agentexample") && grants.stdout.contains("https://auth.example.com/mcp/github") && grants.stdout.contains("scope: github"), "\(grants.stdout)")
        // Each grant names its person as `users` does: the name, then the id and tenant.
        #expect(grants.stdout.hasPrefix("alice (\(alice), tenant acme)  dyn_agentexample \"Agent X\""), "\(grants.stdout)")
        #expect(try cli.run(["oauth", "grants"] + options).stdout.hasPrefix("alice (\(alice), tenant acme)  dyn_agentexample"))
        #expect(try cli.run(["oauth", "grants", "--user", alice] + options).stdout.contains("dyn_agentexample"))
        let bob = try cli.run(["oauth", "grants", "--user", "bob"] + options)
        #expect(bob.status == 0 && bob.stdout.contains("bob (usr_") && bob.stdout.contains("has granted nothing"), "\(bob.stdout)\(bob.stderr)")
        let nobody = try cli.run(["oauth", "grants", "--user", "carol"] + options)
        #expect(nobody.status != 0 && nobody.stderr.contains("no user matches carol"), "an unknown name says so, not 'granted nothing': \(nobody.stdout)\(nobody.stderr)")
        let missing = try cli.run(["oauth", "revoke", "--user", "alice"] + options)
        #expect(missing.status != 0 && missing.stderr.hasPrefix("portcullis: error: Missing expected argument '--client"), "one Error:, ours: \(missing.stderr)")
        // The resource with a trailing `/` names the same grant.
        let revoke = ["oauth", "revoke", "--user", "alice", "--tenant", "acme", "--client", "dyn_agentexample", "--resource", "https://auth.example.com/mcp/github/"] + options
        let revoked = try cli.run(revoke)
        #expect(revoked.status == 0 && revoked.stdout.contains("revoked"), "\(revoked.stderr)")
        #expect(try await state.refreshToken(hash: "hx")?.revokedAt != nil, "the grant's refresh tokens end with it")
        let again = try cli.run(revoke)
        #expect(again.status == 1 && again.stderr.contains("has no grant to dyn_agentexample"), "\(again.stderr)")
        #expect(try cli.run(["oauth", "remove-client", "dyn_agentexample"] + options).status == 0)
        #expect(!(try cli.run(["oauth", "clients"] + options).stdout.contains("dyn_agentexample")))
        #expect(try cli.run(["oauth", "remove-client", "dyn_nothing"] + options).status == 1)
    }
}

/// `portcullis connections`: the services people connected, listed and revoked by an operator (issue 66).
@Suite("portcullis connections (the real binary)")
struct ConnectionsCommandTests {
    @Test("connections list shows every person's connected accounts (one person's by any of their names), naming them as users does; connections revoke forgets one person's account at one connection and says whether the service was told; an account that is not there is an error")
    func listAndRevoke() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let database = cli.directory + "/portcullis.sqlite"
        for name in ["alice", "bob"] {
            #expect(try cli.run(["users", "add", name, "--tenant", "acme", "--password-stdin", "--database", database], stdin: "correct horse battery\n").status == 0)
        }
        let options = ["--database", database]
        #expect(try cli.run(["connections", "list"] + options).stdout.contains("no connected accounts yet"))
        var storage = StorageConfiguration()
        storage.sqlitePath = database
        let state = try await StateStores.open(storage)
        let alice = try #require(try await state.user(tenantID: "acme", username: "alice")).id
        let now = Date().timeIntervalSince1970
        for connection in ["github", "drive"] {
            try await state.upsertConnectedAccount(
                ConnectedAccountRecord(
                    userID: alice, tenantID: "acme", connection: connection, accessToken: "sealed", refreshToken: nil, scope: "repo", expiresAt: nil, createdAt: now,
                    updatedAt: now))
        }
        let listed = try cli.run(["connections", "list"] + options)
        #expect(listed.status == 0 && listed.stdout.hasPrefix("alice (\(alice), tenant acme)  drive  scope: repo") && listed.stdout.contains("last used never"), "\(listed.stdout)\(listed.stderr)")
        #expect(try cli.run(["connections", "list", "--user", "bob"] + options).stdout.contains("has connected nothing"))
        let revoked = try cli.run(["connections", "revoke", "--user", "alice", "--connection", "github"] + options)
        #expect(revoked.status == 0 && revoked.stdout.contains("disconnected: alice") && revoked.stdout.contains("the service was not told"), "\(revoked.stdout)\(revoked.stderr)")
        #expect(try await state.connectedAccounts(userID: alice).map(\.connection) == ["drive"])
        let again = try cli.run(["connections", "revoke", "--user", "alice", "--connection", "github"] + options)
        #expect(again.status == 1 && again.stderr.contains("has no account connected at github"), "\(again.stderr)")
        await state.shutdown()
    }
}

/// `portcullis users` names a person as an operator knows them (issue 65): by username, email,
/// a provider's subject or the gateway's id, and acts on one person only.
@Suite("portcullis users: naming a person (the real binary)", .serialized)
struct PersonNamingTests {
    static let acme = "https://login.acme.example"
    static let other = "https://idp.other.example"

    @Test("users disable, enable, delete and oauth grants name a person by username, email in any case, a provider's subject (--issuer for one shared by two providers) or the gateway's id; an ambiguous name lists the candidates and changes nothing; an unknown one says so; a provider's user disabled has their grants and provider sessions removed, and delete forgets their names")
    func namingAPerson() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let database = cli.directory + "/people.sqlite"
        let options = ["--database", database]
        for name in ["alice", "sam"] {
            #expect(try cli.run(["users", "add", name, "--tenant", "acme", "--password-stdin"] + options, stdin: "correct horse battery\n").status == 0)
        }
        var storage = StorageConfiguration()
        storage.sqlitePath = database
        let state = try await StateStores.open(storage)
        let now = Date().timeIntervalSince1970
        func provider(_ id: String, issuer: String, subject: String, email: String?, username: String?) -> ProviderUserRecord {
            ProviderUserRecord(userID: id, issuer: issuer, subject: subject, tenantID: "acme", email: email, username: username, name: nil, firstSeenAt: now, lastSeenAt: now)
        }
        try await state.recordProviderUser(provider("ext_smith", issuer: Self.acme, subject: "user-1", email: "Alice.Smith@example.com", username: "asmith"))
        try await state.recordProviderUser(provider("ext_twin", issuer: Self.other, subject: "user-1", email: nil, username: "sam"))
        try await state.upsertOAuthGrant(
            OAuthGrantRecord(
                userID: "ext_smith", tenantID: "acme", clientID: "ops-cli", clientName: "Ops CLI", resource: "https://gw.example/mcp/a", scope: "tools", createdAt: now,
                updatedAt: now))
        let identity = ProviderIdentityRecord(
            provider: "acme", issuer: Self.acme, subject: "user-1", tenantID: "acme", providerSessionID: nil, sealedIDToken: "sealed", sealedRefreshToken: "sealed")
        try await state.saveProviderSession(ProviderSessionRecord(sessionID: "ses_smith", userID: "ext_smith", identity: identity, createdAt: now, expiresAt: now + 3_600))

        // Ambiguous: an account and a provider's user are both "sam"; two providers share the subject "user-1".
        for name in ["sam", "user-1"] {
            let refused = try cli.run(["users", "disable", name] + options)
            #expect(refused.status != 0 && refused.stderr.contains("names 2 people") && refused.stderr.contains("nothing was done"), "\(refused.stderr)")
            #expect(refused.stdout.contains("ext_twin"), "the candidates are listed: \(refused.stdout)")
        }
        #expect(try await state.user(tenantID: "acme", username: "sam")?.disabled == false)
        #expect(try await state.providerUser(id: "ext_twin")?.disabled == false, "nothing was done")
        let unknown = try cli.run(["users", "disable", "carol@example.com"] + options)
        #expect(unknown.status != 0 && unknown.stderr.contains("no user matches carol@example.com"), "\(unknown.stderr)")

        // By email, in another case: the provider's user is cut off.
        let disabled = try cli.run(["users", "disable", "ALICE.SMITH@example.com"] + options)
        #expect(disabled.status == 0 && disabled.stdout.contains("disabled Alice.Smith@example.com (ext_smith"), "\(disabled.stdout)\(disabled.stderr)")
        let smith = try #require(try await state.providerUser(id: "ext_smith"))
        #expect(smith.disabled && smith.tokensNotBefore >= now)
        #expect(try await state.oauthGrants(userID: "ext_smith").isEmpty, "their grants go")
        #expect(try await state.providerSession(sessionID: "ses_smith") == nil, "their provider sessions (and the provider's tokens) go")
        #expect(try cli.run(["users", "list"] + options).stdout.contains("disabled"))
        // By subject, narrowed to one provider; and by the gateway's id.
        #expect(try cli.run(["users", "enable", "user-1", "--issuer", Self.acme] + options).status == 0)
        #expect(try await state.providerUser(id: "ext_smith")?.disabled == false)
        #expect(try cli.run(["users", "disable", "sam", "--issuer", Self.other] + options).status == 0)
        #expect(try await state.providerUser(id: "ext_twin")?.disabled == true)
        #expect(try await state.user(tenantID: "acme", username: "sam")?.disabled == false, "the account sam was not touched")
        let deleted = try cli.run(["users", "delete", "ext_smith"] + options)
        #expect(deleted.status == 0, "\(deleted.stderr)")
        let forgotten = try #require(try await state.providerUser(id: "ext_smith"))
        #expect(forgotten.disabled && forgotten.email == nil && forgotten.username == nil, "a tombstone: names forgotten, still refused")
        #expect(try cli.run(["users", "passwd", "ext_twin", "--password-stdin"] + options, stdin: "another long password\n").stderr.contains("has no password here"))
        // An account by username alone when it is the only one of that name.
        #expect(try cli.run(["users", "disable", "alice"] + options).status == 0)
        #expect(try await state.user(tenantID: "acme", username: "alice")?.disabled == true)
        await state.shutdown()
    }
}
