import ArgumentParser
import AuthorizationServer
import ConfigurationReading
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
        static let configuration = CommandConfiguration(abstract: "List what people allowed clients to do at MCP servers (a person's, with --user).")

        @Option(help: "Only this person's grants (the gateway's user id: usr_... or ext_...).")
        var user: String?

        @OptionGroup var storage: UsersCommand.Storage

        func run() async throws {
            let grants = try await storage.open().oauthGrants(userID: user)
            if grants.isEmpty {
                print(user.map { "\($0) has granted nothing" } ?? "no grants yet")
                return
            }
            for grant in grants {
                print("\(grant.userID) (tenant \(grant.tenantID))  \(grant.clientID) \"\(grant.clientName)\"  \(grant.resource)  scope: \(grant.scope.isEmpty ? "-" : grant.scope)  since \(Clients.day(grant.createdAt))")
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a grant: the client's refresh tokens for that person and MCP server end, and the next authorization asks again.",
            discussion: "An access token already issued lives out its lifetime (authorization_server.access_token_lifetime_seconds).")

        @Option(help: "The person (the gateway's user id).")
        var user: String

        @Option(help: "The person's tenant.")
        var tenant: String

        @Option(help: "The client id.")
        var client: String

        @Option(help: "The MCP server's canonical URL (the grant's resource).")
        var resource: String

        @OptionGroup var storage: UsersCommand.Storage

        func run() async throws {
            let removed = try await storage.open().deleteOAuthGrant(userID: user, tenantID: tenant, clientID: client, resource: resource, now: Date().timeIntervalSince1970)
            guard removed > 0 else {
                Terminal.error("no grant of \(user) (tenant \(tenant)) to \(client) at \(resource); `portcullis oauth grants --user \(user)` lists them")
                throw ExitCode(1)
            }
            print("revoked: \(client) no longer acts for \(user) at \(resource)")
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
            let removed = try await storage.open().deleteOAuthClient(id: clientID, now: Date().timeIntervalSince1970)
            guard removed > 0 else {
                Terminal.error("no registered client \(clientID); `portcullis oauth clients` lists them (a configured one goes from authorization_server.clients)")
                throw ExitCode(1)
            }
            print("removed \(clientID), its grants and its refresh tokens")
        }
    }
}
