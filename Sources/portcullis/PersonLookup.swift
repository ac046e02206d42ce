import ArgumentParser
import StateSurface

/// A person as an administrative command names them: a gateway account, or a user who signed in
/// through a provider.
enum Person {
    case account(UserRecord)
    case provider(ProviderUserRecord)

    /// The gateway's id (`usr_...` or `ext_...`).
    var userID: String {
        switch self {
        case .account(let user): user.id
        case .provider(let user): user.userID
        }
    }

    var tenantID: String {
        switch self {
        case .account(let user): user.tenantID
        case .provider(let user): user.tenantID
        }
    }

    /// How the person is named in what a command prints: the username (or email) and the id.
    var described: String {
        switch self {
        case .account(let user): "\(UsersCommand.shown(user.username)) (\(user.id), tenant \(user.tenantID))"
        case .provider(let user):
            "\(UsersCommand.shown(user.email ?? user.username ?? user.subject)) (\(user.userID), tenant \(UsersCommand.shown(user.tenantID)), through \(UsersCommand.shown(user.issuer)))"
        }
    }
}

/// Finds the one person a command names, by any of: the gateway's id (`usr_...`, `ext_...`), a
/// username, an email address (without regard to case), or a provider's subject (`--issuer`
/// narrows it to one provider), optionally within `--tenant`.
///
/// An administrative command acts on one person only: a name that matches several lists them and
/// does nothing; one that matches nobody says so.
struct PersonLookup {
    let store: any StateStore
    var tenant: String? = nil
    var issuer: String? = nil

    /// Everyone `text` names.
    func matches(_ text: String) async throws -> [Person] {
        let accounts = try await store.users().filter { ($0.id == text || $0.username == text) && (tenant == nil || $0.tenantID == tenant) }
        // Accounts have no issuer: naming one narrows the search to that provider's users.
        let external = try await store.providerUsers(matching: text).filter {
            (tenant == nil || $0.tenantID == tenant) && (issuer == nil || $0.issuer == issuer)
        }
        return (issuer == nil ? accounts.map(Person.account) : []) + external.map(Person.provider)
    }

    /// The person with the gateway's id `userID`, for naming them beside it (`nil`: not found).
    func person(id userID: String, tenantID: String) async throws -> Person? {
        if userID.hasPrefix("ext_") { return try await store.providerUser(id: userID).map(Person.provider) }
        return try await store.user(id: userID, tenantID: tenantID).map(Person.account)
    }

    /// How a listing names each of `people` (`described`, or the id and tenant of one the store no
    /// longer knows), each looked up once; `known` is one found already. Keyed by `key(_:_:)`.
    func described(_ people: [(userID: String, tenantID: String)], known: Person?) async throws -> [String: String] {
        var named: [String: String] = [:]
        for (userID, tenantID) in people where named[Self.key(userID, tenantID)] == nil {
            let found = known?.userID == userID ? known : try await person(id: userID, tenantID: tenantID)
            named[Self.key(userID, tenantID)] = found?.described ?? "\(userID) (tenant \(UsersCommand.shown(tenantID)))"
        }
        return named
    }

    static func key(_ userID: String, _ tenantID: String) -> String { tenantID + " " + userID }

    /// The one person `text` names; otherwise an error naming the candidates (printed as a table).
    func one(_ text: String) async throws -> Person {
        let found = try await matches(text)
        let scope = [tenant.map { "in tenant \($0)" }, issuer.map { "through \($0)" }].compactMap { $0 }.joined(separator: " ")
        guard let person = found.first else {
            throw CLIError(
                "no user matches \(UsersCommand.shown(text))\(scope.isEmpty ? "" : " " + scope): name them by id (usr_... or ext_...), username, email, or a provider's subject; `portcullis users list` lists everyone")
        }
        guard found.count == 1 else {
            UsersCommand.printAccounts(found.compactMap { if case .account(let user) = $0 { user } else { nil } })
            UsersCommand.printProviderUsers(found.compactMap { if case .provider(let user) = $0 { user } else { nil } })
            throw CLIError(
                "\(UsersCommand.shown(text)) names \(found.count) people (listed above); nothing was done. Name one by its id (usr_... or ext_...), or narrow with --tenant or --issuer")
        }
        return person
    }
}

/// `NAME [--tenant T] [--issuer I]`: a person, as `PersonLookup` finds them.
struct PersonName: ParsableArguments {
    @Argument(help: "The person: the gateway's id (usr_... or ext_...), a username, an email address, or a provider's subject.")
    var name: String

    @Option(help: "Only a person in this tenant.")
    var tenant: String?

    @Option(help: "Only a user who signed in through this provider (its issuer URL): for a subject two providers share.")
    var issuer: String?

    func find(in store: any StateStore) async throws -> Person {
        try await PersonLookup(store: store, tenant: tenant, issuer: issuer).one(name)
    }
}
