import Configuration
import Foundation
import Gateway
import Runtime
import SecurityGuard
import SystemPackage
import TrafficCop

/// Reads `config/portcullis.yaml` (or `--config FILE`) with apple/swift-configuration.
///
/// Precedence, highest first: command-line flags, environment variables
/// (upper case, dots and underscores as underscores: `runtime.port` is
/// `RUNTIME_PORT`), the YAML file, the embedded defaults. A value of the
/// wrong type or out of range stops start-up with a message naming the key.
struct ConfigurationFile {
    static let defaultPath = "config/portcullis.yaml"

    let reader: ConfigReader
    let source: String

    /// - Parameter path: an explicit file (must exist), or `nil` for the default file if present.
    static func load(path: String?) async throws -> ConfigurationFile {
        var providers: [any ConfigProvider] = [EnvironmentVariablesProvider()]
        var source = "environment variables and defaults"
        let file = path ?? (FileManager.default.fileExists(atPath: defaultPath) ? defaultPath : nil)
        if let file {
            guard FileManager.default.fileExists(atPath: file) else {
                throw CLIError("the configuration file \(file) does not exist")
            }
            // A file of only comments and blank lines is an empty configuration, not an error.
            let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            let hasContent = text.split(separator: "\n").contains { line in
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                return !trimmed.isEmpty && !trimmed.hasPrefix("#")
            }
            do {
                if hasContent { providers.append(try await FileProvider<YAMLSnapshot>(filePath: FilePath(file))) }
            } catch {
                let detail = "\(error)".split(separator: "\n").prefix(2).joined(separator: ": ")
                throw CLIError("the configuration file \(file) is not valid YAML (\(detail))")
            }
            source = "\(file) and environment variables"
        }
        return ConfigurationFile(reader: ConfigReader(providers: providers), source: source)
    }

    private func environmentName(_ key: String) -> String {
        key.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    private func invalid(_ key: String, _ what: String) -> CLIError {
        CLIError("configuration key \(key) (\(environmentName(key)) in the environment) \(what)")
    }

    /// Distinguishes "absent" (nil) from "present but not convertible" (an error naming the key).
    private func read<T>(_ key: String, _ type: String, _ body: (ConfigKey) throws -> T) throws -> T? {
        do {
            return try body(ConfigKey(key))
        } catch {
            if "\(error)".hasPrefix("Missing required config value") { return nil }
            throw invalid(key, "must be \(type)")
        }
    }

    func string(_ key: String) throws -> String? {
        guard let value = try read(key, "a string", { try reader.requiredString(forKey: $0) }) else { return nil }
        guard !value.isEmpty else { throw invalid(key, "must not be empty") }
        return value
    }

    func int(_ key: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let value = try read(key, "a whole number", { try reader.requiredInt(forKey: $0) }) else { return nil }
        guard range.contains(value) else { throw invalid(key, "must be from \(range.lowerBound) to \(range.upperBound), not \(value)") }
        return value
    }

    func seconds(_ key: String) throws -> Double? {
        try int(key, in: 1...(10 * 365 * 86_400)).map(Double.init)
    }

    func strings(_ key: String) throws -> [String]? {
        try read(key, "a list of strings", { try reader.requiredStringArray(forKey: $0) })
    }

    /// The Runtime's settings from this configuration, on top of the embedded defaults.
    func runtimeConfiguration() throws -> RuntimeConfiguration {
        var configuration = RuntimeConfiguration()
        if let value = try string("runtime.host") { configuration.host = value }
        if let value = try int("runtime.port", in: 0...65_535) { configuration.port = value }
        if let value = try string("runtime.name") { configuration.name = value }
        if let value = try string("gateway.issuer") { configuration.assertionIssuer = value }
        if let value = try seconds("runtime.anonymous_idle_timeout_seconds") { configuration.anonymousIdleTimeout = value }
        if let value = try seconds("runtime.authenticated_idle_timeout_seconds") { configuration.authenticatedIdleTimeout = value }
        if let value = try seconds("runtime.authenticated_lifetime_seconds") { configuration.authenticatedLifetime = value }
        if let value = try seconds("runtime.sweep_interval_seconds") { configuration.sweepInterval = value }
        if let value = try int("runtime.max_message_bytes", in: 1_024...(16 << 20)) { configuration.maximumMessageBytes = value }
        if let value = try int("runtime.max_metadata_bytes", in: 2...(1 << 20)) { configuration.maximumMetadataBytes = value }
        if let value = try strings("contracts.anonymous_intents") { configuration.anonymousIntents = Set(value) }
        return configuration
    }

    func bool(_ key: String) throws -> Bool? {
        try read(key, "true or false", { try reader.requiredBool(forKey: $0) })
    }

    /// An absolute `http://` or `https://` URL without a query or fragment.
    func url(_ key: String) throws -> String? {
        guard let value = try string(key) else { return nil }
        guard let url = URL(string: value), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = url.host, !host.isEmpty, url.query == nil, url.fragment == nil
        else { throw invalid(key, "must be an http:// or https:// URL such as http://127.0.0.1:8080, not \"\(value)\"") }
        return value
    }

    func rateLimit(_ key: String, default fallback: RateLimit) throws -> RateLimit {
        var limit = fallback
        if let value = try int(key + ".per_minute", in: 1...1_000_000) { limit.perMinute = Double(value) }
        if let value = try int(key + ".burst", in: 1...1_000_000) { limit.burst = value }
        return limit
    }

    /// The gateway's settings from this configuration, on top of the embedded defaults.
    func gatewayConfiguration() throws -> GatewayConfiguration {
        var configuration = GatewayConfiguration()
        if let value = try string("gateway.host") { configuration.host = value }
        if let value = try int("gateway.port", in: 0...65_535) { configuration.port = value }
        if let value = try url("gateway.issuer") { configuration.issuer = value }
        if let value = try string("gateway.audience") { configuration.audience = value }
        if let value = try string("gateway.client_id") { configuration.clientID = value }
        if let value = try string("gateway.default_tenant") {
            guard AccountService.isValidName(value) else { throw invalid("gateway.default_tenant", "must be 1-64 letters, digits or . _ @ + -") }
            configuration.defaultTenant = value
        }
        if let value = try int("gateway.max_body_bytes", in: 1_024...(64 << 20)) { configuration.maximumBodyBytes = value }
        if let value = try int("gateway.max_message_bytes", in: 1_024...(16 << 20)) { configuration.maximumMessageBytes = value }
        if let origins = try strings("gateway.allowed_origins") {
            for origin in origins {
                guard let url = URL(string: origin), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil,
                    url.path.isEmpty, url.query == nil
                else { throw invalid("gateway.allowed_origins", "must list origins such as https://app.example.com (scheme, host, port; no path), not \"\(origin)\"") }
            }
            configuration.allowedOrigins = origins
        }
        if let proxies = try strings("gateway.trusted_proxies") {
            configuration.trustedProxies = try proxies.map { text in
                guard let network = IPNetwork(text) else {
                    throw invalid("gateway.trusted_proxies", "must list IP addresses or CIDR networks such as 10.0.0.0/8, not \"\(text)\"")
                }
                return network
            }
        }
        switch (try string("gateway.tls.certificate_path"), try string("gateway.tls.private_key_path")) {
        case (nil, nil): break
        case (let certificate?, let key?): configuration.tls = TLSFiles(certificatePath: certificate, privateKeyPath: key)
        case (nil, _): throw invalid("gateway.tls.certificate_path", "is required when gateway.tls.private_key_path is set")
        case (_, nil): throw invalid("gateway.tls.private_key_path", "is required when gateway.tls.certificate_path is set")
        }
        if let routes = try strings("gateway.routes") {
            configuration.routes = try routes.map { text in
                let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, parts[0].hasPrefix("/"), let url = URL(string: parts[1]), ["http", "https"].contains(url.scheme ?? "") else {
                    throw invalid("gateway.routes", "must list PREFIX=URL entries such as /api/billing=http://127.0.0.1:9000, not \"\(text)\"")
                }
                return ProxyRoute(prefix: parts[0], upstream: parts[1])
            }
        }
        if try bool("admin.enabled") == false { configuration.adminPort = nil }
        if let value = try string("admin.host") { configuration.adminHost = value }
        if configuration.adminPort != nil, let value = try int("admin.port", in: 0...65_535) { configuration.adminPort = value }

        if let value = try seconds("tokens.access_token_lifetime_seconds") { configuration.accessTokenLifetime = value }
        if let value = try seconds("tokens.refresh_token_lifetime_seconds") { configuration.refreshTokenLifetime = value }
        if let value = try int("tokens.leeway_seconds", in: 0...600) { configuration.leeway = Double(value) }
        if let value = try seconds("tokens.max_lifetime_seconds") { configuration.maximumTokenLifetime = value }
        guard configuration.accessTokenLifetime <= configuration.maximumTokenLifetime else {
            throw invalid("tokens.access_token_lifetime_seconds", "must not exceed tokens.max_lifetime_seconds (\(Int(configuration.maximumTokenLifetime)))")
        }

        if let value = try int("limits.max_header_bytes", in: 1_024...(1 << 20)) { configuration.limits.maximumHeaderBytes = value }
        if let value = try int("limits.request_head_timeout_seconds", in: 1...300) { configuration.limits.requestHeadTimeout = Double(value) }
        if let value = try int("limits.idle_timeout_seconds", in: 1...3_600) { configuration.limits.idleTimeout = Double(value) }
        if let value = try int("limits.max_connections", in: 1...1_000_000) { configuration.limits.maximumConnections = value }
        if let value = try int("limits.ws_messages_per_second", in: 1...100_000) { configuration.limits.webSocketMessagesPerSecond = Double(value) }
        if let value = try int("limits.ws_ping_interval_seconds", in: 1...3_600) { configuration.limits.webSocketPingInterval = Double(value) }

        if let value = try string("runtime.name") { configuration.runtimeName = value }
        configuration.runtimeURL = try url("runtime.url")
        if let value = try int("runtime.timeout_seconds", in: 1...300) { configuration.runtimeTimeout = Double(value) }

        for rule in AdmissionRateLimits.Rule.allCases {
            configuration.rateLimits[rule] = try rateLimit("rate_limits." + rule.rawValue, default: configuration.rateLimits[rule])
        }
        if let value = try int("contracts.sessions_per_user", in: 1...100_000) { configuration.contract.maximumSessionsPerUser = value }
        if let value = try int("contracts.sockets_per_session", in: 1...10_000) { configuration.contract.maximumSocketsPerSession = value }
        if let value = try strings("contracts.anonymous_intents") { configuration.contract.anonymousIntents = Set(value) }
        return configuration
    }

    /// `logging.format`: text (default) or json; `logging.level`.
    func logging() throws -> (format: LogFormat, level: String) {
        var format = LogFormat.text
        if let value = try string("logging.format") {
            guard let parsed = LogFormat(rawValue: value) else { throw invalid("logging.format", "must be text or json, not \"\(value)\"") }
            format = parsed
        }
        let level = try string("logging.level") ?? "info"
        guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(level) else {
            throw invalid("logging.level", "must be one of trace, debug, info, notice, warning, error, critical")
        }
        return (format, level)
    }
}
