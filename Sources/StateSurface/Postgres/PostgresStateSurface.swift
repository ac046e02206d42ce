import Foundation
import Logging
import NIOSSL
import PostgresNIO
import Resilience
import RuntimeAPI
import Synchronization
import Traces

/// The State Surface on PostgreSQL, shared by several gateways and Runtimes.
///
/// Every write is one transaction with the same guarantees as the SQLite store:
/// the upgrade is a compare-and-set on the row, limits on an owner's live
/// sessions are counted under a transaction-scoped advisory lock on that owner
/// (so concurrent writers through different instances cannot exceed them),
/// refresh rotation locks the token's row (`FOR UPDATE`), and idempotency keys
/// rest on the table's unique constraint. Every call is bounded by the connect
/// and query timeouts: an unreachable database is `StateSurfaceError.unavailable`
/// naming it (a 503 upstream), never a hang.
///
/// A call that finds the database unreachable opens the store's `circuit`:
/// until a probe (its own connection, every half second) reaches the database
/// again, every call is refused at once with `DependencyCircuit.Refusal`
/// instead of waiting out its timeout. When the probe succeeds the pool is
/// replaced by a fresh one, so no connection waits out a reconnect backoff
/// grown during the outage.
///
/// The pool does not fail the calls waiting for a connection when its connects
/// are refused (it backs off and tries again), so a call still waiting after
/// `reachabilityCheckDelay` asks, once for all of them, whether the database
/// takes a connection of its own (`checkReachable`): a refused (or timed-out)
/// connect opens the circuit, and every call waiting is answered then
/// (`DependencyCircuit.untilOpen`), within a second of the database going away
/// rather than at the connect and query timeouts.
public final class PostgresStateSurface: Sendable {
    public let settings: PostgresSettings
    /// Open while the database is known unreachable (readiness and metrics read it).
    public let circuit: DependencyCircuit
    let logger: Logger
    private let pool: Mutex<Pool>
    /// Whether a probe task is running (one at most).
    private let probing = Mutex(false)
    /// Set by `shutdown()`: no probe starts or goes on after it.
    private let isShutDown = Mutex(false)
    /// Whether a probe's connection attempt is under way (one at a time: two that succeed
    /// together would each replace the pool, the second failing what the first had begun).
    private let probeInFlight = Mutex(false)
    /// The reachability check: whether one is under way, and when the last began (one per `reachabilityCheckInterval`).
    private let reachability = Mutex<(inFlight: Bool, startedAt: ContinuousClock.Instant?)>((false, nil))
    /// How long a call waits on the pool before a reachability check is asked for.
    static let reachabilityCheckDelay: Duration = .milliseconds(250)
    /// The least time between two reachability checks.
    static let reachabilityCheckInterval: Duration = .milliseconds(500)
    /// The store's one LISTEN, shared by every `accessChangeSignals()` stream.
    let changeListener: PostgresChangeListener
    /// The settings of the probe's and the reachability check's short connections: the LISTEN's,
    /// under another `application_name`, so `pg_stat_activity` tells a check from the LISTEN.
    private let checkConfiguration: PostgresConnection.Configuration

    /// The query connections and the task that runs them.
    private struct Pool: Sendable {
        let client: PostgresClient
        let runner: Task<Void, Never>

        init(settings: PostgresSettings, tls: TLSConfiguration?, logger: Logger) {
            var configuration = PostgresClient.Configuration(
                host: settings.host, port: settings.port, username: settings.username, password: settings.password, database: settings.database,
                tls: tls.map { .require($0) } ?? .disable)
            configuration.options.maximumConnections = settings.poolSize
            configuration.options.connectTimeout = .milliseconds(Int64(settings.connectTimeout * 1000))
            configuration.options.additionalStartupParameters = [
                ("statement_timeout", "\(Int(settings.queryTimeout * 1000))"), ("application_name", "portcullis"),
            ]
            let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
            self.client = client
            runner = Task { await client.run() }
        }

        func shutdown() async {
            runner.cancel()
            _ = await runner.value
        }
    }

    var client: PostgresClient { pool.withLock { $0.client } }

    /// Connects (the pool runs until `shutdown()`) and applies pending migrations.
    ///
    /// - Throws: `StateSurfaceError.unavailable` naming the database when it does not answer.
    public init(settings: PostgresSettings, logger: Logger, migrate: Bool = true) async throws {
        self.settings = settings
        self.logger = logger
        circuit = DependencyCircuit(name: "store", maximumWaiters: settings.maximumWaiters)
        let tls = try Self.tlsConfiguration(settings)
        pool = Mutex(Pool(settings: settings, tls: tls, logger: logger))
        checkConfiguration = try Self.singleConnectionConfiguration(settings, tls: tls, applicationName: "portcullis-check")
        changeListener = PostgresChangeListener(
            configuration: try Self.singleConnectionConfiguration(settings, tls: tls, applicationName: "portcullis-listen"),
            channel: Self.accessChannel, logger: logger)
        do {
            try await connectOnce()
            try await ping()
            if migrate { _ = try await migrateSchema() }
        } catch {
            await shutdown()
            throw error
        }
    }

    /// One connection of its own at start: the pool retries a refused login quietly until the call's
    /// deadline, so a missing role or database, or a wrong password, would read as "did not answer".
    /// The server's own words (`role "x" does not exist`) are named at once instead.
    func connectOnce() async throws {
        let (configuration, logger, seconds) = (checkConfiguration, logger, settings.connectTimeout + 1)
        do {
            // Bounded: a server that takes the connection and never finishes its start-up would hang the start.
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
                    try? await connection.close()
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                    return false
                }
                defer { group.cancelAll() }
                guard try await group.next() == true else {
                    throw StateSurfaceError(
                        .unavailable, "PostgreSQL at \(name) did not finish a connection's start-up within \(Int(seconds)) s; check that it runs and is reachable",
                        isOutage: true)
                }
            }
        } catch let error as StateSurfaceError {
            throw error
        } catch let error as PSQLError {
            guard let state = error.serverInfo?[.sqlState] else {
                throw StateSurfaceError(.unavailable, "PostgreSQL at \(name) cannot be reached (\(error.code)); check that it runs and is reachable", isOutage: true)
            }
            let said = error.serverInfo?[.message].map { ": " + $0 } ?? ""
            throw StateSurfaceError(
                .unavailable, "PostgreSQL at \(name) refused the connection\(said) (SQLSTATE \(state)); check the user, password and database in storage.postgres_url")
        } catch {
            throw StateSurfaceError(
                .unavailable, "PostgreSQL at \(name) cannot be reached (\(type(of: error))); check that it runs and is reachable", isOutage: true)
        }
    }

    /// A connection outside the pool: the pool's address, account, TLS and connect timeout,
    /// named `applicationName` in `pg_stat_activity`.
    static func singleConnectionConfiguration(
        _ settings: PostgresSettings, tls: TLSConfiguration?, applicationName: String
    ) throws -> PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: settings.host, port: settings.port, username: settings.username, password: settings.password, database: settings.database,
            tls: .disable)
        if let tls {
            do {
                configuration.tls = .require(try NIOSSLContext(configuration: tls))
            } catch {
                throw StateSurfaceError(.unavailable, "cannot set up TLS to \(settings.name): \(error)")
            }
        }
        configuration.options.connectTimeout = .milliseconds(Int64(settings.connectTimeout * 1000))
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        return configuration
    }

    /// The TLS settings for `storage.postgres_tls`; nil for `disable`.
    static func tlsConfiguration(_ settings: PostgresSettings) throws -> TLSConfiguration? {
        switch settings.tls {
        case .disable:
            return nil
        case .require:
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = .none
            return tls
        case .verifyFull:
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = .fullVerification
            if let caFile = settings.caFile {
                do {
                    tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
                } catch {
                    throw StateSurfaceError(.unavailable, "cannot read storage.postgres_ca_file \(caFile): \(error)")
                }
            }
            return tls
        }
    }

    public var name: String { settings.name }

    public var outageCircuit: DependencyCircuit? { circuit }

    public func shutdown() async {
        isShutDown.withLock { $0 = true }
        await changeListener.shutdown()
        await pool.withLock { $0 }.shutdown()
    }

    // MARK: The circuit

    /// Opens the circuit, and starts the probe that closes it.
    private func opened(by error: StateSurfaceError) {
        if circuit.recordOutage(error.message) {
            logger.warning("store down: requests that need it are refused at once until it answers", metadata: ["store": "\(name)", "error": "\(error.message)"])
        }
        startProbe()
    }

    private func startProbe() {
        guard probing.withLock({ running in
            defer { running = true }
            return !running
        }) else { return }
        // The probe outlives the call that opened the circuit: none of its spans are that request's.
        Task { [self] in
            await CallSpans.$current.withValue(nil) {
                while circuit.isOpen, !isShutDown.withLock({ $0 }) {
                    try? await Task.sleep(for: .milliseconds(500))
                    if await probe() { break }
                }
            }
            probing.withLock { $0 = false }
        }
    }

    /// One connection of its own (not the pool's, which may be backing off) and `SELECT 1`;
    /// on success the pool is replaced and the circuit closed. While another probe is under
    /// way it reports what the circuit says instead of trying at the same time.
    @discardableResult
    func probe() async -> Bool {
        guard probeInFlight.withLock({ running in
            defer { running = true }
            return !running
        }) else { return !circuit.isOpen }
        defer { probeInFlight.withLock { $0 = false } }
        guard circuit.isOpen else { return true }
        guard !isShutDown.withLock({ $0 }) else { return false }
        do {
            try await bounded(within: settings.connectTimeout + 1, probe: true) { [checkConfiguration, logger] in
                let connection = try await PostgresConnection.connect(configuration: checkConfiguration, id: 0, logger: logger)
                defer { Task { try? await connection.close() } }
                _ = try await connection.query("SELECT 1", logger: logger).collect()
            }
        } catch {
            return false
        }
        let old = pool.withLock { pool in
            let old = pool
            pool = Pool(settings: settings, tls: try? Self.tlsConfiguration(settings), logger: logger)
            return old
        }
        Task { await old.shutdown() }
        if circuit.recordRecovery() {
            logger.notice("store answers again: serving requests that need it", metadata: ["store": "\(name)"])
        }
        return true
    }

    // MARK: Running statements

    /// The longest any one call may take before it counts as the database not answering.
    var deadline: Double { settings.connectTimeout + settings.queryTimeout }

    /// Runs `body` on a pooled connection inside a transaction; rolls back when it throws.
    /// Errors come back as `StateSurfaceError`: `.conflict` for a unique violation,
    /// `.unavailable` (naming the database) for everything the database did not answer.
    ///
    /// A span of its own (`store <method>`) when the request this task serves is traced
    /// (`CallSpans`), named for the calling store method (`function`).
    func transaction<T: Sendable>(_ function: String = #function, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await CallSpans.store(.postgresql, function) {
            try await bounded {
                try await self.client.withConnection { connection in
                    try await connection.query("BEGIN", logger: self.logger)
                    do {
                        let value = try await body(connection)
                        try await connection.query("COMMIT", logger: self.logger)
                        return value
                    } catch {
                        _ = try? await connection.query("ROLLBACK", logger: self.logger)
                        throw error
                    }
                }
            }
        }
    }

    /// Runs one statement outside a transaction and collects its rows, traced as `transaction` is.
    func rows(_ query: PostgresQuery, within seconds: Double? = nil, _ function: String = #function) async throws -> [PostgresRow] {
        try await CallSpans.store(.postgresql, function) {
            try await bounded(within: seconds) {
                try await self.client.withConnection { connection in
                    try await connection.query(query, logger: self.logger).collect()
                }
            }
        }
    }

    /// `body` within the deadline, with the database's errors made `StateSurfaceError`; refused at
    /// once while the circuit is open (`DependencyCircuit.Refusal`), and opening it when the database
    /// cannot be reached. A `probe` goes to the database whatever the circuit says.
    private func bounded<T: Sendable>(within seconds: Double? = nil, probe: Bool = false, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard !probe else { return try await mapped(within: seconds, watching: false, body) }
        try circuit.enter()
        defer { circuit.leave() }
        do {
            return try await mapped(within: seconds, watching: true, body)
        } catch let error as StateSurfaceError where error.isOutage {
            opened(by: error)
            throw error
        }
    }

    /// How a call's race ended.
    private enum Outcome<T: Sendable>: Sendable {
        case value(T)
        case deadline
        /// The circuit opened (this call's own failure, another's, or a reachability check).
        case outage(String)
        /// The watcher was cancelled: the call ended another way.
        case unwatched
    }

    /// `body` raced against the deadline and, when `watching`, against the circuit opening (after
    /// `reachabilityCheckDelay`, a reachability check is asked for); errors made `StateSurfaceError`.
    private func mapped<T: Sendable>(within seconds: Double?, watching: Bool, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let deadline = seconds ?? self.deadline
        do {
            return try await withThrowingTaskGroup(of: Outcome<T>.self) { group in
                group.addTask { .value(try await body()) }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(Int64(deadline * 1000)))
                    return .deadline
                }
                if watching {
                    group.addTask { [self] in
                        if (try? await Task.sleep(for: Self.reachabilityCheckDelay)) != nil { checkReachable() }
                        guard let detail = await circuit.untilOpen() else { return .unwatched }
                        return .outage(detail)
                    }
                }
                defer { group.cancelAll() }
                while let outcome = try await group.next() {
                    switch outcome {
                    case .value(let value): return value
                    case .deadline:
                        throw StateSurfaceError(
                            .unavailable, "PostgreSQL at \(name) did not answer within \(Int(deadline)) s; check that it runs and is reachable", isOutage: true)
                    case .outage(let detail): throw StateSurfaceError(.unavailable, detail, isOutage: true)
                    case .unwatched: continue
                    }
                }
                throw CancellationError()
            }
        } catch let error as StateSurfaceError {
            throw error
        } catch let error as PSQLError {
            if let state = error.serverInfo?[.sqlState] {
                if state == "23505" { throw StateSurfaceError(.conflict, "a row with that key exists already") }
                // Class 08 (connection exception) and 57P01-57P03 (shutting down, cannot connect now): the server is going away.
                if state.hasPrefix("08") || state.hasPrefix("57P") {
                    throw StateSurfaceError(.unavailable, "PostgreSQL at \(name) is shutting down or dropped the connection (SQLSTATE \(state))", isOutage: true)
                }
                // 42501: the role may not do this (most often: create the tables in a database it does not own).
                if state == "42501" {
                    let message = error.serverInfo?[.message] ?? ""
                    // On a schema: the tables cannot be made. On a table: they were made by another role.
                    let fix =
                        message.contains("schema")
                        ? "make the role the database's owner (createdb --owner ROLE) or grant it CREATE on the schema"
                        : "the tables belong to another role: make this role their owner, or grant it SELECT, INSERT, UPDATE and DELETE on them"
                    throw StateSurfaceError(
                        .unavailable, "PostgreSQL at \(name) refused a statement for lack of privilege (SQLSTATE 42501\(message.isEmpty ? "" : ": " + message)); \(fix)")
                }
                throw StateSurfaceError(.unavailable, "PostgreSQL at \(name) refused a statement (SQLSTATE \(state))")
            }
            throw StateSurfaceError(.unavailable, "PostgreSQL at \(name) cannot be reached (\(error.code)); check that it runs and is reachable", isOutage: true)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw StateSurfaceError(
                .unavailable, "PostgreSQL at \(name) cannot be reached (\(type(of: error))); check that it runs and is reachable", isOutage: true)
        }
    }

    /// Asks, once for every call waiting on the pool, whether the database takes a connection at
    /// all: a connection of its own (as the probe's), at most one at a time and one per
    /// `reachabilityCheckInterval`. A connect refused or timed out opens the circuit; a database
    /// that answers (busy, not down) changes nothing.
    private func checkReachable() {
        guard !circuit.isOpen, !isShutDown.withLock({ $0 }) else { return }
        let now = ContinuousClock.now
        guard reachability.withLock({ check in
            guard !check.inFlight, check.startedAt.map({ now - $0 >= Self.reachabilityCheckInterval }) ?? true else { return false }
            check = (true, now)
            return true
        }) else { return }
        Task { [self] in
            defer { reachability.withLock { $0.inFlight = false } }
            do {
                try await mapped(within: settings.connectTimeout + 1, watching: false) { [checkConfiguration, logger] in
                    let connection = try await PostgresConnection.connect(configuration: checkConfiguration, id: 0, logger: logger)
                    try? await connection.close()
                }
            } catch let error as StateSurfaceError where error.isOutage {
                opened(by: error)
            } catch {}
        }
    }

    // MARK: Schema

    /// Applies the schema steps this database has not seen, one process at a time
    /// (a session-level advisory lock); returns the names of the steps applied.
    @discardableResult
    public func migrateSchema() async throws -> [String] {
        try await bounded {
            try await self.client.withConnection { connection in
                let logger = self.logger
                try await connection.query("SELECT pg_advisory_lock(\(Self.migrationLock))", logger: logger)
                do {
                    try await connection.query(
                        "CREATE TABLE IF NOT EXISTS portcullis_migrations (name TEXT PRIMARY KEY NOT NULL, applied_at DOUBLE PRECISION NOT NULL)",
                        logger: logger)
                    var done = Set<String>()
                    for try await name in try await connection.query("SELECT name FROM portcullis_migrations", logger: logger).decode(String.self) {
                        done.insert(name)
                    }
                    var applied: [String] = []
                    for step in SchemaMigration.all where !done.contains(step.name) {
                        try await connection.query("BEGIN", logger: logger)
                        do {
                            // Statements one at a time: the extended protocol takes one per query.
                            for statement in step.postgres.split(separator: ";").map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) })
                            where !statement.isEmpty {
                                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                            }
                            try await connection.query(
                                "INSERT INTO portcullis_migrations (name, applied_at) VALUES (\(step.name), \(Date().timeIntervalSince1970))", logger: logger)
                            try await connection.query("COMMIT", logger: logger)
                        } catch {
                            _ = try? await connection.query("ROLLBACK", logger: logger)
                            throw error
                        }
                        applied.append(step.name)
                    }
                    try await connection.query("SELECT pg_advisory_unlock(\(Self.migrationLock))", logger: logger)
                    return applied
                } catch {
                    _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.migrationLock))", logger: logger)
                    throw error
                }
            }
        }
    }

    /// The advisory lock key migrations hold (any fixed number; "portcull" in ASCII).
    static let migrationLock: Int64 = 0x706f_7274_6375_6c6c

    /// The names of the schema steps applied to this database, in order.
    public func appliedMigrations() async throws -> [String] {
        try await rows("SELECT name FROM portcullis_migrations ORDER BY applied_at, name").map { try $0.decode(String.self) }
    }

    /// `SELECT 1`, given the connect timeout and a second: readiness must not wait for the query timeout.
    /// While the circuit is open it probes the database instead (its own connection), and so may close it.
    public func ping() async throws {
        if circuit.isOpen {
            guard await probe() else { throw StateSurfaceError(.unavailable, circuit.snapshot.detail ?? "PostgreSQL at \(name) cannot be reached") }
            return
        }
        _ = try await rows("SELECT 1", within: settings.connectTimeout + 1)
    }

    /// Locks the owner's sessions for this transaction, so a count and a write are one step
    /// for every instance (two sessions of one owner upgraded at once through two gateways).
    static func lockOwner(_ connection: PostgresConnection, userID: String, tenantID: String, logger: Logger) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(tenantID + "/" + userID), 0))", logger: logger)
    }
}
