import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import JOSE
import PortcullisTestSupport
import Testing

/// Runs the real `portcullis` binary, built alongside the tests.
struct CLI {
    static var binary: String { PortcullisBinary.path }

    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "portcullis-cli-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `portcullis ARGS` in the temporary directory, with `stdin` as input (at most two minutes).
    @discardableResult
    func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> Result {
        let child = try ChildProcess(Self.binary, arguments, directory: directory, environment: environment, input: stdin, separateErrors: true)
        defer { child.remove() }
        let status = try child.waitForExit(within: 120)
        return Result(status: status, stdout: child.output, stderr: child.errors)
    }
}

@Suite("portcullis command line (the real binary)", .serialized)
struct CLITests {
    @Test("the binary is built and answers --help")
    func help() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let result = try cli.run(["--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("token"))
    }

    @Test("--version prints the release and the commit it was built from (unknown in a plain build); --help shows a lifetime's default as written")
    func version() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let result = try cli.run(["--version"])
        #expect(result.status == 0)
        let line = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.wholeMatch(of: /portcullis [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{7,40}|unknown)\)/) != nil, "\(line)")
        let help = try cli.run(["token", "issue", "--help"]).stdout
        #expect(help.contains("(default: 15m)") && !help.contains("Duration("), "\(help)")
    }

    @Test("token issue names the issuer and audience the configuration gives the gateway (its port, without gateway.issuer); --issuer wins")
    func tokenIssueFollowsConfiguration() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys"])
        try "gateway:\n  port: 27080\n  audience: billing\n".write(toFile: cli.directory + "/custom.yaml", atomically: true, encoding: .utf8)
        func claims(_ arguments: [String]) throws -> JSONObject {
            let issued = try cli.run(["token", "issue", "--sub", "alice", "--keys", "keys", "--config", "custom.yaml"] + arguments)
            #expect(issued.status == 0, "\(issued.stderr)")
            let jws = try JWSCompact.parse(issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            return try StrictJSONReader().parseObject(jws.payload)
        }
        let derived = try claims([])
        #expect(derived["iss"] == "http://127.0.0.1:27080" && derived["aud"] == "billing", "\(derived)")
        #expect(try claims(["--issuer", "https://other.example.com"])["iss"] == "https://other.example.com")
    }

    @Test("a key generated for every algorithm signs a token that token verify accepts and that fails after one byte is flipped",
          arguments: JWSAlgorithm.allCases)
    func everyAlgorithm(algorithm: JWSAlgorithm) throws {
        let cli = try CLI()
        defer { cli.remove() }
        let generated = try cli.run(["keys", "generate", "--alg", algorithm.rawValue, "--dir", "keys"])
        #expect(generated.status == 0, "\(generated.stderr)")
        let issued = try cli.run(["token", "issue", "--sub", "alice", "--tenant", "acme", "--keys", "keys"])
        #expect(issued.status == 0, "\(issued.stderr)")
        let token = issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let verified = try cli.run(["token", "verify", token, "--keys", "keys", "--issuer", "http://127.0.0.1:8080", "--audience", "portcullis", "--json"])
        #expect(verified.status == 0, "\(verified.stdout)")
        #expect(verified.stdout.contains("\"valid\":true"))

        // Flip one byte inside the signature's decoded bytes (keeps the base64url canonical).
        let parts = token.split(separator: ".").map(String.init)
        var signature = try #require(Base64URL.decode(parts[2]))
        signature[0] ^= 0x01
        let flipped = parts[0] + "." + parts[1] + "." + Base64URL.encode(signature)
        let rejected = try cli.run(["token", "verify", flipped, "--keys", "keys", "--json"])
        #expect(rejected.status == 1)
        #expect(rejected.stdout.contains("\"reason\":\"bad_signature\""))
        #expect(!rejected.stdout.contains(parts[2]) && !rejected.stderr.contains(parts[2]))
    }

    @Test("jwks prints a parseable JWKS with no private member and no symmetric key")
    func jwks() throws {
        let cli = try CLI()
        defer { cli.remove() }
        for alg in ["ES256", "RS256", "EdDSA", "HS256"] {
            try cli.run(["keys", "generate", "--alg", alg, "--dir", "keys"])
        }
        let result = try cli.run(["jwks", "--keys", "keys"])
        #expect(result.status == 0)
        let document = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
        let keys = document["keys"] as! [[String: Any]]
        #expect(keys.count == 3)
        for key in keys {
            for member in ["d", "p", "q", "dp", "dq", "qi", "k"] { #expect(key[member] == nil) }
            #expect(key["kty"] as? String != "oct")
        }
    }

    @Test("token verify reads the token from stdin, and --jwks with a symmetric key binds its alg")
    func stdinAndJWKS() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.run(["keys", "generate", "--alg", "HS384", "--dir", "keys", "--kid", "mac1"])
        let token = try cli.run(["token", "issue", "--sub", "bob", "--keys", "keys"]).stdout
        let secret = try String(contentsOfFile: cli.directory + "/keys/mac1.jwk", encoding: .utf8)
        try Data("{\"keys\":[\(secret)]}".utf8).write(to: URL(fileURLWithPath: cli.directory + "/set.json"))
        let viaStdin = try cli.run(["token", "verify", "--jwks", "set.json"], stdin: token)
        #expect(viaStdin.status == 0, "\(viaStdin.stdout) \(viaStdin.stderr)")
        let viaDash = try cli.run(["token", "verify", "-", "--jwks", "set.json", "--json"], stdin: token)
        #expect(viaDash.status == 0)
        #expect(!viaDash.stdout.contains("\"k\""))
        // A pipe has no size to read up to (`--jwks <(curl ...)` names /dev/fd/63): read as a stream.
        let viaPipe = try cli.run(["token", "verify", token.trimmingCharacters(in: .whitespacesAndNewlines), "--jwks", "/dev/stdin"], stdin: "{\"keys\":[\(secret)]}")
        #expect(viaPipe.status == 0, "--jwks from a pipe: \(viaPipe.stdout) \(viaPipe.stderr)")

        let noAlg = secret.replacingOccurrences(of: "\"alg\":\"HS384\",", with: "")
        try Data("{\"keys\":[\(noAlg)]}".utf8).write(to: URL(fileURLWithPath: cli.directory + "/noalg.json"))
        let refused = try cli.run(["token", "verify", "--jwks", "noalg.json"], stdin: token)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("no \"alg\""))
    }

    @Test("--at checks a token as of another instant: expired later, not yet valid before")
    func atInstant() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys"])
        let token = try cli.run(["token", "issue", "--sub", "a", "--ttl", "10m", "--keys", "keys"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let now = Int(Date().timeIntervalSince1970)
        let later = try cli.run(["token", "verify", token, "--keys", "keys", "--json", "--at", "\(now + 3600)"])
        #expect(later.status == 1)
        #expect(later.stdout.contains("\"reason\":\"expired\""))
        let earlier = try cli.run(["token", "verify", token, "--keys", "keys", "--json", "--at", "\(now - 3600)"])
        #expect(earlier.stdout.contains("\"reason\":\"not_yet_valid\""))
        let shortLife = try cli.run(["token", "verify", token, "--keys", "keys", "--json", "--max-lifetime", "60"])
        #expect(shortLife.stdout.contains("\"reason\":\"lifetime_too_long\""))
    }

    @Test("exit codes: 0 valid, 1 rejected, 2 usage or configuration error")
    func exitCodes() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys"])
        let token = try cli.run(["token", "issue", "--sub", "a", "--keys", "keys"]).stdout
        #expect(try cli.run(["token", "verify", "--keys", "keys"], stdin: token).status == 0)
        #expect(try cli.run(["token", "verify", "--keys", "keys", "--issuer", "other"], stdin: token).status == 1)
        #expect(try cli.run(["token", "verify", "not.a.token", "--keys", "keys"]).status == 1)
        #expect(try cli.run(["token", "verify"], stdin: token).status == 2)
        #expect(try cli.run(["token", "verify", "--keys", "nowhere"], stdin: token).status == 2)
        #expect(try cli.run(["token", "verify", "--jwks", "missing.json"], stdin: token).status == 2)
        #expect(try cli.run(["token", "verify", "--keys", "keys", "--leeway", "-5"], stdin: token).status == 2)
        #expect(try cli.run(["token", "frobnicate"]).status == 2)
        #expect(try cli.run(["keys", "generate", "--alg", "XS999"]).status == 2)
        // An empty token is a token that is rejected (malformed), not a usage error.
        #expect(try cli.run(["token", "verify", "--keys", "keys"], stdin: "").status == 1)
    }

    @Test("token inspect shows header, claims and times in words, and warns about what a verifier would refuse")
    func inspect() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys"])
        let token = try cli.run(["token", "issue", "--sub", "carol", "--ttl", "15m", "--keys", "keys"]).stdout
        let text = try cli.run(["token", "inspect"], stdin: token)
        #expect(text.status == 0)
        #expect(text.stdout.contains("\"sub\": \"carol\""))
        #expect(text.stdout.contains("expires in 14 minutes") || text.stdout.contains("expires in 15 minutes"))
        #expect(text.stdout.contains("warnings: none"))

        let unsigned = Base64URL.encode(Array("{\"alg\":\"none\",\"typ\":\"JWT\"}".utf8)) + "." + Base64URL.encode(Array("{\"sub\":\"x\",\"exp\":1000}".utf8)) + "."
        let warned = try cli.run(["token", "inspect", unsigned, "--json"])
        #expect(warned.status == 0)
        let report = try JSONSerialization.jsonObject(with: Data(warned.stdout.utf8)) as! [String: Any]
        let reasons = (report["warnings"] as! [[String: String]]).map { $0["reason"]! }
        #expect(reasons.contains("unsupported_algorithm"))
        #expect(reasons.contains("wrong_type"))
        #expect(reasons.contains("expired"))
        #expect(reasons.contains("missing_claim"))
        #expect(try cli.run(["token", "inspect", "garbage"]).status == 1)
    }

    @Test("keys list, rotate and retire change keyring.json as documented")
    func keyLifecycle() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys", "--kid", "one"])
        #expect(try cli.run(["keys", "rotate", "--dir", "keys"]).status == 2)
        try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys", "--kid", "two", "--state", "next"])
        try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys", "--kid", "three", "--state", "next"])
        let rotated = try cli.run(["keys", "rotate", "--dir", "keys"])
        #expect(rotated.stdout.contains("activated two; retired one"))
        #expect(rotated.stderr.contains("2 next keys were waiting: activated the oldest, two; --kid chooses another"), "\(rotated.stderr)")
        #expect(try cli.run(["keys", "rotate", "--dir", "keys", "--kid", "one"]).status == 2, "a retired key is not activated")
        let list = try cli.run(["keys", "list", "--dir", "keys"]).stdout
        #expect(list.contains("one") && list.contains("retired") && list.contains("active"))
        #expect(try cli.run(["keys", "retire", "nobody", "--dir", "keys"]).status == 2)
        #expect(try cli.run(["keys", "retire", "--dir", "keys"]).status == 2, "retire names a key")
        #expect(try cli.run(["keys", "retire", "two", "three", "--dir", "keys"]).status == 2, "retire names one key")
        let mistyped = try cli.run(["keys", "retire", "two", "--dri", "keys"])
        #expect(mistyped.status == 2 && mistyped.stderr.contains("unknown option --dri"), "\(mistyped.stderr)")
        // A thumbprint kid begins with "-" one time in 64: it is a key id wherever a kid is asked for.
        #expect(try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys", "--kid", "-dash", "--state", "next"]).status == 0)
        #expect(try cli.run(["keys", "rotate", "--dir", "keys", "--kid", "-dash"]).stdout.contains("activated -dash; retired two"))
        let dashed = try cli.run(["keys", "retire", "-dash", "--dir", "keys"])
        #expect(dashed.status == 0 && dashed.stdout.contains("retired -dash"), "\(dashed.stderr)")
        #expect(try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys", "--kid", "../evil"]).status == 2)
        #expect(!FileManager.default.fileExists(atPath: cli.directory + "/evil.pem"))
        for command in ["generate", "import"] {
            let retired = try cli.run(["keys", command] + (command == "import" ? ["keys/two.pem"] : []) + ["--alg", "ES256", "--dir", "keys", "--state", "retired"])
            #expect(retired.status == 2 && retired.stderr.contains("--state must be next or active"), "keys \(command): \(retired.stderr)")
        }
    }

    @Test("a missing key file, a bad PEM and a world-readable key get one clear line each")
    func configurationErrors() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys", "--kid", "k1"])
        chmod(cli.directory + "/keys/k1.pem", 0o644)
        let warned = try cli.run(["token", "issue", "--sub", "a", "--keys", "keys"])
        #expect(warned.status == 0)
        #expect(warned.stderr.contains("readable by other users"))
        try Data("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".utf8).write(to: URL(fileURLWithPath: cli.directory + "/keys/k1.pem"))
        let bad = try cli.run(["token", "issue", "--sub", "a", "--keys", "keys"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("k1.pem"))
        #expect(bad.stderr.split(separator: "\n").count == 1)
        try FileManager.default.removeItem(atPath: cli.directory + "/keys/k1.pem")
        let missing = try cli.run(["token", "issue", "--sub", "a", "--keys", "keys"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("does not exist"))
    }

    @Test("bench --json prints one row per algorithm with positive rates")
    func bench() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let result = try cli.run(["bench", "--seconds", "0.2", "--alg", "HS256", "--alg", "ES256", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let rows = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [[String: Any]]
        #expect(rows.map { $0["alg"] as! String } == ["HS256", "ES256"])
        for row in rows {
            for field in ["sign_per_s", "verify_per_s", "raw_verify_per_s", "ratio"] {
                #expect((row[field] as! Double) > 0, "\(field)")
            }
        }
    }
}

@Suite("portcullis runtime (the real binary)", .serialized)
struct RuntimeBinaryTests {
    /// Starts `portcullis runtime ARGS` in `cli`'s directory and waits until it says where it listens.
    func startRuntime(_ cli: CLI, _ arguments: [String], environment: [String: String] = [:]) throws -> (ChildProcess, Int) {
        try ServerProcess.start(cli, ["runtime"] + arguments, environment: environment) { text in
            text.range(of: #"address=127\.0\.0\.1:(\d+)"#, options: .regularExpression).flatMap { Int(text[$0].split(separator: ":").last ?? "") }
        }
    }

    /// A generated ES256 key in keys/, then `portcullis runtime` on a free port with it and data/runtime.sqlite.
    func startRuntimeOnItsKeys(_ cli: CLI, environment: [String: String] = [:]) throws -> (ChildProcess, Int) {
        try cli.run(["keys", "generate", "--alg", "ES256", "--dir", "keys"])
        return try startRuntime(cli, ["--port", "0", "--keys", "keys", "--database", "data/runtime.sqlite"], environment: environment)
    }

    func stop(_ process: ChildProcess) -> Bool { ServerProcess.stop(process) }

    @Test("starts on a free port, refuses a call without an assertion, and exits cleanly on SIGTERM")
    func startsAndStops() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let (process, port) = try startRuntimeOnItsKeys(cli)
        #expect(FileManager.default.fileExists(atPath: cli.directory + "/data/runtime.sqlite"))
        let (data, response) = try fetch(URL(string: "http://127.0.0.1:\(port)/runtime/v1/sessions")!, method: "POST")
        #expect(response == 401)
        #expect(String(decoding: data, as: UTF8.self).contains("\"error\":\"assertion_missing\""))
        #expect(stop(process), "the runtime did not exit cleanly on SIGTERM")
    }

    @Test("SIGTERM while clients hold a connection with no request, and one with half a request head: the runtime closes both and exits within limits.shutdown_timeout_seconds, not never")
    func boundedShutdown() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let (process, port) = try startRuntimeOnItsKeys(cli, environment: ["LIMITS_SHUTDOWN_TIMEOUT_SECONDS": "2"])
        let silent = try RawConnection(port: port, receiveTimeout: 30)
        defer { silent.close() }
        let halfHead = try RawConnection(port: port, receiveTimeout: 30)
        defer { halfHead.close() }
        halfHead.send("GET /runtime/v1/health HTTP/1.1\r\nHost: runtime\r\n")
        usleep(300_000)  // both accepted; neither request will ever be whole
        let start = ContinuousClock.now
        kill(process.pid, SIGTERM)
        let status = try process.waitForExit(within: 25)
        let elapsed = ContinuousClock.now - start
        #expect(status == 0, "\(process.output.suffix(2000))")
        #expect(elapsed < .seconds(TimeBounds.seconds(12)), "exited \(elapsed) after SIGTERM with a 2-second bound")
        #expect(silent.readAll().isEmpty, "the silent connection is closed, with nothing written to it")
        #expect(halfHead.readAll().isEmpty, "the half-sent request is closed, with nothing written to it")
        process.remove()
    }

    @Test("a request whose head is completed after SIGTERM is answered, and its connection then closed rather than kept alive until the bound")
    func requestFinishedDuringShutdown() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let (process, port) = try startRuntimeOnItsKeys(cli, environment: ["LIMITS_SHUTDOWN_TIMEOUT_SECONDS": "30"])
        let connection = try RawConnection(port: port, receiveTimeout: 30)
        defer { connection.close() }
        connection.send("GET /runtime/v1/health HTTP/1.1\r\nHost: runtime\r\n")
        usleep(300_000)
        let start = ContinuousClock.now
        kill(process.pid, SIGTERM)
        usleep(300_000)  // the stop has begun: the listener is closed, this connection is not
        connection.send("\r\n")
        let answer = String(decoding: connection.readAll(), as: UTF8.self)
        let closedAfter = ContinuousClock.now - start
        #expect(answer.hasPrefix("HTTP/1.1 "), "answered: \(answer.prefix(200))")
        #expect(closedAfter < .seconds(TimeBounds.seconds(10)), "closed \(closedAfter) after SIGTERM, against a 30-second bound")
        #expect(try process.waitForExit(within: 25) == 0)
        process.remove()
    }

    @Test("reads config/portcullis.yaml, lets environment variables override it, and generates a key when keys/ is empty")
    func configurationFile() throws {
        let cli = try CLI()
        defer { cli.remove() }
        try FileManager.default.createDirectory(atPath: cli.directory + "/config", withIntermediateDirectories: true)
        try Data("storage:\n  sqlite_path: state/from-file.sqlite\nruntime:\n  port: 1\n".utf8)
            .write(to: URL(fileURLWithPath: cli.directory + "/config/portcullis.yaml"))
        let (process, port) = try startRuntime(cli, [], environment: ["RUNTIME_PORT": "0"])
        #expect(port != 1, "RUNTIME_PORT=0 should override the file's port 1")
        #expect(FileManager.default.fileExists(atPath: cli.directory + "/state/from-file.sqlite"))
        #expect(FileManager.default.fileExists(atPath: cli.directory + "/keys/keyring.json"))
        #expect(process.output.contains("generated ES256 key"))
        #expect(stop(process))
    }

    @Test("a bad configuration value stops start-up with a message naming the key", arguments: [
        ("runtime:\n  port: 70000\n", [String: String](), "runtime.port"),
        ("runtime:\n  port: [1]\n", [:], "runtime.port"),
        ("runtime:\n  anonymous_idle_timeout_seconds: 0\n", [:], "runtime.anonymous_idle_timeout_seconds"),
        ("", ["RUNTIME_MAX_MESSAGE_BYTES": "lots"], "runtime.max_message_bytes"),
        ("runtime: [\n", [:], "not valid YAML"),
    ])
    func badConfiguration(yaml: String, environment: [String: String], expected: String) throws {
        let cli = try CLI()
        defer { cli.remove() }
        try Data(yaml.utf8).write(to: URL(fileURLWithPath: cli.directory + "/custom.yaml"))
        let result = try cli.run(["runtime", "--config", "custom.yaml"], environment: environment)
        #expect(result.status == 2)
        #expect(result.stderr.contains(expected), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: cli.directory + "/data"), "nothing is created before the configuration is valid")
    }

    func fetch(_ url: URL, method: String) throws -> (Data, Int) { try ServerProcess.fetch(url, method: method) }
}

@Suite("portcullis users (the real binary)", .serialized)
struct UsersCommandTests {
    @Test("add reads the password from stdin, list shows the account, disable marks it, and the password is never printed or stored in clear")
    func lifecycle() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let secret = "Tr0ub4dor&3-not-in-output"
        let added = try cli.run(["users", "add", "alice", "--tenant", "acme", "--password-stdin"], stdin: secret + "\n")
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stdout.contains("added alice in tenant acme"))
        let duplicate = try cli.run(["users", "add", "alice", "--tenant", "acme", "--password-stdin"], stdin: secret)
        #expect(duplicate.status == 2)
        #expect(duplicate.stderr.contains("already has a user named alice"))
        #expect(try cli.run(["users", "add", "bob", "--tenant", "acme"]).status == 2, "no terminal and no --password-stdin")
        #expect(try cli.run(["users", "add", "bob", "--tenant", "acme", "--password-stdin"], stdin: "short").status == 2)
        let disabled = try cli.run(["users", "disable", "alice", "--tenant", "acme"])
        #expect(disabled.status == 0)
        let list = try cli.run(["users", "list"])
        #expect(list.stdout.contains("alice") && list.stdout.contains("disabled"))
        #expect(try cli.run(["users", "disable", "nobody", "--tenant", "acme"]).status == 2)
        for result in [added, duplicate, disabled, list] {
            #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret))
        }
        let newSecret = "c0rrect-horse-battery-not-in-output"
        let passwd = try cli.run(["users", "passwd", "alice", "--tenant", "acme", "--password-stdin"], stdin: newSecret + "\n")
        #expect(passwd.status == 0 && passwd.stdout.contains("set a new password for alice in tenant acme"), "\(passwd.stderr)")
        #expect(try cli.run(["users", "passwd", "alice", "--tenant", "acme", "--password-stdin"], stdin: "short").status == 2, "too short")
        #expect(try cli.run(["users", "passwd", "nobody", "--tenant", "acme", "--password-stdin"], stdin: newSecret).status == 2)
        let deleted = try cli.run(["users", "delete", "alice", "--tenant", "acme"])
        #expect(deleted.status == 0 && deleted.stdout.contains("deleted alice (usr_") && deleted.stdout.contains("tenant acme"), "\(deleted.stderr)")
        #expect(try cli.run(["users", "list"]).stdout.contains("no accounts yet"), "a deleted account is not listed")
        #expect(try cli.run(["users", "delete", "alice", "--tenant", "acme"]).status == 2, "deleted once")
        let again = try cli.run(["users", "add", "alice", "--tenant", "acme", "--password-stdin"], stdin: secret)
        #expect(again.status == 0, "the username is free again: \(again.stderr)")
        for result in [passwd, deleted, again] {
            #expect(!result.stdout.contains(newSecret) && !result.stderr.contains(newSecret))
        }
        let database = try Data(contentsOf: URL(fileURLWithPath: cli.directory + "/data/portcullis.sqlite"))
        let wal = (try? Data(contentsOf: URL(fileURLWithPath: cli.directory + "/data/portcullis.sqlite-wal"))) ?? Data()
        #expect(database.range(of: Data(secret.utf8)) == nil && wal.range(of: Data(secret.utf8)) == nil)
    }
    @Test("groups: add --group puts an account in groups, list shows them, users groups shows, adds and removes (a removal signs the account out); a bad group name or a provider's user is refused with a sentence and changes nothing")
    func groups() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let added = try cli.run(["users", "add", "alice", "--tenant", "acme", "--group", "admins", "--group", "staff", "--password-stdin"], stdin: "a long enough password\n")
        #expect(added.status == 0 && added.stdout.contains("in admins, staff"), "\(added.stdout)\(added.stderr)")
        let bad = try cli.run(["users", "add", "bob", "--tenant", "acme", "--group", "a,b", "--password-stdin"], stdin: "a long enough password\n")
        #expect(bad.status == 2 && bad.stderr.contains("the group a,b cannot be used"), "\(bad.stderr)")
        #expect(try cli.run(["users", "find", "bob"]).status == 1, "nothing was added")
        let list = try cli.run(["users", "list"])
        #expect(list.stdout.contains("GROUPS") && list.stdout.contains("admins,staff"), "\(list.stdout)")
        #expect(try cli.run(["users", "groups", "alice"]).stdout == "admins\nstaff\n")
        let more = try cli.run(["users", "groups", "alice", "--add", "oncall"])
        #expect(more.status == 0 && more.stdout.contains("now in admins, oncall, staff") && !more.stdout.contains("signed out"), "\(more.stdout)\(more.stderr)")
        let same = try cli.run(["users", "groups", "alice", "--add", "oncall"])
        #expect(same.stdout.contains("nothing changed: alice in tenant acme is in admins, oncall, staff"), "\(same.stdout)")
        let absent = try cli.run(["users", "groups", "alice", "--remove", "nothere"])
        #expect(absent.status == 0 && absent.stdout.hasPrefix("nothing changed") && !absent.stdout.contains("signed out"), "\(absent.stdout)")
        let fewer = try cli.run(["users", "groups", "alice", "--remove", "admins"])
        #expect(fewer.status == 0 && fewer.stdout.contains("now in oncall, staff: signed out everywhere"), "\(fewer.stdout)\(fewer.stderr)")
        let refused = try cli.run(["users", "groups", "alice", "--add", "x y"])
        #expect(refused.status == 2 && refused.stderr.contains("cannot be used"), "\(refused.stderr)")
        #expect(try cli.run(["users", "groups", "alice"]).stdout == "oncall\nstaff\n")
        #expect(try cli.run(["users", "groups", "nobody", "--add", "x"]).status == 2)
    }
}
