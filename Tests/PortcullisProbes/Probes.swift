// PortcullisProbes: test probes run as real processes (a store writer to kill -9, a plain upstream and a socket load for the scripts).
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import JOSE
import Runtime
import StateSurface

/// `portcullis-probes`: helpers the test suite and the load scripts run as real
/// processes. Built beside `portcullis`, never part of it.
@main
struct Probes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "portcullis-probes",
        abstract: "Probes for the test suite and the load scripts.",
        subcommands: [StateWriter.self, Upstream.self, FramingUpstream.self, SocketLoad.self, CrossRevocation.self]
    )

    /// A plain upstream for `scripts/load.sh`: answers every GET with a small
    /// JSON body, on the same HTTP stack as the gateway, so a proxied request
    /// and a direct one differ only by the gateway.
    struct Upstream: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "upstream")

        @Option(help: "Listen port on 127.0.0.1.")
        var port: Int

        func run() async throws {
            let router = Router()
            let body = ByteBuffer(string: #"{"ok":true,"service":"load-test upstream"}"#)
            router.get("/**") { _, _ in Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body)) }
            var logger = Logger(label: "portcullis.debug.upstream")
            logger.logLevel = .warning
            let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
            try await app.runService()
        }
    }

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
