import ArgumentParser
import Foundation
import JOSE
import Runtime
import StateSurface

/// Hidden probes the test suite drives against the real binary.
struct DebugCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "debug",
        abstract: "Probes for the test suite.",
        shouldDisplay: false,
        subcommands: [StateWriter.self]
    )

    /// Creates sessions one after another and prints each id once its write
    /// has committed, so a test can kill the process with SIGKILL and check
    /// that every reported session survived.
    struct StateWriter: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "state-writer")

        @Option(help: "The SQLite database file.")
        var database: String

        @Option(help: "How many sessions to write before exiting (default: until killed).")
        var count: Int = .max

        func run() async throws {
            let state = try SQLiteStateSurface(path: database)
            let sessions = SessionService(repository: state, configuration: RuntimeConfiguration())
            var written = 0
            while written < count {
                let session = try await sessions.createAnonymous()
                FileHandle.standardOutput.write(Data((session.id + "\n").utf8))
                written += 1
            }
        }
    }
}
