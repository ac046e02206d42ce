import Logging
import Resilience

/// The whole State Surface as one value: sessions, executions, accounts and credentials.
///
/// `SQLiteStateSurface` (one file, the embedded default) and `PostgresStateSurface`
/// (one database shared by several gateways and Runtimes) implement it with the
/// same atomic guarantees; callers never know which one they hold.
public protocol StateStore: SessionRepository, ExecutionRepository, UserRepository, CredentialRepository, LoginFlowRepository, ProviderSessionRepository, ProviderUserRepository, BrowserSessionRepository, OAuthRepository, ConnectionRepository, AccessChangeFeed {
    /// What to call the store in logs, errors and readiness: the SQLite file, or the
    /// database as `postgresql://host:port/name` (never a user or a password).
    var name: String { get }
    /// The circuit of a store reached over the network, open while it cannot be reached
    /// (`nil` for the SQLite file: a local file has no outage to wait out).
    var outageCircuit: DependencyCircuit? { get }
    /// Closes the store's connections; later calls fail.
    func shutdown() async
}

extension SQLiteStateSurface: StateStore {
    public var name: String { "sqlite:\(path)" }

    public var outageCircuit: DependencyCircuit? { nil }

    /// GRDB closes the pool when the last reference goes; nothing to wait for.
    public func shutdown() async {}
}

extension StateStore {
    /// Runs `body` (a server, until it stops), then closes the store, whether `body` returned or threw.
    public func closing<T>(after body: () async throws -> T) async throws -> T {
        do {
            let value = try await body()
            await shutdown()
            return value
        } catch {
            await shutdown()
            throw error
        }
    }
}

/// Opens the State Surface the configuration names.
public enum StateStores {
    /// Opens the SQLite file or connects to PostgreSQL, applying the schema's
    /// pending migrations first (one process at a time on PostgreSQL).
    ///
    /// - Throws: `StateSurfaceError.unavailable` naming the store when it cannot be opened.
    public static func open(_ configuration: StorageConfiguration, logger: Logger = Logger(label: "portcullis.state")) async throws -> any StateStore {
        if let postgres = configuration.postgres {
            return try await PostgresStateSurface(settings: postgres, logger: logger)
        }
        return try SQLiteStateSurface(path: configuration.sqlitePath, busyTimeout: configuration.busyTimeout)
    }

    /// Brings the store's schema up to date and says what that took.
    public static func migrate(_ configuration: StorageConfiguration, logger: Logger = Logger(label: "portcullis.state")) async throws -> MigrationReport {
        if let postgres = configuration.postgres {
            let store = try await PostgresStateSurface(settings: postgres, logger: logger, migrate: false)
            do {
                let applied = try await store.migrateSchema()
                let all = try await store.appliedMigrations()
                await store.shutdown()
                return MigrationReport(store: store.name, appliedNow: applied, applied: all)
            } catch {
                await store.shutdown()
                throw error
            }
        }
        let before = try SQLiteStateSurface.appliedMigrations(atPath: configuration.sqlitePath)
        let store = try SQLiteStateSurface(path: configuration.sqlitePath, busyTimeout: configuration.busyTimeout)
        let all = try await store.appliedMigrations()
        return MigrationReport(store: store.name, appliedNow: all.filter { !before.contains($0) }, applied: all)
    }
}

/// What `StateStores.migrate` did.
public struct MigrationReport: Sendable, Equatable {
    /// The store, named as in `StateStore.name`.
    public var store: String
    /// The steps applied by this call, in order.
    public var appliedNow: [String]
    /// Every step the store has, in order.
    public var applied: [String]
}

extension StateStore {
    /// Forgets every sign-in record past its expiry: flows, login codes, provider sessions (and
    /// with them the sealed provider tokens), session access-token ids and logout-token ids.
    /// Returns how many rows went.
    @discardableResult
    public func deleteExpiredSignIns(before cutoff: Double) async throws -> Int {
        try await deleteExpiredLoginFlows(before: cutoff) + deleteExpiredProviderSignIns(before: cutoff) + deleteExpiredOAuthCodes(before: cutoff)
            + deleteExpiredConnectFlows(before: cutoff)
    }
}
