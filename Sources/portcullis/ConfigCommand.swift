import ArgumentParser
import ConfigurationReading
import Gateway
import Logging

/// `portcullis config check`: the configuration read as `serve` reads it, without serving.
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check a configuration before serving it.",
        subcommands: [Check.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read the configuration as serve would (file, then environment variables), and say what is wrong, or that it is good.",
            discussion: """
                Every key is checked as start-up checks it, and the files it names are read: the TLS certificate \
                and key, the upstreams' CA file, the trusted issuers' secrets and the sign-in providers' client \
                secrets (a key or secret others may read is refused). Nothing is opened, made or fetched: not the \
                database, not the keys directory, not a provider. Run it as the user serve runs as, in its \
                directory (relative paths are read from there). Exit 0 when serve would start with it (its \
                warnings on stderr), 2 with the first problem otherwise. Run it before `systemctl reload`.
                """)

        @Option(help: "Configuration file (YAML). Default: config/portcullis.yaml when it exists.")
        var config: String?

        func run() async throws {
            let (file, gateway, _, _, settings) = try await ServeCommand.readSettings(config: config)
            try ServeCommand.checkFiles(gateway)
            var quiet = Logger(label: "portcullis.config-check")
            quiet.logLevel = .critical
            // No keys directory: the providers' sealing key is serve's to make, never the check's.
            let (_, providers, _) = try ServeCommand.readSecrets(gateway, keysDirectory: nil, logger: quiet)
            for warning in ServeCommand.startWarnings(gateway) { Terminal.warning(warning) }
            let issuers = gateway.trust.issuers.count, logins = providers.providers.count, connections = gateway.connections.connections.count
            print(
                "configuration good (\(file.source)): \(gateway.routes.count) route(s), \(issuers) trusted issuer(s), "
                    + "\(logins) sign-in provider(s), \(connections) connection(s); the gateway would listen on \(gateway.host):\(gateway.port)")
            // Against a running gateway of this directory (its keys directory): what a reload would do.
            if let running = RunningConfiguration.read(from: settings.keysDirectory) {
                let checked = try RunningConfiguration(pid: 0, values: file, gateway: gateway, salt: running.salt)
                let (restartKeys, refused) = running.reload(of: checked)
                if refused {
                    print(
                        "the running gateway (pid \(running.pid)) would refuse this as a reload (SIGHUP): a sign-in provider changed, which takes a restart (systemctl restart portcullis)")
                } else if !restartKeys.isEmpty {
                    print(
                        "the running gateway (pid \(running.pid)) would keep its values of \(restartKeys.joined(separator: ", ")) on a reload (SIGHUP): they change only on a restart")
                } else {
                    print("the running gateway (pid \(running.pid)) would put every change in force on a reload (SIGHUP)")
                }
            }
        }
    }
}
