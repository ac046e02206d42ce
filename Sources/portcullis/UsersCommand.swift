import ArgumentParser
import ConfigurationReading
import Foundation
import Gateway
import JOSE
import Observability
import Runtime
import SecurityGuard
import StateSurface

#if canImport(Glibc)
import Glibc
#endif

/// `portcullis users`: manage accounts in the State Surface.
struct UsersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "Manage user accounts (passwords are stored as scrypt hashes).",
        subcommands: [Add.self, List.self, Find.self, Groups.self, Passwd.self, Disable.self, Enable.self, Delete.self]
    )

    struct Storage: ParsableArguments {
        @Option(help: "Configuration file (YAML). Default: config/portcullis.yaml when it exists.")
        var config: String?

        @Option(help: "SQLite database file (storage.sqlite_path); ignored when storage.postgres_url is set.")
        var database: String?

        func open() async throws -> any StateStore {
            var storage = try StorageConfiguration(reading: try await ConfigurationValues.load(path: config))
            if let database { storage.sqlitePath = database }
            return try await StateStores.open(storage)
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add an account. The password is asked for on the terminal, or read from stdin with --password-stdin; never from the command line."
        )

        @Argument(help: "The username.")
        var username: String

        @Option(help: "The tenant the account belongs to.")
        var tenant: String

        @Option(name: .customLong("group"), help: "A group the account is in (repeat for more); its tokens carry them as `groups`.")
        var groups: [String] = []

        @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input (one line).")
        var passwordStdin = false

        @OptionGroup var storage: Storage

        func run() async throws {
            if let bad = groups.first(where: { !AccountService.isValidGroup($0) }) {
                throw CLIError("the group \(JSONValue.clip(bad)) cannot be used: a group is 1-64 characters of letters, digits and . _ @ + - : /")
            }
            let password = try passwordStdin ? PasswordInput.fromStdin() : PasswordInput.fromTerminal()
            let accounts = AccountService(users: try await storage.open())
            do {
                let user = try await accounts.addUser(username: username, tenantID: tenant, password: password, groups: groups)
                print("added \(user.username) in tenant \(user.tenantID) (\(user.id))" + (user.groups.isEmpty ? "" : ", in \(user.groups.joined(separator: ", "))"))
                let defaultTenant = (try? GatewayConfiguration(reading: try await ConfigurationValues.load(path: storage.config)))?.defaultTenant ?? "default"
                if user.tenantID != defaultTenant {
                    // A login without the tenant gets invalid_credentials, the same as a wrong password (on purpose).
                    Terminal.note("\(user.username) logs in with \"tenant\":\"\(user.tenantID)\" in the body (the default tenant is \(defaultTenant))")
                }
            } catch let error as AccountError {
                throw CLIError(error.message)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the accounts, and the users who signed in through a provider.",
            discussion: """
                A provider's user is listed from their first sign-in through it (the API's or a browser's) with the \
                provider's issuer and subject, and the email and username of their last sign-in; a user seen only \
                through Bearer tokens is not (nothing is written per request).
                """)

        @OptionGroup var storage: Storage

        func run() async throws {
            let store = try await storage.open()
            let (users, external) = (try await store.users(), try await store.providerUsers())
            if users.isEmpty && external.isEmpty {
                print("no accounts yet; add one with `portcullis users add NAME --tenant TENANT`")
                return
            }
            UsersCommand.printAccounts(users)
            UsersCommand.printProviderUsers(external)
        }
    }

    struct Find: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Find a user by the gateway's id, a username, or a provider's subject or email.",
            discussion: """
                Matches accounts by id (usr_...) or username, in every tenant, and users who signed in through a \
                provider by id (ext_...), subject, username, or email without regard to case. Exits 1 when none matches.
                """)

        @Argument(help: "An id (usr_... or ext_...), a username, a provider's subject, or an email address.")
        var text: String

        @OptionGroup var storage: Storage

        func run() async throws {
            let store = try await storage.open()
            let accounts = try await store.users().filter { $0.id == text || $0.username == text }
            let external = try await store.providerUsers(matching: text)
            if accounts.isEmpty && external.isEmpty {
                Terminal.error("no user matches \(JSONValue.clip(text)): try the id (usr_... or ext_...), a username, a provider's subject or an email")
                throw ExitCode(1)
            }
            UsersCommand.printAccounts(accounts)
            UsersCommand.printProviderUsers(external)
        }
    }

    struct Groups: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show an account's groups, or add and remove some; its tokens carry them as `groups`.",
            discussion: """
                A route's rules read them as they read a provider's (`{claim: groups, contains: admins}`). Adding a group \
                reaches the tokens issued from the person's next login, refresh or browser sign-in. Taking one away signs the account out \
                everywhere at once (sessions, tokens, agents' refresh tokens; the account and its grants stay), \
                because the tokens it holds carry the group. A provider's user has the groups their provider sends.
                """)

        @OptionGroup var person: PersonName

        @Option(name: .customLong("add"), help: "A group to put the account in (repeat for more).")
        var adding: [String] = []

        @Option(name: .customLong("remove"), help: "A group to take the account out of (repeat for more).")
        var removing: [String] = []

        @OptionGroup var storage: Storage

        func run() async throws {
            let state = try await storage.open()
            guard case .account(let account) = try await person.find(in: state) else {
                throw CLIError("\(UsersCommand.shown(person.name)) signs in through a provider: their groups are the ones their provider sends")
            }
            guard !adding.isEmpty || !removing.isEmpty else {
                print(account.groups.isEmpty ? "\(account.username) is in no group" : account.groups.joined(separator: "\n"))
                return
            }
            let changed: (user: UserRecord, signedOut: Bool)?
            do {
                changed = try await AccountService(users: state).setGroups(username: account.username, tenantID: account.tenantID, adding: adding, removing: removing)
            } catch let error as AccountError {
                throw CLIError(error.message)
            }
            guard let (user, signedOut) = changed else { throw CLIError("tenant \(account.tenantID) has no user named \(account.username) any more") }
            let now = user.groups.isEmpty ? "no group" : user.groups.joined(separator: ", ")
            if signedOut {
                let ended = try await SessionService(repository: state, configuration: RuntimeConfiguration()).revokeAll(userID: user.id, tenantID: user.tenantID)
                print("\(user.username) in tenant \(user.tenantID) is now in \(now): signed out everywhere (\(ended) session(s) ended), since their tokens carried a group taken away")
            } else if user.groups == account.groups {
                print("nothing changed: \(user.username) in tenant \(user.tenantID) is in \(now)")
            } else {
                print("\(user.username) in tenant \(user.tenantID) is now in \(now): their next sign-in or refresh carries it")
            }
        }
    }

    /// `text` as a terminal may show it: control and format characters (an escape sequence, a
    /// carriage return, a bidi override) each as `?`; a provider's subject is the provider's to choose.
    static func shown(_ text: String) -> String { LogText.printable(text) }

    /// The accounts as a table (nothing for none).
    static func printAccounts(_ users: [UserRecord]) {
        guard !users.isEmpty else { return }
        func column(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count + 1), withPad: " ", startingAt: 0) }
        // The id stays last (scripts take it with `awk '{print $NF}'`); groups are one field (joined by commas).
        print(column("TENANT", 16) + column("USERNAME", 24) + column("STATUS", 10) + column("GROUPS", 20) + "ID")
        for user in users {
            print(column(user.tenantID, 16) + column(user.username, 24) + column(user.disabled ? "disabled" : "enabled", 10)
                + column(user.groups.isEmpty ? "-" : user.groups.joined(separator: ","), 20) + user.id)
        }
    }

    /// The users seen through providers as a table, after a blank line and a heading (nothing for none).
    static func printProviderUsers(_ users: [ProviderUserRecord]) {
        guard !users.isEmpty else { return }
        print("\nsigned in through a provider:")
        func column(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count + 1), withPad: " ", startingAt: 0) }
        print(
            column("TENANT", 16) + column("USERNAME", 20) + column("EMAIL", 28) + column("STATUS", 10) + column("LAST SIGN-IN", 22) + column("ISSUER", 36)
                + column("SUBJECT", 24) + "ID")
        for user in users {
            let seen = Date(timeIntervalSince1970: user.lastSeenAt).formatted(.iso8601.year().month().day().time(includingFractionalSeconds: false))
            print(column(shown(user.tenantID), 16) + column(shown(user.username ?? "-"), 20) + column(shown(user.email ?? "-"), 28)
                + column(user.disabled ? "disabled" : "enabled", 10) + column(seen, 22)
                + column(shown(user.issuer), 36) + column(shown(user.subject), 24) + shown(user.userID))
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disable a person at once, an account or a provider's user: their sessions, tokens, grants, sockets and streams end everywhere.",
            discussion: """
                Name them by id (usr_... or ext_...), username, email or a provider's subject; a name that matches several \
                people lists them and does nothing. Works while `serve` runs: every gateway applies it within a second (their \
                live sockets and MCP streams close with 1008 "account disabled"). Their refresh tokens, their agents' grants \
                and access tokens are revoked. An account's login then fails like a wrong password; a provider's user is \
                refused at sign-in with a page that says so, and every token their provider issues them is refused, until \
                `users enable`.
                """)

        @OptionGroup var person: PersonName
        @OptionGroup var storage: Storage

        func run() async throws {
            let state = try await storage.open()
            let found = try await person.find(in: state)
            let ended = try await UsersCommand.cutOff(found, deleting: false, in: state)
            print("disabled \(found.described): \(ended) session(s) ended; their grants removed; tokens issued before now are refused")
        }
    }

    /// Disables (or deletes) `person`: the account's or the provider user's half (flag, not-before,
    /// refresh tokens, grants) in one transaction, then the Runtime's half; the sessions ended.
    static func cutOff(_ person: Person, deleting: Bool, in state: any StateStore) async throws -> Int {
        switch person {
        case .account(let user):
            let accounts = AccountService(users: state)
            let done = try await deleting
                ? accounts.delete(username: user.username, tenantID: user.tenantID) : accounts.disable(username: user.username, tenantID: user.tenantID)
            guard done != nil else { throw CLIError("tenant \(user.tenantID) has no user named \(user.username) any more") }
        case .provider(let user):
            guard try await state.cutOffProviderUser(id: user.userID, now: SystemClock().now(), forgetNames: deleting) != nil else {
                throw CLIError("no user \(user.userID) any more")
            }
        }
        return try await SessionService(repository: state, configuration: RuntimeConfiguration()).revokeAll(userID: person.userID, tenantID: person.tenantID)
    }

    struct Passwd: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set an account's password (asked on the terminal, or --password-stdin) and sign it out everywhere.",
            discussion: """
                Its sessions and refresh tokens are revoked and its access tokens refused, as `users disable` does, but the \
                account stays enabled (its agents' grants too): it logs in again with the new password. Works while `serve` runs.
                """)

        @OptionGroup var person: PersonName

        @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input (one line).")
        var passwordStdin = false

        @OptionGroup var storage: Storage

        func run() async throws {
            let state = try await storage.open()
            guard case .account(let account) = try await person.find(in: state) else {
                throw CLIError("\(UsersCommand.shown(person.name)) signs in through a provider and has no password here; their provider sets it")
            }
            let password = try passwordStdin ? PasswordInput.fromStdin() : PasswordInput.fromTerminal()
            let changed: UserRecord?
            do {
                changed = try await AccountService(users: state).setPassword(username: account.username, tenantID: account.tenantID, password: password)
            } catch let error as AccountError {
                throw CLIError(error.message)
            }
            guard let user = changed else { throw CLIError("tenant \(account.tenantID) has no user named \(account.username) any more") }
            let ended = try await SessionService(repository: state, configuration: RuntimeConfiguration()).revokeAll(userID: user.id, tenantID: user.tenantID)
            print("set a new password for \(user.username) in tenant \(user.tenantID): \(ended) session(s) ended; tokens issued before now are refused")
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a person: ended everywhere as by `users disable`, their grants removed; an account's username is free for a new account.",
            discussion: """
                An account's id is never used again: a tombstone keeps refusing the tokens issued to it (after a restart \
                too), and a new account with the same username is another user. A provider's user cannot be deleted at \
                their provider from here: their names are forgotten and they stay refused at sign-in (a tombstone) until \
                `users enable ext_...`.
                """)

        @OptionGroup var person: PersonName
        @OptionGroup var storage: Storage

        func run() async throws {
            let state = try await storage.open()
            let found = try await person.find(in: state)
            let ended = try await UsersCommand.cutOff(found, deleting: true, in: state)
            print("deleted \(found.described): \(ended) session(s) ended; their grants removed; their tokens are refused")
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Let a disabled person sign in again (tokens issued before they were disabled stay refused; grants are asked again).")

        @OptionGroup var person: PersonName
        @OptionGroup var storage: Storage

        func run() async throws {
            let state = try await storage.open()
            let found = try await person.find(in: state)
            switch found {
            case .account(let user):
                guard try await AccountService(users: state).enable(username: user.username, tenantID: user.tenantID) != nil else {
                    throw CLIError("tenant \(user.tenantID) has no user named \(user.username) any more")
                }
            case .provider(let user):
                guard try await state.enableProviderUser(id: user.userID, now: SystemClock().now()) != nil else { throw CLIError("no user \(user.userID) any more") }
            }
            print("enabled \(found.described)")
        }
    }
}

/// Reads passwords without ever taking them from argv.
enum PasswordInput {
    /// One line from stdin (a trailing newline is dropped, nothing else).
    static func fromStdin() throws -> String {
        let data = FileHandle.standardInput.readDataToEndOfFile()
        guard var text = String(data: data, encoding: .utf8) else { throw CLIError("the password on stdin is not UTF-8") }
        if text.hasSuffix("\n") { text.removeLast() }
        if text.hasSuffix("\r") { text.removeLast() }
        guard !text.isEmpty else { throw CLIError("no password on stdin") }
        return text
    }

    /// Asks twice on the terminal with echo off.
    static func fromTerminal() throws -> String {
        guard isatty(STDIN_FILENO) == 1 else {
            throw CLIError("no terminal to ask for the password on; pipe it in with --password-stdin")
        }
        let first = try prompt("Password: ")
        let second = try prompt("Password again: ")
        guard first == second else { throw CLIError("the two passwords differ; nothing was added") }
        return first
    }

    private static func prompt(_ text: String) throws -> String {
        FileHandle.standardError.write(Data(text.utf8))
        var original = termios()
        tcgetattr(STDIN_FILENO, &original)
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &original)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        guard let line = readLine(strippingNewline: true) else { throw CLIError("no password was entered") }
        return line
    }
}
