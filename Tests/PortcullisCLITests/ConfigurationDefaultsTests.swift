import ConfigurationReading
import Foundation
import Gateway
import Runtime
import StateSurface
import Testing

@testable import portcullis

/// The committed `config/portcullis.yaml` and the configuration types must
/// state the same keys and the same defaults: the file is the documentation.
@Suite("config/portcullis.yaml states exactly the code's keys and defaults")
struct ConfigurationDefaultsTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("config/portcullis.yaml").path

    /// Keys without a default (absent means "not used"); the YAML documents each in a comment.
    static let optionalKeys: Set<String> = ["runtime.url", "storage.postgres_url", "keys.jwks_file", "gateway.tls.certificate_path", "gateway.tls.private_key_path"]

    /// Every configuration type, read from `values`.
    static func readAll(_ values: ConfigurationValues) throws -> (GatewayConfiguration, RuntimeConfiguration, StorageConfiguration, CommandLineSettings) {
        (try GatewayConfiguration(reading: values), try RuntimeConfiguration(reading: values), try StorageConfiguration(reading: values),
         try CommandLineSettings(reading: values))
    }

    /// The leaf keys the YAML sets (`section.sub.key`), from its indentation.
    static func yamlKeys(_ text: String) -> Set<String> {
        var keys = Set<String>()
        var stack: [(indent: Int, name: String)] = []
        for rawLine in text.split(separator: "\n") {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            guard !line.trimmingCharacters(in: .whitespaces).isEmpty, let colon = line.firstIndex(of: ":") else { continue }
            let indent = line.prefix { $0 == " " }.count
            let name = line[..<colon].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            while let last = stack.last, last.indent >= indent { stack.removeLast() }
            if value.isEmpty {
                stack.append((indent, name))
            } else {
                keys.insert((stack.map(\.name) + [name]).joined(separator: "."))
            }
        }
        return keys
    }

    @Test("every key the YAML sets is read by the code, and every key the code reads is in the YAML (optional ones as comments)")
    func sameKeys() throws {
        let values = ConfigurationValues.defaultsOnly()
        _ = try Self.readAll(values)
        let text = try String(contentsOfFile: Self.file, encoding: .utf8)
        let inFile = Self.yamlKeys(text)
        #expect(inFile == values.readKeys.subtracting(Self.optionalKeys), "only in the YAML: \(inFile.subtracting(values.readKeys)); only in code: \(values.readKeys.subtracting(inFile).subtracting(Self.optionalKeys))")
        for key in Self.optionalKeys {
            #expect(values.readKeys.contains(key), "\(key) is read by the code")
            let name = key.split(separator: ".").last.map(String.init) ?? key
            #expect(text.contains("# " + name + ":") || text.contains("#   " + name + ":") || text.contains("#  " + name + ":"), "\(key) is documented in the YAML")
        }
    }

    @Test("every value the YAML states equals the code's default")
    func sameValues() async throws {
        let fromFile = try Self.readAll(try await ConfigurationValues.load(path: Self.file, environment: false))
        let defaults = try Self.readAll(ConfigurationValues.defaultsOnly())
        #expect(fromFile.0 == defaults.0)
        #expect(fromFile.0 == GatewayConfiguration())
        #expect(fromFile.1 == RuntimeConfiguration())
        #expect(fromFile.1.port == 8081)
        #expect(fromFile.2 == StorageConfiguration())
        #expect(fromFile.3 == CommandLineSettings())
    }

    @Test("a value of the wrong type is an error naming the key; an absent key is the default, decided without reading error text")
    func presenceAndErrors() async throws {
        let directory = NSTemporaryDirectory() + "portcullis-config-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "runtime:\n  port: \"eighty\"\n".write(toFile: directory + "/bad.yaml", atomically: true, encoding: .utf8)
        let bad = try await ConfigurationValues.load(path: directory + "/bad.yaml", environment: false)
        #expect(throws: ConfigurationError.self) { try RuntimeConfiguration(reading: bad) }
        do {
            _ = try RuntimeConfiguration(reading: bad)
        } catch {
            #expect(error.key == "runtime.port")
            #expect(error.message.contains("RUNTIME_PORT"))
        }
        try "runtime:\n  name: other\n".write(toFile: directory + "/partial.yaml", atomically: true, encoding: .utf8)
        let partial = try RuntimeConfiguration(reading: try await ConfigurationValues.load(path: directory + "/partial.yaml", environment: false))
        #expect(partial.name == "other")
        #expect(partial.port == RuntimeConfiguration().port)
    }
}
