import ConfigurationReading
import Gateway
import Logging
import Observability
import ServiceLifecycle

/// The command line's own settings: where the keys are, and how it logs.
/// (Each module's configuration reads itself: `GatewayConfiguration`,
/// `RuntimeConfiguration`, `StorageConfiguration`.)
struct CommandLineSettings: Sendable, Equatable {
    /// `keys.directory`: the key ring.
    var keysDirectory = "keys"
    /// `keys.jwks_file`: `portcullis runtime` verifies assertions with this JWKS instead of `keys/`.
    var jwksFile: String? = nil
    /// `logging.format`: text or json.
    var logFormat = LogFormat.text
    /// `logging.level`.
    var logLevel = "info"
    /// `logging.access_buffer_bytes`: the access log (one line per request) is gathered per thread up
    /// to this many bytes and written on a one-second timer; 0 writes each line as it comes.
    var accessBufferBytes = 64 * 1024
    /// `limits.shutdown_timeout_seconds`: on SIGTERM or SIGINT, what is in flight gets this long to
    /// finish; then every connection still open is closed and the process exits. Without a bound
    /// one connection that never quiesces (a client that connected and sent nothing, on a listener
    /// whose first request decides between HTTP and WebSocket) kept the process running for ever.
    var shutdownTimeout = 30

    init() {}

    /// The service group's configuration for a long-running command: stopped by SIGTERM and
    /// SIGINT, its graceful shutdown bounded by `shutdownTimeout`, then cancelled.
    func serviceGroup(_ services: [any Service], logger: Logger) -> ServiceGroupConfiguration {
        var configuration = ServiceGroupConfiguration(
            services: services.map { .init(service: $0) }, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(shutdownTimeout)
        return configuration
    }

    init(reading values: ConfigurationValues) throws(ConfigurationError) {
        if let value = try values.string("keys.directory") { keysDirectory = value }
        jwksFile = try values.string("keys.jwks_file")
        if let value = try values.string("logging.format") {
            guard let parsed = LogFormat(rawValue: value) else { throw ConfigurationError(key: "logging.format", "must be text or json, not \"\(value)\"") }
            logFormat = parsed
        }
        if let value = try values.string("logging.level") {
            guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(value) else {
                throw ConfigurationError(key: "logging.level", "must be one of trace, debug, info, notice, warning, error, critical")
            }
            logLevel = value
        }
        if let value = try values.int("logging.access_buffer_bytes", in: 0...(16 << 20)) { accessBufferBytes = value }
        if let value = try values.int("limits.shutdown_timeout_seconds", in: 1...3_600) { shutdownTimeout = value }
    }
}
