import ConfigurationReading

/// Where the State Surface lives: one SQLite file (the default) or a PostgreSQL database.
public struct StorageConfiguration: Sendable, Equatable {
    /// The SQLite file (created with its directory, 0700, on first use).
    public var sqlitePath: String = "data/portcullis.sqlite"
    /// How long a write waits for a lock held by another connection or process, in seconds, before failing (503).
    public var busyTimeout: Double = 5
    /// When set, the State Surface is this PostgreSQL database instead of the SQLite file.
    public var postgres: PostgresSettings? = nil

    public init() {}

    /// Reads `storage.sqlite_path`, `storage.busy_timeout_seconds` and, when
    /// `storage.postgres_url` (env `STORAGE_POSTGRES_URL`) is set, the PostgreSQL
    /// settings: `storage.postgres_pool_size`, `storage.postgres_max_waiters`, `storage.postgres_connect_timeout_seconds`,
    /// `storage.postgres_query_timeout_seconds`, `storage.postgres_tls`, `storage.postgres_ca_file`.
    public init(reading values: ConfigurationValues) throws(ConfigurationError) {
        self.init()
        if let value = try values.string("storage.sqlite_path") { sqlitePath = value }
        if let value = try values.int("storage.busy_timeout_seconds", in: 1...300) { busyTimeout = Double(value) }
        // The PostgreSQL settings are read (and checked) with or without a URL: a file that keeps
        // them while the URL comes from the environment, or is unset for SQLite, is still good.
        let poolSize = try values.int("storage.postgres_pool_size", in: 1...500)
        let maximumWaiters = try values.int("storage.postgres_max_waiters", in: 1...1_000_000)
        let connectTimeout = try values.int("storage.postgres_connect_timeout_seconds", in: 1...120)
        let queryTimeout = try values.int("storage.postgres_query_timeout_seconds", in: 1...600)
        var tls: PostgresSettings.TLSMode?
        if let value = try values.string("storage.postgres_tls") {
            guard let mode = PostgresSettings.TLSMode(rawValue: value) else {
                throw ConfigurationError(key: "storage.postgres_tls", "must be disable, require or verify-full, not \"\(value)\"")
            }
            tls = mode
        }
        let caFile = try values.string("storage.postgres_ca_file")
        if let url = try values.string("storage.postgres_url"), !url.isEmpty {
            var settings = try PostgresSettings(url: url, key: "storage.postgres_url")
            if let poolSize { settings.poolSize = poolSize }
            if let maximumWaiters { settings.maximumWaiters = maximumWaiters }
            if let connectTimeout { settings.connectTimeout = Double(connectTimeout) }
            if let queryTimeout { settings.queryTimeout = Double(queryTimeout) }
            if let tls { settings.tls = tls }
            if let caFile { settings.caFile = caFile }
            postgres = settings
        }
    }

    /// The store's name for messages and readiness: the file, or the database without credentials.
    public var storeName: String {
        postgres.map(\.name) ?? "sqlite:\(sqlitePath)"
    }
}
