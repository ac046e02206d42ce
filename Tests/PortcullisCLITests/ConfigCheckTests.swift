import Foundation
import PortcullisTestSupport
import Testing

@Suite("portcullis config check (the real binary)", .serialized)
struct ConfigCheckTests {
    /// The ```yaml blocks of a document.
    static func yamlBlocks(_ document: String) throws -> [String] {
        try UserDocsTests.read(document).components(separatedBy: "```yaml\n").dropFirst().compactMap { $0.components(separatedBy: "```").first }
    }

    /// Makes, in `cli`'s directory, every file a block names (`*_file:` and `*_path:`, comments
    /// included): a certificate and its key for the TLS keys, a PEM private key for a client key,
    /// a secret of 40 letters otherwise, each 0600. An absolute path (`/etc/portcullis/tls/...`) is
    /// made under the directory instead, and the block returned names it there.
    static func provideFiles(_ block: String, in cli: CLI) throws -> String {
        var yaml = block
        let references = block.matches(of: /(\w+_(?:file|path)):\s*([^\s,}#]+)/).map { (String($0.1), String($0.2)) }
        for (key, path) in references where path != "..." {
            let relative = path.hasPrefix("/") ? "absolute" + path : path
            yaml = yaml.replacingOccurrences(of: path, with: relative)
            try FileManager.default.createDirectory(
                atPath: cli.directory + "/" + (relative as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            switch key {
            case "certificate_path", "upstream_ca_file", "postgres_ca_file", "client_ca_path":
                let keyPath = (relative as NSString).deletingLastPathComponent + "/made-for-\((relative as NSString).lastPathComponent).key"
                try cli.openssl([
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=auth.example.com",
                    "-keyout", keyPath, "-out", relative,
                ])
                if key == "certificate_path", let keyReference = references.first(where: { $0.0 == "private_key_path" }) {
                    let keyRelative = keyReference.1.hasPrefix("/") ? "absolute" + keyReference.1 : keyReference.1
                    try FileManager.default.createDirectory(
                        atPath: cli.directory + "/" + (keyRelative as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                    try FileManager.default.copyItem(atPath: cli.directory + "/" + keyPath, toPath: cli.directory + "/" + keyRelative)
                    try cli.chmod(keyRelative, 0o600)
                }
            case "private_key_path":
                continue  // made with its certificate
            case "private_key_file":
                try cli.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", relative])
                try cli.chmod(relative, 0o600)
            default:
                try cli.write(relative, Array(String(repeating: "s", count: 40).utf8))
            }
        }
        return yaml
    }

    @Test("every configuration in the README, the reference and the guides is one serve would start with (config check exits 0), the files it names provided")
    func documentedConfigurationsAreGood() throws {
        var checked = 0
        for document in try UserDocsTests.userDocuments() {
            for (index, block) in try Self.yamlBlocks(document).enumerated() {
                let cli = try CLI()
                defer { cli.remove() }
                let yaml = try Self.provideFiles(block, in: cli)
                try cli.write("portcullis.yaml", Array(yaml.utf8), mode: 0o644)
                let result = try cli.run(["config", "check", "--config", "portcullis.yaml"])
                #expect(result.status == 0 && result.stdout.hasPrefix("configuration good"), "\(document), YAML block \(index + 1): \(result.stderr)")
                checked += 1
            }
        }
        #expect(checked >= 12, "the documents hold \(checked) YAML blocks; the README, GATEWAY.md and the guides have more")
    }

    @Test("config check says what serve would refuse, exit 2, naming the key or the file: a value out of range, an unknown key, a secret others may read, a missing certificate")
    func refusals() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let cases: [(yaml: String, said: String)] = [
            ("gateway:\n  port: 99999\n", "gateway.port"),
            ("gateway:\n  prot: 8080\n", "gateway.prot in portcullis.yaml is not a setting portcullis knows; did you mean gateway.port?"),
            ("admin: false\n", "configuration key admin in portcullis.yaml is not a setting"),
            ("gateway:\n  tls:\n    certificate_path: missing.pem\n    private_key_path: missing.key\n", "gateway.tls.certificate_path"),
            // The issuer and the MCP servers' URLs would disagree with a path in the public URL.
            ("gateway:\n  public_url: https://auth.example.com/portcullis\n", "gateway.public_url (GATEWAY_PUBLIC_URL in the environment) must be an origin"),
            // A bad upstream is the upstream's fault, not the prefix's.
            ("gateway:\n  routes:\n    - {prefix: /x, upstream: 'ftp://nowhere'}\n", "gateway.routes[0].upstream"),
            (
                "trust:\n  issuers:\n    - issuer: https://id.example.com\n      audiences: [api]\n      tenant: acme\n      secret_file: shared.secret\n      algorithms: [HS256]\n",
                "shared.secret"
            ),
            // A confidential client's secret: owner-only, and not a guessable few bytes.
            (
                "authorization_server:\n  clients:\n    - {client_id: ops, redirect_uris: ['http://127.0.0.1/cb'], client_secret_file: shared.secret}\n",
                "authorization_server.clients[0].client_secret_file"
            ),
            (
                "authorization_server:\n  clients:\n    - {client_id: ops, redirect_uris: ['http://127.0.0.1/cb'], client_secret_file: short.secret}\n",
                "holds 5 bytes; a client secret needs at least 16"
            ),
            (
                "authorization_server:\n  clients:\n    - {client_id: ops, redirect_uris: ['http://127.0.0.1/cb'], client_secret_file: spaced.secret}\n",
                "not printable ASCII without spaces"
            ),
        ]
        try cli.write("shared.secret", Array(String(repeating: "k", count: 40).utf8), mode: 0o644)
        try cli.write("short.secret", Array("short\n".utf8), mode: 0o600)
        try cli.write("spaced.secret", Array("a secret with spaces in it\n".utf8), mode: 0o600)
        for (yaml, said) in cases {
            try cli.write("portcullis.yaml", Array(yaml.utf8), mode: 0o644)
            let result = try cli.run(["config", "check", "--config", "portcullis.yaml"])
            #expect(result.status == 2 && result.stderr.contains(said) && result.stdout.isEmpty, "\(yaml): \(result.status) \(result.stderr)")
        }
    }

    @Test("a key that takes effect only beside another is no unknown key: admin.port with admin.enabled false, the PostgreSQL settings without a URL (it may come from the environment); an empty section sets nothing", arguments: [
        "admin:\n  enabled: false\n  port: 9091\n",
        "storage:\n  postgres_pool_size: 8\n  postgres_tls: verify-full\n",
        "gateway:\ntrust:\n",
    ])
    func conditionalKeysAreKnown(yaml: String) throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.write("portcullis.yaml", Array(yaml.utf8), mode: 0o644)
        let result = try cli.run(["config", "check", "--config", "portcullis.yaml"])
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test("a plain-http public_url on a host other machines reach is warned about; on loopback it is not")
    func plainHTTPPublicURL() throws {
        let cli = try CLI()
        defer { cli.remove() }
        for (url, warned) in [("http://auth.example.com", true), ("http://127.0.0.1:8080", false), ("https://auth.example.com", false)] {
            try cli.write("portcullis.yaml", Array("gateway:\n  public_url: \(url)\n".utf8), mode: 0o644)
            let result = try cli.run(["config", "check", "--config", "portcullis.yaml"])
            #expect(result.status == 0 && result.stderr.contains("gateway.public_url is plain http") == warned, "\(url): \(result.stderr)")
        }
    }

    @Test("config check on a configuration serve accepts with a warning prints the warning on stderr and exits 0; nothing is created (no keys, not the providers' sealing key, no database)")
    func warningsAndNothingCreated() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.write("client.secret", Array(String(repeating: "s", count: 40).utf8))
        let yaml = """
            gateway:
              host: 0.0.0.0
            trust:
              issuers:
                - issuer: https://id.example.com
                  audiences: [api]
                  tenant: acme
                  login: {name: idp, client_id: portcullis, client_secret_file: client.secret}
            """
        try cli.write("portcullis.yaml", Array(yaml.utf8), mode: 0o644)
        let result = try cli.run(["config", "check", "--config", "portcullis.yaml"])
        #expect(result.status == 0 && result.stderr.contains("portcullis: warning: gateway.issuer is not set"), "\(result.stderr)")
        #expect(result.stdout.contains("1 sign-in provider(s), 0 connection(s); the gateway would listen on 0.0.0.0:8080"), "\(result.stdout)")
        #expect(!FileManager.default.fileExists(atPath: cli.directory + "/keys") && !FileManager.default.fileExists(atPath: cli.directory + "/data"))
    }
}

/// `config check` beside a running `serve` (issue 54): what a reload would put in force, keep for a
/// restart, or refuse (a sign-in provider's change: the check passed and the SIGHUP refused).
@Suite("portcullis config check against the running gateway (the real binary)", .serialized)
struct ConfigCheckRunningTests {
    @Test("beside a running serve, config check says a reload puts a route in force, keeps gateway.port for a restart, and would be refused for a sign-in provider's change; with serve stopped it says nothing of it")
    func againstTheRunningGateway() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let secret = cli.directory + "/client.secret"
        FileManager.default.createFile(atPath: secret, contents: Data("a client secret of forty letters, not less\n".utf8), attributes: [.posixPermissions: 0o600])
        func configuration(port: String = "0", clientID: String = "portcullis", routes: String = "[]") throws {
            try FileManager.default.createDirectory(atPath: cli.directory + "/config", withIntermediateDirectories: true)
            let yaml = """
                gateway:
                  port: \(port)
                  public_url: http://127.0.0.1:8080
                  routes: \(routes)
                admin:
                  enabled: false
                runtime:
                  port: 0
                logging:
                  format: json
                trust:
                  issuers:
                    - issuer: https://idp.example.test
                      audiences: [portcullis-api]
                      tenant: acme
                      login: {name: idp, client_id: \(clientID), client_secret_file: client.secret}

                """
            try yaml.write(toFile: cli.directory + "/config/portcullis.yaml", atomically: true, encoding: .utf8)
        }
        try configuration()
        let environment = ["LOGGING_FORMAT": "json"]
        let (process, _) = try ServerProcess.start(cli, ["serve"], environment: environment) { text in text.contains("gateway listening") ? 1 : nil }
        let running = "(pid \(process.pid))"
        try configuration(routes: "[\"/x=http://127.0.0.1:9\"]")
        let live = try cli.run(["config", "check"])
        #expect(live.status == 0 && live.stdout.contains("\(running) would put every change in force on a reload"), "\(live.stdout)\(live.stderr)")
        try configuration(port: "18799")
        let restart = try cli.run(["config", "check"])
        #expect(restart.status == 0 && restart.stdout.contains("\(running) would keep its values of gateway.port on a reload"), "\(restart.stdout)\(restart.stderr)")
        try configuration(clientID: "portcullis-2")
        let refused = try cli.run(["config", "check"])
        #expect(refused.status == 0 && refused.stdout.contains("\(running) would refuse this as a reload (SIGHUP): a sign-in provider changed"), "\(refused.stdout)")
        #expect(ServerProcess.stop(process))
        let stopped = try cli.run(["config", "check"])
        #expect(stopped.status == 0 && !stopped.stdout.contains("running gateway"), "\(stopped.stdout)")
        #expect(!FileManager.default.fileExists(atPath: cli.directory + "/keys/running-configuration.json"), "removed at a clean stop")
    }
}
