import ConfigurationReading
import Foundation
import Gateway
import Runtime
import StateSurface
import Testing
import TrustedIssuers

@testable import portcullis

/// The committed `config/portcullis.yaml` and the configuration types must
/// state the same keys and the same defaults: the file is the documentation.
@Suite("config/portcullis.yaml states exactly the code's keys and defaults")
struct ConfigurationDefaultsTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("config/portcullis.yaml").path

    /// Keys without a default (absent means "not used"); the YAML documents each in a comment.
    static let optionalKeys: Set<String> = [
        "runtime.url", "storage.postgres_url", "keys.jwks_file", "gateway.tls.certificate_path", "gateway.tls.private_key_path", "trust.issuers", "authorization_server.clients", "connections",
        "gateway.upstream_ca_file", "gateway.client_directory", "gateway.public_url", "gateway.cookie_domain", "gateway.issuer",
        // Read (and checked) with or without a URL, documented beside it as comments.
        "storage.postgres_pool_size", "storage.postgres_max_waiters", "storage.postgres_connect_timeout_seconds",
        "storage.postgres_query_timeout_seconds", "storage.postgres_tls", "storage.postgres_ca_file",
        // ext_authz is off unless a port is set.
        "ext_authz.http_port", "ext_authz.grpc_port",
        // Plaintext unless ext_authz.tls is set (all four together).
        "ext_authz.tls.certificate_path", "ext_authz.tls.private_key_path", "ext_authz.tls.client_ca_path", "ext_authz.tls.caller_names",
        // Traces are off unless an endpoint is set.
        "tracing.endpoint",
    ]

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

    @Test("without gateway.issuer the issuer follows the configuration: public_url, else the listener's own URL (its port, https with tls, a wildcard host as 127.0.0.1), read alike by the gateway and a separate Runtime; gateway.issuer wins")
    func issuerFollowsTheListener() async throws {
        let directory = NSTemporaryDirectory() + "portcullis-issuer-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func issuers(_ yaml: String) async throws -> (gateway: String, derived: Bool, runtime: String) {
            let path = directory + "/\(UUID().uuidString).yaml"
            try yaml.write(toFile: path, atomically: true, encoding: .utf8)
            let values = try await ConfigurationValues.load(path: path, environment: false)
            let gateway = try GatewayConfiguration(reading: values)
            return (gateway.issuer, gateway.issuerIsDerived, try RuntimeConfiguration(reading: values).assertionIssuer)
        }
        let port = try await issuers("gateway:\n  port: 27080\n")
        #expect(port.gateway == "http://127.0.0.1:27080" && port.derived && port.runtime == port.gateway)
        let wildcard = try await issuers("gateway:\n  host: 0.0.0.0\n  port: 9000\n")
        #expect(wildcard.gateway == "http://127.0.0.1:9000" && wildcard.derived)
        let tls = try await issuers("gateway:\n  port: 8443\n  tls:\n    certificate_path: c.pem\n    private_key_path: k.pem\n")
        #expect(tls.gateway == "https://127.0.0.1:8443")
        let ipv6 = try await issuers("gateway:\n  host: \"::1\"\n  port: 8081\n")
        #expect(ipv6.gateway == "http://[::1]:8081")
        let publicURL = try await issuers("gateway:\n  port: 27080\n  public_url: https://auth.example.com/\n")
        #expect(publicURL.gateway == "https://auth.example.com" && publicURL.runtime == "https://auth.example.com")
        let explicit = try await issuers("gateway:\n  port: 27080\n  issuer: https://tokens.example.com\n  public_url: https://auth.example.com\n")
        #expect(explicit.gateway == "https://tokens.example.com" && !explicit.derived && explicit.runtime == explicit.gateway)
        let none = try await issuers("runtime:\n  name: other\n")
        #expect(none.gateway == "http://127.0.0.1:8080" && none.derived, "the listener's default URL")
    }
}

@Suite("trust.issuers: a list of maps read from the file, checked entry by entry")
struct TrustConfigurationTests {
    static func load(_ yaml: String) async throws -> ConfigurationValues {
        let directory = NSTemporaryDirectory() + "portcullis-trust-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try yaml.write(toFile: directory + "/trust.yaml", atomically: true, encoding: .utf8)
        return try await ConfigurationValues.load(path: directory + "/trust.yaml", environment: false)
    }

    /// The commented example under `trust:` in config/portcullis.yaml, uncommented.
    static func committedExample() throws -> String {
        let text = try String(contentsOfFile: ConfigurationDefaultsTests.file, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: "trust:") else { throw TrustExampleMissing() }
        var example = ["trust:"]
        for line in lines[(start + 1)...] where line.hasPrefix("  # ") || line.hasPrefix("  #   ") {
            let uncommented = "  " + line.dropFirst(4)
            // Settings commented out inside the example stay comments.
            example.append(String(uncommented))
        }
        return example.joined(separator: "\n") + "\n"
    }

    struct TrustExampleMissing: Error {}

    @Test("the committed example reads, beside scalar keys the library still reads, and names every setting an entry has")
    func committedExample() async throws {
        let example = try Self.committedExample()
        let values = try await Self.load("gateway:\n  port: 9999\n" + example)
        let trust = try TrustConfiguration(reading: values, gatewayIssuer: "http://127.0.0.1:8080")
        #expect(trust.issuers.map(\.issuer) == ["https://idp.example.com/realms/acme", "https://PROJECT.supabase.co/auth/v1"])
        #expect(trust.issuers.first?.keySource == .discovery)
        #expect(trust.issuers.first?.algorithms == [.rs256, .es256])
        #expect(trust.issuers.first?.tenant == .fixed("acme"))
        #expect(trust.issuers.last?.keySource == .secret(file: "keys/supabase.secret"))
        #expect(try GatewayConfiguration(reading: values).port == 9999, "the rest of the file is still read by the library")
        for name in TrustedIssuer.settingNames.union(ProviderLoginSettings.settingNames) {
            #expect(example.contains(" \(name):"), "\(name) is documented in config/portcullis.yaml")
        }
        #expect(trust.issuers.first?.login == ProviderLoginSettings(
            name: "acme", displayName: "Acme SSO", clientID: "portcullis", authentication: .secretBasic(file: "keys/acme.secret")))
    }

    @Test(
        "a bad entry stops start with a message naming the entry and the key",
        arguments: [
            ("- audiences: [a]\n      tenant: t", "trust.issuers[0].issuer"),
            ("- issuer: https://idp.example.com\n      tenant: t", "trust.issuers[0].audiences"),
            ("- issuer: https://idp.example.com\n      audiences: []\n      tenant: t", "trust.issuers[0].audiences"),
            ("- issuer: https://idp.example.com\n      audiences: [a]", "trust.issuers[0].tenant"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      algorithms: [none]", "trust.issuers[0].algorithms"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      algorithms: [HS256]", "trust.issuers[0].algorithms"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      secret_file: s\n      algorithms: [RS256]", "trust.issuers[0].algorithms"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      secret_file: s\n      jwks_url: https://idp.example.com/k", "trust.issuers[0].secret_file"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      jwks_url: http://idp.example.com/k", "trust.issuers[0].jwks_url"),
            ("- issuer: http://idp.example.com\n      audiences: [a]\n      tenant: t", "trust.issuers[0].issuer"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      tenant_claim: org", "trust.issuers[0].tenant_claim"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      audience: [b]", "trust.issuers[0].audience"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      max_stale_seconds: 1", "trust.issuers[0].max_stale_seconds"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n    - issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t", "trust.issuers[1].issuer"),
            ("- issuer: http://127.0.0.1:8080\n      audiences: [a]\n      tenant: t", "trust.issuers[0].issuer"),
            // Loopback by its spelling: four decimal octets (Int would read +1), never a name beginning 127.
            ("- issuer: http://127.0.0.+1:9000\n      audiences: [a]\n      tenant: t", "trust.issuers[0].issuer"),
            ("- issuer: http://127.example.com\n      audiences: [a]\n      tenant: t", "trust.issuers[0].issuer"),
            ("- just-a-string", "trust.issuers[0]"),
            // A tenant_claim names the tenants it may produce; tenants go with tenant_claim only.
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant_claim: org", "trust.issuers[0].tenants"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant_claim: org\n      tenants: []", "trust.issuers[0].tenants"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant_claim: org\n      tenants: [a b]", "trust.issuers[0].tenants"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      tenants: [t]", "trust.issuers[0].tenants"),
            // A login: a map of its own settings, checked key by key; it needs discovery; names are unique.
            (TrustConfigurationTests.withLogin("client_id: c\n        client_secret_file: s"), "trust.issuers[0].login.name"),
            (TrustConfigurationTests.withLogin("name: Acme\n        client_id: c\n        client_secret_file: s"), "trust.issuers[0].login.name"),
            (TrustConfigurationTests.withLogin("name: a/b\n        client_id: c\n        client_secret_file: s"), "trust.issuers[0].login.name"),
            (TrustConfigurationTests.withLogin("name: acme\n        client_secret_file: s"), "trust.issuers[0].login.client_id"),
            (TrustConfigurationTests.withLogin("name: acme\n        client_id: c"), "trust.issuers[0].login.client_secret_file"),
            (TrustConfigurationTests.withLogin("name: acme\n        client_id: c\n        client_secret_file: s\n        private_key_file: k"), "trust.issuers[0].login.private_key_file"),
            (TrustConfigurationTests.withLogin("name: acme\n        client_id: c\n        client_secret_file: s\n        scopes: [profile]"), "trust.issuers[0].login.scopes"),
            (TrustConfigurationTests.withLogin("name: acme\n        client_id: c\n        client_secret_file: s\n        scopes: [\"open id\"]"), "trust.issuers[0].login.scopes"),
            (TrustConfigurationTests.withLogin("name: acme\n        client_id: c\n        client_secret_file: s\n        redirect_uri: x"), "trust.issuers[0].login.redirect_uri"),
            (TrustConfigurationTests.withLogin("name: acme\n        client_id: c\n        client_secret_file: s\n        token_endpoint_origin: https://o.example.com/token"), "trust.issuers[0].login.token_endpoint_origin"),
            (TrustConfigurationTests.withLogin("name: acme\n        client_id: c\n        client_secret_file: s\n        token_endpoint_origin: http://o.example.com"), "trust.issuers[0].login.token_endpoint_origin"),
            // An issuer users sign in through: its client_id is never an access token's audience, users are keyed by sub.
            ("- issuer: https://idp.example.com\n      audiences: [a, c]\n      tenant: t\n      login:\n        name: acme\n        client_id: c\n        client_secret_file: s", "trust.issuers[0].audiences"),
            (TrustConfigurationTests.withLogin("name: acme\n        client_id: c\n        client_secret_file: s") + "\n      subject_claim: email", "trust.issuers[0].subject_claim"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      access_token_type: JWT", "trust.issuers[0].access_token_type"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      access_tokens_carry_nonce: maybe", "trust.issuers[0].access_tokens_carry_nonce"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      login: acme", "trust.issuers[0].login"),
            ("- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      jwks_url: https://idp.example.com/k\n      login:\n        name: acme\n        client_id: c\n        client_secret_file: s", "trust.issuers[0].login"),
            (TrustConfigurationTests.withLogin("name: acme\n        client_id: c\n        client_secret_file: s") + "\n    - issuer: https://other.example.com\n      audiences: [a]\n      tenant: t\n      login:\n        name: acme\n        client_id: c\n        client_secret_file: s", "trust.issuers[1].login.name"),
        ])
    func badEntries(_ pair: (String, String)) async throws {
        // The shape of the list is checked as the file is loaded; each entry's settings as the section is read.
        do {
            let values = try await Self.load("trust:\n  issuers:\n    " + pair.0 + "\n")
            _ = try TrustConfiguration(reading: values, gatewayIssuer: "http://127.0.0.1:8080")
            Issue.record("accepted: \(pair.0)")
        } catch let error as ConfigurationError {
            #expect(error.message.hasPrefix("configuration key \(pair.1) "), "\(error.message)")
        }
    }

    /// An issuer entry with a `login` map holding `settings` (indented as the map's lines).
    static func withLogin(_ settings: String) -> String {
        "- issuer: https://idp.example.com\n      audiences: [a]\n      tenant: t\n      login:\n        " + settings
    }

    @Test("loopback issuers may use plain http (for tests on one machine); nothing else may")
    func loopbackHTTP() async throws {
        let values = try await Self.load(
            "trust:\n  issuers:\n    - issuer: http://127.0.0.1:9000/realms/x\n      audiences: [a]\n      tenant_claim: org\n      tenants: [acme, globex]\n")
        let trust = try TrustConfiguration(reading: values, gatewayIssuer: "http://127.0.0.1:8080")
        #expect(trust.issuers.first?.tenant == .claim("org", tenants: ["acme", "globex"]))
    }
}
