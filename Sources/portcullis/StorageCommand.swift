import ArgumentParser
import ConfigurationReading
import Logging
import StateSurface

/// `portcullis storage`: the State Surface's schema.
struct StorageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storage",
        abstract: "Manage the State Surface (the SQLite file, or PostgreSQL when storage.postgres_url is set).",
        subcommands: [Migrate.self]
    )

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply the schema steps the store has not seen, and list them.",
            discussion: """
                Safe to run while instances are up and from several places at once: on PostgreSQL \
                one process migrates at a time (an advisory lock) and each step is one transaction. \
                `serve`, `gateway` and `runtime` apply pending steps at start as well.
                """
        )

        @Option(help: "Configuration file (YAML). Default: config/portcullis.yaml when it exists.")
        var config: String?

        func run() async throws {
            let storage = try StorageConfiguration(reading: try await ConfigurationValues.load(path: config))
            var logger = Logger(label: "portcullis.storage")
            logger.logLevel = .warning
            let report = try await StateStores.migrate(storage, logger: logger)
            for step in report.appliedNow { print("applied: \(step)") }
            print("\(report.store): schema current (\(report.applied.count) steps; \(report.appliedNow.count) applied now)")
        }
    }
}
