import Configuration
import Foundation
import Runtime
import SystemPackage

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
        if let value = try strings("runtime.anonymous_intents") { configuration.anonymousIntents = Set(value) }
        return configuration
    }
}
