// ConfigurationReading: typed, key-naming reads of config/portcullis.yaml and the environment, for every module's configuration type.
import Configuration
import Foundation
import Synchronization
import SystemPackage

/// The configuration the modules read themselves from: a YAML file (optional),
/// environment variables over it, and typed reads that name the key when a
/// value is wrong.
///
/// Precedence, highest first: environment variables (upper case, dots as
/// underscores: `runtime.port` is `RUNTIME_PORT`), the file, the defaults each
/// configuration type declares. A key is "absent" when no provider has a value
/// for it, decided by asking the providers, never by reading an error's text.
public final class ConfigurationValues: Sendable {
    public static let defaultPath = "config/portcullis.yaml"

    let reader: ConfigReader
    let providers: [any ConfigProvider]
    /// The lists of maps read from the file (`trust.issuers`), by key.
    let maps: [String: [ConfigurationMap]]
    /// Where the values came from, for a start-up log line.
    public let source: String
    private let keysRead = Mutex<Set<String>>([])
    /// Every key the file sets (dotted, to its scalars and lists), the lists of maps as one key each.
    let fileKeys: Set<String>
    /// The file read, for messages; `nil` without one.
    let file: String?

    init(providers: [any ConfigProvider], source: String, maps: [String: [ConfigurationMap]] = [:], file: String? = nil, fileKeys: Set<String> = []) {
        self.providers = providers
        self.maps = maps
        self.file = file
        self.fileKeys = fileKeys
        // ConfigReader needs at least one provider; an empty one answers "absent" for every key.
        self.reader = ConfigReader(providers: providers.isEmpty ? [InMemoryProvider(values: [:])] : providers)
        self.source = source
    }

    /// No file, no environment: every read answers the default (for tests and docs).
    public static func defaultsOnly() -> ConfigurationValues { ConfigurationValues(providers: [], source: "defaults") }

    /// The file at `path` (must exist), or `config/portcullis.yaml` when it exists; environment variables over it.
    ///
    /// - Parameter environment: `false` reads the file alone (the test that compares it with the code's defaults).
    public static func load(path: String?, environment: Bool = true) async throws -> ConfigurationValues {
        var providers: [any ConfigProvider] = environment ? [EnvironmentVariablesProvider()] : []
        var source = environment ? "environment variables and defaults" : "defaults"
        let file = path ?? (FileManager.default.fileExists(atPath: defaultPath) ? defaultPath : nil)
        if let file {
            guard FileManager.default.fileExists(atPath: file) else {
                throw ConfigurationError(file: file, "the configuration file \(file) does not exist")
            }
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw ConfigurationError(file: file, "the configuration file \(file) cannot be read by this user; run as the user serve runs as")
            }
            // A file of only comments and blank lines is an empty configuration, not an error.
            let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            let hasContent = text.split(separator: "\n").contains { line in
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                return !trimmed.isEmpty && !trimmed.hasPrefix("#")
            }
            var maps: [String: [ConfigurationMap]] = [:]
            var fileKeys: Set<String> = []
            do {
                if hasContent {
                    // The lists of maps first (the library refuses them), then the rest through the library.
                    maps = try MapListSections.read(text)
                    fileKeys = try MapListSections.keyPaths(text)
                    providers.append(try await FileProvider<MapListFreeYAMLSnapshot>(filePath: FilePath(file)))
                }
            } catch let error as ConfigurationError {
                throw error
            } catch {
                let detail = "\(error)".split(separator: "\n").prefix(2).joined(separator: ": ")
                throw ConfigurationError(file: file, "the configuration file \(file) is not valid YAML (\(detail))")
            }
            source = environment ? "\(file) and environment variables" : file
            return ConfigurationValues(providers: providers, source: source, maps: maps, file: file, fileKeys: fileKeys)
        }
        return ConfigurationValues(providers: providers, source: source)
    }

    /// The list of maps at `key` (`trust.issuers`), from the file only; `nil` when absent.
    ///
    /// Only the keys in `MapListSections.keys` are read this way.
    public func mapList(_ key: String) -> [ConfigurationMap]? {
        keysRead.withLock { _ = $0.insert(key) }
        return maps[key]
    }

    /// Refuses a key the file sets that no configuration type read: a misspelling (`gatway:`,
    /// `prot:`) would otherwise be silently ignored, and its default used. Call it once every type
    /// that reads this configuration has read it. An entry of a list of maps (a route, a trusted
    /// issuer) checks its own keys as it is read. A reader reads every key it knows whatever the
    /// others say (`admin.port` with the listener off), so none is taken for unknown.
    public func refuseUnknownKeys() throws(ConfigurationError) {
        let known = readKeys
        // Every file key is a scalar or a list (`keyPaths`): a section given a scalar (`admin: false`)
        // is a key of its own, and unknown.
        let unknown = fileKeys.subtracting(known).sorted()
        guard let first = unknown.first else { return }
        let near = known.min { Self.distance(first, $0) < Self.distance(first, $1) }
        let suggestion = near.map { Self.distance(first, $0) <= 3 ? "; did you mean \($0)?" : "" } ?? ""
        throw ConfigurationError(
            fileKey: first,
            "in \(file ?? "the file") is not a setting portcullis knows\(suggestion) (the default portcullis.yaml lists every key with its default)"
                + (unknown.count > 1 ? "; also unknown: \(unknown.dropFirst().joined(separator: ", "))" : ""))
    }

    /// Levenshtein distance, for the suggestion.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// Every key read so far (a test checks the committed YAML names exactly these).
    public var readKeys: Set<String> { keysRead.withLock { $0 } }

    /// The keys read from both whose values differ between `self` and `other` (a key set in one
    /// and absent from the other included), sorted: what a reload changes.
    /// Each key read and its value as text (as `changedKeys` compares them): for a fingerprint of
    /// the values a process started with, which another process can compare without the values.
    public var readValues: [String: String] {
        var values: [String: String] = [:]
        for key in readKeys { if let value = rawValue(key) { values[key] = value } }
        return values
    }

    public func changedKeys(from other: ConfigurationValues) -> [String] {
        readKeys.union(other.readKeys).filter { rawValue($0) != other.rawValue($0) }.sorted()
    }

    /// `key`'s value as its first provider holds it, compared as text; `nil` when absent.
    private func rawValue(_ key: String) -> String? {
        if let list = maps[key] { return String(describing: list) }
        let absolute = AbsoluteConfigKey(key.split(separator: ".").map(String.init))
        for provider in providers {
            if let value = try? provider.value(forKey: absolute, type: .string).value { return String(describing: value) }
            if let value = try? provider.value(forKey: absolute, type: .stringArray).value { return String(describing: value) }
        }
        return nil
    }

    /// True when some provider has a value for `key` (a value of the wrong type counts as present).
    func isPresent(_ key: String) -> Bool {
        let absolute = AbsoluteConfigKey(key.split(separator: ".").map(String.init))
        return providers.contains { provider in
            do {
                return try provider.value(forKey: absolute, type: .string).value != nil
                    || (try provider.value(forKey: absolute, type: .stringArray).value != nil)
            } catch {
                return true
            }
        }
    }

    /// `nil` when absent; the converted value when present; a `ConfigurationError` naming the key otherwise.
    private func read<T>(_ key: String, _ type: String, _ body: (ConfigKey) throws -> T) throws(ConfigurationError) -> T? {
        keysRead.withLock { _ = $0.insert(key) }
        guard isPresent(key) else { return nil }
        do {
            return try body(ConfigKey(key))
        } catch {
            throw ConfigurationError(key: key, "must be \(type)")
        }
    }

    public func string(_ key: String) throws(ConfigurationError) -> String? {
        guard let value = try read(key, "a string", { try reader.requiredString(forKey: $0) }) else { return nil }
        guard !value.isEmpty else { throw ConfigurationError(key: key, "must not be empty") }
        return value
    }

    public func int(_ key: String, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
        guard let value = try read(key, "a whole number", { try reader.requiredInt(forKey: $0) }) else { return nil }
        guard range.contains(value) else { throw ConfigurationError(key: key, "must be from \(range.lowerBound) to \(range.upperBound), not \(value)") }
        return value
    }

    /// A whole number of seconds from 1 to ten years.
    public func seconds(_ key: String) throws(ConfigurationError) -> Double? {
        try int(key, in: 1...(10 * 365 * 86_400)).map(Double.init)
    }

    public func strings(_ key: String) throws(ConfigurationError) -> [String]? {
        try read(key, "a list of strings", { try reader.requiredStringArray(forKey: $0) })
    }

    public func bool(_ key: String) throws(ConfigurationError) -> Bool? {
        try read(key, "true or false", { try reader.requiredBool(forKey: $0) })
    }

    /// A number (`0.25`, or a whole one) within `range`.
    public func double(_ key: String, in range: ClosedRange<Double>) throws(ConfigurationError) -> Double? {
        guard let value = try read(key, "a number", { try reader.requiredDouble(forKey: $0) }) else { return nil }
        guard value.isFinite, range.contains(value) else {
            throw ConfigurationError(key: key, "must be a number from \(range.lowerBound) to \(range.upperBound), not \(value)")
        }
        return value
    }

    /// An absolute `http://` or `https://` URL without a query or fragment.
    public func url(_ key: String) throws(ConfigurationError) -> String? {
        guard let value = try string(key) else { return nil }
        guard let url = URL(string: value), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = url.host, !host.isEmpty, url.query == nil, url.fragment == nil
        else { throw ConfigurationError(key: key, "must be an http:// or https:// URL such as http://127.0.0.1:8080, not \"\(value)\"") }
        return value
    }
}

/// A configuration value that cannot be used, naming its key and what is wrong.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key (`runtime.port`), or `nil` for a problem with the file itself.
    public let key: String?
    public let message: String

    public init(key: String, _ problem: String) {
        self.key = key
        message = "configuration key \(key) (\(Self.environmentName(key)) in the environment) \(problem)"
    }

    init(file: String, _ message: String) {
        key = nil
        self.message = message
    }

    /// A key read from the file only (an entry of a list of maps, which has no environment spelling).
    public init(fileKey key: String, _ problem: String) {
        self.key = key
        message = "configuration key \(key) \(problem)"
    }

    /// `runtime.port` → `RUNTIME_PORT`.
    public static func environmentName(_ key: String) -> String {
        key.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    public var description: String { message }
}
