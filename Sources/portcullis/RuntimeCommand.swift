import ArgumentParser
import ConfigurationReading
import Foundation
import JOSE
import Logging
import Runtime
import ServiceLifecycle
import StateSurface

/// `portcullis runtime`: the Runtime alone, on its own listener.
struct RuntimeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "runtime",
        abstract: "Run the Runtime alone: sessions, intents and the agent channel, for the gateway only.",
        discussion: """
            Every request must carry X-Portcullis-Assertion, signed by the gateway with a key \
            from --keys (or --jwks). Settings come from config/portcullis.yaml (or --config), \
            then environment variables (runtime.port is RUNTIME_PORT), then these flags. \
            SIGTERM or SIGINT stops accepting, finishes what is in flight (for at most \
            limits.shutdown_timeout_seconds, then closes what is left) and exits.
            """
    )

    @Option(help: "Configuration file (YAML). Default: config/portcullis.yaml when it exists.")
    var config: String?

    @Option(help: "Listen address (runtime.host).")
    var host: String?

    @Option(help: "Listen port (runtime.port).")
    var port: Int?

    @Option(help: "SQLite database file, created with its directory if missing (storage.sqlite_path).")
    var database: String?

    @Option(help: "The gateway's keys directory, to verify assertions; reloaded when it changes (keys.directory).")
    var keys: String?

    @Option(help: "A JWKS file with the gateway's public keys, instead of --keys (keys.jwks_file).")
    var jwks: String?

    @Option(help: "This Runtime's name: the aud assertions must carry (runtime.name).")
    var name: String?

    @Option(help: "The gateway's issuer: the iss assertions must carry (gateway.issuer).")
    var issuer: String?

    func run() async throws {
        let file = try await ConfigurationValues.load(path: config)
        var configuration = try RuntimeConfiguration(reading: file)
        var storage = try StorageConfiguration(reading: file)
        let settings = try CommandLineSettings(reading: file)
        if let host { configuration.host = host }
        if let port {
            guard (0...65_535).contains(port) else { throw CLIError("--port must be from 0 to 65535") }
            configuration.port = port
        }
        if let name { configuration.name = name }
        configuration.shutdownTimeout = Double(settings.shutdownTimeout)
        if let issuer { configuration.assertionIssuer = issuer }
        if let database { storage.sqlitePath = database }
        let jwks = self.jwks ?? settings.jwksFile
        let keysDirectory = self.keys ?? settings.keysDirectory
        let logger = Logger(label: "portcullis.runtime")
        let state = try await StateStores.open(storage, logger: logger)
        var services: [any Service] = []
        let verificationKeys: any VerificationKeyProvider
        if let jwks {
            verificationKeys = try KeySource.load(keysDirectory: nil, jwksFile: jwks)
        } else {
            let directory = keysDirectory
            if !FileManager.default.fileExists(atPath: directory + "/keyring.json") {
                // The embedded default: a fresh ES256 key, so a first run works out of the box.
                let record = try KeyDirectory(path: directory).generate(algorithm: .es256)
                Terminal.warning("no signing key in \(directory)/: generated ES256 key \(record.kid) (active); the gateway must sign assertions with it")
            }
            let ring = try LiveKeyRing(directory: KeyDirectory(path: directory))  // one load; fails early with a clear message
            ring.initialWarnings.forEach(Terminal.warning)
            services.append(KeyRingReloader(ring: ring, signals: state.accessChangeSignals(), logger: logger))
            verificationKeys = ring
        }
        let host = configuration.host
        let app = RuntimeServer.makeApplication(
            configuration: configuration, state: state, keys: verificationKeys, logger: logger, services: services,
            onServerRunning: { port in logger.info("runtime listening", metadata: ["address": "\(host):\(port)", "store": "\(state.name)"]) })
        // Not app.runService(): its group has no bound on graceful shutdown.
        let group = ServiceGroup(configuration: settings.serviceGroup([app], logger: logger))
        try await state.closing { try await group.run() }
    }
}
