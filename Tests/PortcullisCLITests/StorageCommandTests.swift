import Foundation
import PortcullisTestSupport
import Testing

@Suite("portcullis storage migrate")
struct StorageCommandTests {
    @Test("on a new SQLite file it applies every schema step and says so; a second run applies none")
    func sqlite() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let first = try cli.run(["storage", "migrate"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("applied: v1: sessions") && first.stdout.contains("applied: v3: access changes") && first.stdout.contains("applied: v4: login flows") && first.stdout.contains("applied: v5: provider sessions") && first.stdout.contains("applied: v6: browser sessions") && first.stdout.contains("applied: v7: provider re-checks"))
        #expect(first.stdout.contains("sqlite:data/portcullis.sqlite: schema current (7 steps; 7 applied now)"), "\(first.stdout)")
        let second = try cli.run(["storage", "migrate"])
        #expect(second.status == 0 && second.stdout.contains("(7 steps; 0 applied now)") && !second.stdout.contains("applied:"), "\(second.stdout)")
    }

    @Test("on PostgreSQL (STORAGE_POSTGRES_URL) it migrates the database, names it without the user, and a second run applies none",
          .enabled(if: TestPostgres.enabled, "PostgreSQL is not installed (apt-get install postgresql)"))
    func postgres() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let url = try TestPostgres.shared().createDatabase()
        let first = try cli.run(["storage", "migrate"], environment: ["STORAGE_POSTGRES_URL": url])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("(7 steps; 7 applied now)") && first.stdout.contains("postgresql://127.0.0.1:"), "\(first.stdout)")
        #expect(!first.stdout.contains("portcullis@"))
        let second = try cli.run(["storage", "migrate"], environment: ["STORAGE_POSTGRES_URL": url])
        #expect(second.status == 0 && second.stdout.contains("(7 steps; 0 applied now)"), "\(second.stdout)")
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
