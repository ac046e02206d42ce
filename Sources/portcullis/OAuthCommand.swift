import ArgumentParser
import AuthorizationServer
import ConfigurationReading
import EdgeHTTP
import Foundation
import Gateway
import JOSE
import StateSurface

/// `portcullis oauth`: the authorization server's clients and the access people granted them.
struct OAuthCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "oauth",
        abstract: "List the authorization server's clients and grants, and revoke them.",
        subcommands: [Clients.self, Grants.self, Revoke.self, RemoveClient.self]
    )

    struct Clients: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the clients: those the configuration registers (authorization_server.clients) and those that registered themselves.")

        @OptionGroup var storage: UsersCommand.Storage

        func run() async throws {
            let settings = try AuthorizationServerSettings(reading: try await ConfigurationValues.load(path: storage.config))
            let registered = try await storage.open().oauthClients(now: Date().timeIntervalSince1970)
            if settings.clients.isEmpty && registered.isEmpty {
                print("no clients; register one under authorization_server.clients, or turn on authorization_server.dynamic_registration")
                return
            }
            for client in settings.clients {
                print("\(client.clientID)  \(client.name)  (configured)  redirect_uris: \(client.redirectURIs.joined(separator: " "))")
            }
            for record in registered {
                let uris = RegisteredClient(record)?.redirectURIs.joined(separator: " ") ?? "?"
                print("\(record.clientID)  \(record.name)  (registered itself \(Self.day(record.createdAt)), expires \(Self.day(record.expiresAt)))  redirect_uris: \(uris)")
            }
        }

        static func day(_ seconds: Double) -> String {
            ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: seconds))
        }
    }

    struct Grants: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List what people allowed clients to do at MCP servers (one person's, with --user).")

        @Option(help: "Only this person's grants: their id (usr_... or ext_...), username, email or a provider's subject.")
        var user: String?

        @Option(help: "With --user: only a person in this tenant.")
        var tenant: String?

        @OptionGroup var storage: UsersCommand.Storage

        func run() async throws {
            let store = try await storage.open()
            let person = try await user.asyncMap { try await PersonLookup(store: store, tenant: tenant).one($0) }
            let grants = try await store.oauthGrants(userID: person?.userID).filter { person == nil || $0.tenantID == person?.tenantID }
            if grants.isEmpty {
                print(person.map { "\($0.described) has granted nothing" } ?? "no grants yet")
                return
            }
            // Each person as `users` names them (name, id, tenant).
            let named = try await PersonLookup(store: store).described(grants.map { ($0.userID, $0.tenantID) }, known: person)
            for grant in grants {
                print(
                    "\(named[PersonLookup.key(grant.userID, grant.tenantID)] ?? grant.userID)  \(grant.clientID) \"\(UsersCommand.shown(grant.clientName))\"  \(grant.resource)  scope: \(grant.scope.isEmpty ? "-" : grant.scope)  since \(Clients.day(grant.createdAt))\(grant.byAssertion ? "  (by the provider's assertion)" : "")"
                )
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a grant at once: the client's refresh and access tokens for that person and MCP server end now, and the next authorization asks again.",
            discussion: """
                The access tokens already issued under the grant are refused from now on, on every instance within a \
                second, and the agent's open MCP streams close. To end everything a person holds, use `users disable`.
                """)

        @Option(help: "The person: their id (usr_... or ext_...), username, email or a provider's subject.")
        var user: String

        @Option(help: "Only a person in this tenant.")
        var tenant: String?

        @Option(help: "The client id.")
        var client: String

        @Option(help: "The MCP server's canonical URL (the grant's resource, as `oauth grants` lists it; a trailing / is ignored).")
        var resource: String

        @OptionGroup var storage: UsersCommand.Storage

        func run() async throws {
            let store = try await storage.open()
            let person = try await PersonLookup(store: store, tenant: tenant).one(user)
            // The resource as the grant holds it: the URL as typed, else the one grant it names with its trailing `/` taken or added.
            let theirs = try await store.oauthGrants(userID: person.userID).filter { $0.tenantID == person.tenantID && $0.clientID == client }
            let alike = theirs.filter { $0.resource.trimmingTrailingSlash == self.resource.trimmingTrailingSlash }
            let resource = theirs.contains { $0.resource == self.resource } || alike.count != 1 ? self.resource : alike[0].resource
            let removed = try await store.deleteOAuthGrant(
                userID: person.userID, tenantID: person.tenantID, clientID: client, resource: resource, now: Date().timeIntervalSince1970)
            guard removed > 0 else {
                Terminal.error("\(person.described) has no grant to \(client) at \(resource); `portcullis oauth grants --user \(person.userID)` lists theirs")
                throw ExitCode(1)
            }
            // Every instance logs it (the tokens it revoked are in the feed already).
            try? await store.recordAccessChange(
                .administrativeAction(AdministrativeAction(.grantRevoked, clientID: client, userID: person.userID, tenantID: person.tenantID, resource: resource)),
                now: Date().timeIntervalSince1970)
            print("revoked: \(client) no longer acts for \(person.described) at \(resource)")
        }
    }

    struct RemoveClient: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove-client",
            abstract: "Remove a client that registered itself, its grants and its refresh tokens (a configured one is removed from the configuration).")

        @Argument(help: "The client id (dyn_...).")
        var clientID: String

        @OptionGroup var storage: UsersCommand.Storage

        func run() async throws {
            let store = try await storage.open()
            let removed = try await store.deleteOAuthClient(id: clientID, now: Date().timeIntervalSince1970)
            guard removed > 0 else {
                Terminal.error("no registered client \(clientID); `portcullis oauth clients` lists them (a configured one goes from authorization_server.clients)")
                throw ExitCode(1)
            }
            try? await store.recordAccessChange(.administrativeAction(AdministrativeAction(.clientRemoved, clientID: clientID)), now: Date().timeIntervalSince1970)
            print("removed \(clientID), its grants and its refresh tokens")
        }
    }
}
