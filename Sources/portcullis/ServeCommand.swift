import ArgumentParser
import ConfigurationReading
import ConnectedAccounts
import Foundation
import Gateway
import JOSE
import Logging
import Observability
import Traces
import ProviderLogin
import Runtime
import SecurityGuard
import ServiceLifecycle
import StateSurface
import TrustedIssuers

/// `portcullis serve`: the gateway, its admin listener and the embedded Runtime.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the gateway with the Runtime in-process (the default deployment).",
        discussion: """
            With no configuration: the gateway on 127.0.0.1:8080, metrics on 127.0.0.1:9090, \
            the Runtime on 127.0.0.1:8081, SQLite at data/portcullis.sqlite, and an ES256 key \
            generated into keys/ when it has none. Settings come from config/portcullis.yaml \
            (or --config), then environment variables (gateway.port is GATEWAY_PORT). \
            SIGTERM or SIGINT stops accepting, finishes what is in flight (for at most \
            limits.shutdown_timeout_seconds, then closes what is left) and exits. SIGHUP \
            reloads the configuration (routes, CORS origins, trusted issuers, rate limits).
            """
    )

    @Option(help: "Configuration file (YAML). Default: config/portcullis.yaml when it exists.")
    var config: String?

    func run() async throws {
        try await Self.runGateway(config: config, alone: false)
    }

    /// Every setting serve reads, read in one go, so a reload refuses whatever start-up would.
    static func readSettings(config: String?) async throws -> (
        values: ConfigurationValues, gateway: GatewayConfiguration, runtime: RuntimeConfiguration, storage: StorageConfiguration,
        settings: CommandLineSettings
    ) {
        let values = try await ConfigurationValues.load(path: config)
        let read = (
            values, try GatewayConfiguration(reading: values), try RuntimeConfiguration(reading: values), try StorageConfiguration(reading: values),
            try CommandLineSettings(reading: values)
        )
        try values.refuseUnknownKeys()  // once every type has read its keys
        return read
    }

    /// What start-up warns of in a configuration it accepts.
    static func startWarnings(_ gateway: GatewayConfiguration) -> [String] {
        var warnings: [String] = []
        if gateway.issuerIsDerived, gateway.publicURL == nil, GatewayIssuer.isWildcard(gateway.host) {
            warnings.append(
                "gateway.issuer is not set: tokens and discovery name \(gateway.issuer), which clients on other machines cannot reach; set gateway.issuer or gateway.public_url to the URL they use")
        }
        if let publicURL = gateway.publicURL, let url = URL(string: publicURL), url.scheme?.lowercased() == "http", let host = url.host,
            !LoopbackHost.contains(host)
        {
            warnings.append(
                "gateway.public_url is plain http on a host other machines reach (\(host)): tokens, codes and cookies would cross the network in clear; use https (gateway.tls, or a TLS proxy in front)")
        }
        if gateway.routes.contains(where: \.acceptsSessionCookie), !gateway.servesBrowsersOverHTTPS {
            warnings.append(
                "auth: browser routes over plain http: the session cookie is not Secure; for loopback development only (an https gateway.public_url makes it __Host-portcullis)")
        }
        return warnings
    }

    /// The files the configuration names that start-up reads before anything else: the TLS
    /// certificate and key (an unreadable one, or a key others may read, stops start-up here),
    /// the upstreams' CA file, and ext_authz's certificate, key and client CA. `portcullis config check` runs the same.
    static func checkFiles(_ gateway: GatewayConfiguration) throws {
        if let tls = gateway.tls { _ = try GatewayServer.tlsConfiguration(tls) }
        try GatewayServer.checkUpstreamTLS(gateway)
        try GatewayServer.checkExtAuthzTLS(gateway)
    }

    /// The trusted issuers' shared secrets and the sign-in providers' client secrets, read (and
    /// refused when others can read them) before anything is created. Made even with no issuers:
    /// a reload may add some. Nothing is fetched here: providers' keys are fetched once serving.
    /// With `keysDirectory`, the key that seals the providers' tokens is read there, and made when
    /// there is none; without it (`config check`), nothing is read or made there.
    static func readSecrets(
        _ gateway: GatewayConfiguration, keysDirectory: String?, logger: Logger
    ) throws -> (TrustedIssuers, ProviderDirectory, ConnectionDirectory) {
        let trusted = try TrustedIssuers(configuration: gateway.trust, leeway: gateway.leeway, logger: logger)
        let providers = gateway.trust.loginIssuers.isEmpty ? ProviderDirectory.none : try ProviderDirectory(trust: gateway.trust, keysDirectory: keysDirectory)
        let connections = gateway.connections.connections.isEmpty ? ConnectionDirectory.none : try ConnectionDirectory(gateway.connections, keysDirectory: keysDirectory)
        return (trusted, providers, connections)
    }

    /// Runs the gateway; with `alone`, a remote Runtime (`runtime.url`) is required and
    /// none is embedded (`portcullis gateway`).
    static func runGateway(config: String?, alone: Bool) async throws {
        // SIGHUP reloads once the reloader runs; one that comes before (while the store opens, say)
        // is ignored rather than ending the process, its default action.
        signal(SIGHUP, SIG_IGN)
        let (file, gateway, runtimeRead, storage, settings) = try await readSettings(config: config)
        // Taken now, from what `config check` reads too (before anything reads more keys).
        let started = try RunningConfiguration(pid: getpid(), values: file, gateway: gateway)
        if alone, gateway.runtimeURL == nil {
            throw CLIError(
                "portcullis gateway needs runtime.url (env RUNTIME_URL): the Runtime it sends sessions and intents to; for one process with the Runtime inside, run portcullis serve"
            )
        }
        var runtimeSettings = runtimeRead
        runtimeSettings.shutdownTimeout = Double(settings.shutdownTimeout)
        let runtime = runtimeSettings
        let keysDirectory = settings.keysDirectory
        try checkFiles(gateway)
        // Before any key, store or listener is made: a port in use is one line naming it.
        var listeners = [ListenerPortCheck.Listener(name: "gateway", key: "gateway.port", variable: "GATEWAY_PORT", host: gateway.host, port: gateway.port)]
        if let adminPort = gateway.adminPort {
            listeners.append(.init(name: "metrics listener", key: "admin.port", variable: "ADMIN_PORT", host: gateway.adminHost, port: adminPort))
        }
        if let extAuthz = gateway.extAuthz, let port = extAuthz.httpPort {
            listeners.append(.init(name: "ext_authz (HTTP) listener", key: "ext_authz.http_port", variable: "EXT_AUTHZ_HTTP_PORT", host: extAuthz.host, port: port))
        }
        if let extAuthz = gateway.extAuthz, let port = extAuthz.grpcPort {
            listeners.append(.init(name: "ext_authz (gRPC) listener", key: "ext_authz.grpc_port", variable: "EXT_AUTHZ_GRPC_PORT", host: extAuthz.host, port: port))
        }
        if gateway.runtimeURL == nil {
            listeners.append(.init(name: "embedded Runtime", key: "runtime.port", variable: "RUNTIME_PORT", host: runtime.host, port: runtime.port))
        }
        try await ListenerPortCheck.check(listeners)
        let level = Logger.Level(rawValue: settings.logLevel) ?? .info
        // The access log is buffered (as nginx's access_log buffer=) when its lines are written at all.
        let accessSink = settings.accessBufferBytes > 0 && level <= .info ? BufferedLogSink(capacity: settings.accessBufferBytes) : nil
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler =
                settings.logFormat == .json ? JSONLogHandler(label: label) : StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "portcullis")
        if !PasswordHasher.keepWorkAreas() {
            logger.notice("scrypt work areas are not kept: each password check maps its own 32 MiB (libcrypto refused the allocator)")
        }
        for warning in startWarnings(gateway) { logger.warning("\(warning)") }
        let accessLog = accessSink.map { (sink: $0, format: settings.logFormat) }
        let (trusted, providers, connections) = try readSecrets(gateway, keysDirectory: keysDirectory, logger: logger)

        if !FileManager.default.fileExists(atPath: keysDirectory + "/keyring.json") {
            let record = try KeyDirectory(path: keysDirectory).generate(algorithm: .es256)
            logger.warning("no signing key in \(keysDirectory)/: generated ES256 key \(record.kid) (active, mode 0600)")
        }
        let keys = try LiveKeyRing(directory: KeyDirectory(path: keysDirectory))
        for warning in keys.initialWarnings { logger.warning("\(warning)") }
        let state = try await StateStores.open(storage, logger: logger)
        // With a provider to sign in with, people come through it: no account is needed.
        if gateway.trust.loginIssuers.isEmpty, try await state.users().isEmpty {
            logger.notice(
                "no user accounts yet: add one with `portcullis users add NAME --tenant \(gateway.defaultTenant)` (or `swift run portcullis users add ...`)")
        }

        let traces = try gateway.tracing.map { settings throws(TraceExportError) in try TraceExport(settings: settings, logger: logger) }
        if let tracing = gateway.tracing {
            logger.info("traces sent over OTLP/HTTP", metadata: ["endpoint": "\(tracing.endpoint)", "sample_ratio": "\(tracing.sampleRatio)"])
        }
        let server = PortcullisServer(
            gateway: gateway, runtime: runtime, state: state, keys: keys, trustedIssuers: trusted, providers: providers, connections: connections, logger: logger,
            accessLog: accessLog, traces: traces)
        let scheme = gateway.tls == nil ? "http" : "https"
        let systemd = ServiceManagerNotification(logger: logger)
        let readiness = ReadinessAnnouncement(listeners: Set(server.listeners.map(\.rawValue)), notification: systemd)
        var services = try server.makeServices { listener, port in
            switch listener {
            case .gateway:
                let base = "\(scheme)://\(gateway.host.contains(":") ? "[\(gateway.host)]" : gateway.host):\(port)"
                logger.info("gateway listening", metadata: ["url": "\(base)", "config": "\(file.source)"])
                if gateway.servesDemo { logger.info("demo page", metadata: ["url": "\(base)/demo/"]) }
            case .admin: logger.info("metrics listening", metadata: ["url": "http://\(gateway.adminHost):\(port)/metrics"])
            case .runtime: logger.info("embedded runtime listening", metadata: ["address": "\(runtime.host):\(port)", "store": "\(state.name)"])
            case .extAuthzHTTP, .extAuthzGRPC: break  // its server logs its address
            }
            await readiness.listening(listener.rawValue)
        }
        // SIGHUP: the file read again whole, compared with start-up's values. The file start-up read
        // is named, so a reload after it is gone is refused rather than falling back to the defaults.
        let startedFrom = config ?? (FileManager.default.fileExists(atPath: ConfigurationValues.defaultPath) ? ConfigurationValues.defaultPath : nil)
        services.append(
            ConfigurationReloader(services: server.services, logger: logger) {
                let (values, gateway, _, _, _) = try await readSettings(config: startedFrom)
                return ReloadedConfiguration(gateway: gateway, changedKeys: values.changedKeys(from: file))
            })
        // For `config check`: what this process started with, as fingerprints.
        do {
            try started.write(into: keysDirectory)
        } catch {
            logger.notice("config check will not know this gateway's running configuration: \(keysDirectory)/\(RunningConfiguration.fileName) cannot be written")
        }
        let group = ServiceGroup(configuration: settings.serviceGroup(services, logger: logger))
        try await state.closing { try await group.run() }
        RunningConfiguration.remove(from: keysDirectory, pid: getpid())
        accessSink?.flush()  // what was logged after the flusher's last pass
    }
}
