import Foundation
import Logging
import PortcullisTestSupport
import StateSurface
import Synchronization
import Testing

/// The two State Surface implementations the repository tests run against.
enum StoreKind: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case sqlite
    case postgres

    /// Both, where PostgreSQL is installed (always in CI); SQLite alone otherwise.
    static let available: [StoreKind] = {
        if TestPostgres.enabled { return [.sqlite, .postgres] }
        print("note: PostgreSQL is not installed (apt-get install postgresql): the repository tests run on SQLite only")
        return [.sqlite]
    }()

    var testDescription: String { rawValue == "sqlite" ? "SQLite" : "PostgreSQL" }
}

/// One test's store: a fresh SQLite file, or a fresh database on the test PostgreSQL server.
/// `open()` may be called again to reopen the same data. The SQLite files live until the
/// test process ends (a store opened from a `TestStore` may outlive it).
final class TestStore: Sendable {
    let kind: StoreKind
    let configuration: StorageConfiguration
    private static let files = Mutex<[TemporaryDatabase]>([])
    private static let removeAtExit: Void = {
        atexit {
            for file in TestStore.files.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: file.directory) }
        }
    }()

    /// - Parameter poolSize: PostgreSQL's `storage.postgres_pool_size` (ignored for SQLite).
    init(_ kind: StoreKind, poolSize: Int = 8) async throws {
        self.kind = kind
        var configuration = StorageConfiguration()
        switch kind {
        case .sqlite:
            let temp = TemporaryDatabase()
            configuration.sqlitePath = temp.path
            _ = Self.removeAtExit
            Self.files.withLock { $0.append(temp) }
        case .postgres:
            var settings = try PostgresSettings(url: try await TestPostgres.shared().createDatabase())
            settings.poolSize = poolSize
            // Generous: under AddressSanitizer beside the whole parallel suite, connecting and migrating
            // a fresh database took longer than the production default's 15 s (no test here times these).
            settings.connectTimeout = 20
            settings.queryTimeout = 40
            configuration.postgres = settings
        }
        self.configuration = configuration
    }

    func open() async throws -> any StateStore {
        var logger = Logger(label: "test.state")
        logger.logLevel = .error
        return try await StateStores.open(configuration, logger: logger)
    }
}
