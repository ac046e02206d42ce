import ArgumentParser
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
            from --keys (or --jwks). Settings are flags for now; the YAML configuration file \
            arrives with the gateway.
            """
    )

    @Option(help: "Listen address.")
    var host = "127.0.0.1"

    @Option(help: "Listen port.")
    var port = 8081

    @Option(help: "SQLite database file (created with its directory if missing).")
    var database = "data/portcullis.sqlite"

    @Option(help: "The gateway's keys directory, to verify assertions (reloaded when it changes).")
    var keys: String?

    @Option(help: "A JWKS file with the gateway's public keys, instead of --keys.")
    var jwks: String?

    @Option(help: "This Runtime's name: the aud assertions must carry.")
    var name = "runtime"

    @Option(help: "The gateway's issuer: the iss assertions must carry.")
    var issuer = TokenCommand.defaultIssuer

    func run() async throws {
        var configuration = RuntimeConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.name = name
        configuration.assertionIssuer = issuer
        let logger = Logger(label: "portcullis.runtime")
        let state = try SQLiteStateSurface(path: database)
        var services: [any Service] = []
        let verificationKeys: any VerificationKeyProvider
        if let jwks {
            verificationKeys = try KeySource.load(keysDirectory: nil, jwksFile: jwks)
        } else {
            let directory = keys ?? "keys"
            if !FileManager.default.fileExists(atPath: directory + "/keyring.json") {
                // The embedded default: a fresh ES256 key, so a first run works out of the box.
                let record = try KeyDirectory(path: directory).generate(algorithm: .es256)
                Terminal.warning("\(directory) had no keys: generated ES256 key \(record.kid) (active); the gateway must sign assertions with it")
            }
            _ = try KeySource.load(keysDirectory: directory, jwksFile: nil)  // fails early with a clear message
            let ring = try LiveKeyRing(directory: KeyDirectory(path: directory))
            services.append(KeyRingReloader(ring: ring, logger: logger))
            verificationKeys = ring
        }
        let host = configuration.host, database = self.database
        let app = RuntimeServer.makeApplication(
            configuration: configuration, state: state, keys: verificationKeys, logger: logger, services: services,
            onServerRunning: { port in logger.info("runtime listening", metadata: ["address": "\(host):\(port)", "database": "\(database)"]) })
        try await app.runService()
    }
}
