import ArgumentParser

/// `portcullis gateway`: the gateway alone, in front of a Runtime at `runtime.url`.
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Run the gateway alone, in front of the Runtime at runtime.url (one of several instances).",
        discussion: """
            Run as many as you like against one PostgreSQL database (storage.postgres_url) and \
            one or more `portcullis runtime` instances behind a load balancer; give every instance \
            the same keys directory (keys.directory) and gateway.issuer. A logout, revocation or \
            disabled account on one instance reaches the others' token checks and sockets within a \
            second. Settings come from config/portcullis.yaml (or --config), then environment \
            variables (runtime.url is RUNTIME_URL). SIGTERM or SIGINT stops accepting, finishes \
            what is in flight (for at most limits.shutdown_timeout_seconds) and exits. SIGHUP \
            reloads the configuration (routes, CORS origins, trusted issuers, rate limits).
            """
    )

    @Option(help: "Configuration file (YAML). Default: config/portcullis.yaml when it exists.")
    var config: String?

    func run() async throws {
        try await ServeCommand.runGateway(config: config, alone: true)
    }
}
