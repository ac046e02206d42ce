import ArgumentParser
import ConfigurationReading
import ConnectedAccounts
import Foundation
import Gateway
import StateSurface

/// `portcullis connections`: the services people connected (`connections`), listed and revoked
/// by an operator.
struct ConnectionsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connections",
        abstract: "List the services people connected, and disconnect one person's.",
        subcommands: [List.self, Revoke.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List connected accounts (one person's, with --user): the connection, the scopes, when connected and last used.")

        @Option(help: "Only this person's: their id (usr_... or ext_...), username, email or a provider's subject.")
        var user: String?

        @Option(help: "With --user: only a person in this tenant.")
        var tenant: String?

        @OptionGroup var storage: UsersCommand.Storage

        func run() async throws {
            let store = try await storage.open()
            let person = try await user.asyncMap { try await PersonLookup(store: store, tenant: tenant).one($0) }
            let accounts = try await store.connectedAccounts(userID: person?.userID).filter { person == nil || $0.tenantID == person?.tenantID }
            if accounts.isEmpty {
                print(person.map { "\($0.described) has connected nothing" } ?? "no connected accounts yet")
                return
            }
            let named = try await PersonLookup(store: store).described(accounts.map { ($0.userID, $0.tenantID) }, known: person)
            for account in accounts {
                let used = account.lastUsedAt.map(OAuthCommand.Clients.day) ?? "never"
                print(
                    "\(named[PersonLookup.key(account.userID, account.tenantID)] ?? account.userID)  \(account.connection)  scope: \(account.scope.isEmpty ? "-" : UsersCommand.shown(account.scope))  connected \(OAuthCommand.Clients.day(account.createdAt))  last used \(used)"
                )
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disconnect one person's account at a connection: the gateway forgets its tokens at once and tells the service (RFC 7009) where it can.")

        @Option(help: "The person: their id (usr_... or ext_...), username, email or a provider's subject.")
        var user: String

        @Option(help: "Only a person in this tenant.")
        var tenant: String?

        @Option(help: "The connection's name (connections[].name).")
        var connection: String

        @OptionGroup var storage: UsersCommand.Storage

        func run() async throws {
            let values = try await ConfigurationValues.load(path: storage.config)
            let configured = try ConnectionsConfiguration(reading: values)
            let keysDirectory = try CommandLineSettings(reading: values).keysDirectory
            let store = try await storage.open()
            let person = try await PersonLookup(store: store, tenant: tenant).one(user)
            // The vault only when the key is there: a revoke never makes a key (its tokens would not open under a new one).
            let hasKey = FileManager.default.fileExists(atPath: keysDirectory + "/" + ConnectionTokenVault.fileName)
            let directory = try ConnectionDirectory(configured, keysDirectory: hasKey ? keysDirectory : nil)
            let service = ConnectedAccountService(directory: directory, store: store, redirectURI: "")
            let owner = ConnectionTokenVault.Owner(userID: person.userID, tenantID: person.tenantID, connection: connection)
            guard let outcome = try await service.disconnect(owner, now: Date().timeIntervalSince1970) else {
                Terminal.error("\(person.described) has no account connected at \(UsersCommand.shown(connection)); `portcullis connections list --user \(person.userID)` lists theirs")
                throw ExitCode(1)
            }
            let told: String =
                switch outcome {
                case .revoked: "the service revoked its tokens too"
                case .notOffered: "the connection names no revocation_endpoint, so the service was not told"
                case .failed(let why): "the service could not be told (\(why)); its tokens are forgotten here all the same"
                }
            print("disconnected: \(person.described) at \(connection); the gateway no longer holds or sends its tokens; \(told)")
        }
    }
}
