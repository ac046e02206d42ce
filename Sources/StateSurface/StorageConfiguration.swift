import ConfigurationReading

/// Where the State Surface lives and how long a write waits for a lock.
public struct StorageConfiguration: Sendable, Equatable {
    /// The SQLite file (created with its directory, 0700, on first use).
    public var sqlitePath: String = "data/portcullis.sqlite"
    /// How long a write waits for a lock held by another connection or process, in seconds, before failing (503).
    public var busyTimeout: Double = 5

    public init() {}

    /// Reads `storage.sqlite_path` and `storage.busy_timeout_seconds` on top of the defaults above.
    public init(reading values: ConfigurationValues) throws(ConfigurationError) {
        self.init()
        if let value = try values.string("storage.sqlite_path") { sqlitePath = value }
        if let value = try values.int("storage.busy_timeout_seconds", in: 1...300) { busyTimeout = Double(value) }
    }
}
