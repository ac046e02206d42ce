import AsyncHTTPClient
import ConnectedAccounts
import Foundation
import Gateway
import JOSE
import Logging
import NIOCore
import NIOHTTP1
import Observability
import PortcullisTestSupport
import ProviderLogin
import Runtime
import SecurityGuard
import ServiceLifecycle
import StateSurface
import Synchronization
import Testing
import TrustedIssuers

/// Log lines captured from a gateway under test.
final class CapturedLog: LogSink {
    private let lines = Mutex<[String]>([])
    func write(_ line: String) { lines.withLock { $0.append(line) } }
    var text: String { lines.withLock { $0.joined(separator: "\n") } }
    var count: Int { lines.withLock { $0.count } }

    /// The lines that contain every one of `fragments`, once at least `count` are there or a second
    /// has passed: a request's line is written after its answer, so a client may read the answer first.
    /// The lines holding every fragment, once `count` have been logged or `within` seconds (scaled) passed.
    func lines(containing fragments: String..., atLeast count: Int = 1, within: Double = 1) async -> [String] {
        let deadline = ContinuousClock.now + .seconds(TimeBounds.seconds(within))
        while true {
            let matching = lines.withLock { $0.filter { line in fragments.allSatisfy { line.contains($0) } } }
            if matching.count >= count || ContinuousClock.now >= deadline { return matching }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// An answer from the gateway: status, headers and the JSON body (empty object when there is none).
struct Answer {
    let status: Int
    let headers: HTTPHeaders
    let json: JSONObject
    let raw: String

    subscript(_ name: String) -> String? { json[name]?.stringValue }
    var error: String? { json["error"]?.stringValue }

    /// Sends one request with the shared HTTP client (a JSON `body` when given) and reads the whole answer.
    static func request(
        _ method: HTTPMethod, _ url: String, bearer: String? = nil, headers: [(String, String)] = [], body: String? = nil, timeout: Int64 = 30,
        followRedirects: Bool = true
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer " + bearer) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            if !headers.contains(where: { $0.0.lowercased() == "content-type" }) { request.headers.add(name: "Content-Type", value: "application/json") }
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await (followRedirects ? HTTPClient.shared : Self.withoutRedirects).execute(request, timeout: .seconds(timeout))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        let json = (try? StrictJSONReader().parseObject(Array(bytes.readableBytesView))) ?? JSONObject()
        return Answer(status: Int(response.status.code), headers: response.headers, json: json, raw: String(buffer: bytes))
    }

    /// A client that hands a redirect back instead of following it; never shut down (it lives as long as the tests).
    static let withoutRedirects = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))

    /// Asks again every 100 ms until an answer passes `until` or `seconds` (scaled, `TimeBounds`) have
    /// passed; the last answer. For what the gateway learns in the background (readiness, a circuit
    /// closing, another process's command applied), never for a request's own answer.
    static func eventually(within seconds: Double, _ ask: () async throws -> Answer, until: (Answer) -> Bool) async throws -> Answer {
        let deadline = ContinuousClock.now + .milliseconds(Int64(TimeBounds.seconds(seconds) * 1000))
        var answer = try await ask()
        while !until(answer), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            answer = try await ask()
        }
        return answer
    }
}

/// A whole Portcullis (gateway, admin listener, embedded Runtime) on loopback
/// ports, on a fresh SQLite file and key directory, driven over real sockets.
///
/// Every secret a test sees through `remember` is checked against the
/// captured log when the fixture stops.
final class GatewayFixture: Sendable {
    let directory: String
    let state: SQLiteStateSurface
    let keys: LiveKeyRing
    let log = CapturedLog()
    let server: PortcullisServer
    let group: ServiceGroup
    let task: Task<Void, any Error>
    let gatewayPort: Int
    let adminPort: Int
    let runtimePort: Int?
    /// Envoy's HTTP ext_authz listener, when `ext_authz.http_port` is configured.
    let extAuthzHTTPPort: Int?
    /// Envoy's gRPC ext_authz listener, when `ext_authz.grpc_port` is configured.
    let extAuthzGRPCPort: Int?
    private let secrets = Mutex<[String]>([])

    static let fastHashing = PasswordHasher(parameters: Scrypt.Parameters(logN: 10, r: 8, p: 1))

    /// - Parameters:
    ///   - configure: changes to the default configuration (ports are set to 0 here).
    ///   - runtimeURL: a Runtime started elsewhere; `nil` embeds one.
    init(
        hasher: PasswordHasher = GatewayFixture.fastHashing, directory existing: String? = nil, runtimeURL: String? = nil, busyTimeout: Double = 5,
        trustClock: any TokenClock = SystemClock(), configure: (inout GatewayConfiguration) -> Void = { _ in }
    ) async throws {
        directory = existing ?? NSTemporaryDirectory() + "portcullis-gateway-" + UUID().uuidString
        state = try SQLiteStateSurface(path: directory + "/portcullis.sqlite", busyTimeout: busyTimeout)
        let keyDirectory = KeyDirectory(path: directory + "/keys")
        if !FileManager.default.fileExists(atPath: directory + "/keys/keyring.json") {
            _ = try keyDirectory.generate(algorithm: .es256)
        }
        keys = try LiveKeyRing(directory: keyDirectory)
        var gateway = GatewayConfiguration()
        gateway.port = 0
        gateway.adminPort = 0
        gateway.runtimeURL = runtimeURL
        configure(&gateway)
        var runtime = RuntimeConfiguration()
        runtime.port = 0
        let log = self.log
        var logger = Logger(label: "portcullis.test") { label in JSONLogHandler(label: label, sink: log) }
        logger.logLevel = .trace
        // Made even with no issuers, as serve does: a reload may add some.
        let trusted = try TrustedIssuers(configuration: gateway.trust, leeway: gateway.leeway, clock: trustClock, logger: logger)
        server = PortcullisServer(
            gateway: gateway, runtime: runtime, state: state, keys: keys, passwordHasher: hasher, trustedIssuers: trusted,
            providers: gateway.trust.loginIssuers.isEmpty ? .none : try ProviderDirectory(trust: gateway.trust, keysDirectory: keyDirectory.path),
            connections: gateway.connections.connections.isEmpty ? .none : try ConnectionDirectory(gateway.connections, keysDirectory: keyDirectory.path),
            logger: logger)
        let start = ServiceGroupStart<PortcullisServer.Listener>()
        let services = try server.makeServices { listener, port in start.report(listener, port) }
        var groupConfiguration = ServiceGroupConfiguration(services: services.map { .init(service: $0) }, logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(10)  // as limits.shutdown_timeout_seconds bounds serve's
        let group = ServiceGroup(configuration: groupConfiguration)
        self.group = group
        let (task, found) = try await start.run(group, expected: server.listeners.count)
        self.task = task
        guard let gateway = found[.gateway], let admin = found[.admin] else { throw FixtureError("the gateway or admin listener reported no port") }
        gatewayPort = gateway
        adminPort = admin
        runtimePort = found[.runtime]
        extAuthzHTTPPort = found[.extAuthzHTTP]
        extAuthzGRPCPort = found[.extAuthzGRPC]
        // Readiness answers from background checks: wait for the first to pass, as a load balancer would.
        let monitor = server.services.monitor
        for _ in 0..<200 {
            let results = monitor.results
            if results.store?.ok == true, results.runtime?.ok == true { break }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Stops the services, checks the log for secrets, and removes the files unless `keepFiles`.
    func stop(keepFiles: Bool = false) async throws {
        await group.triggerGracefulShutdown()
        try await task.value
        let text = log.text
        for secret in secrets.withLock({ $0 }) where text.contains(secret) {
            Issue.record("a secret (\(secret.prefix(6))...) appears in the gateway's log")
        }
        if !keepFiles { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Notes a secret the log must never contain.
    func remember(_ secret: String) { secrets.withLock { $0.append(secret) } }

    var baseURL: String { "http://127.0.0.1:\(gatewayPort)" }

    /// Sends a request to the gateway over a real socket.
    func send(_ method: HTTPMethod, _ path: String, bearer: String? = nil, headers: [(String, String)] = [], body: String? = nil, port: Int? = nil)
        async throws -> Answer
    {
        try await Answer.request(method, "http://127.0.0.1:\(port ?? gatewayPort)" + path, bearer: bearer, headers: headers, body: body)
    }

    /// `POST` with a JSON object body.
    func post(_ path: String, bearer: String? = nil, _ body: JSONValue = [:]) async throws -> Answer {
        try await send(.POST, path, bearer: bearer, body: JSONWriter.string(body))
    }

    // MARK: The session-first flow, step by step

    func addUser(_ username: String, tenant: String = "default", password: String = "correct horse battery") async throws {
        remember(password)
        _ = try await AccountService(users: state, hasher: GatewayFixture.fastHashing).addUser(username: username, tenantID: tenant, password: password)
    }

    func createAnonymousSession() async throws -> String {
        let answer = try await post("/api/session/create-anonymous")
        guard answer.status == 201, let id = answer["session_id"] else { throw FixtureError("create-anonymous answered \(answer.status): \(answer.raw)") }
        return id
    }

    struct Login {
        let accessToken: String
        let refreshToken: String
        let sessionID: String
    }

    /// Logs in (optionally with a session) and returns the credentials, remembered as secrets.
    func login(_ username: String, tenant: String? = nil, password: String = "correct horse battery", sessionID: String? = nil) async throws -> Login {
        let answer = try await loginAnswer(username, tenant: tenant, password: password, sessionID: sessionID)
        guard answer.status == 200, let access = answer["access_token"], let refresh = answer["refresh_token"], let session = answer["session_id"] else {
            throw FixtureError("login answered \(answer.status): \(answer.raw)")
        }
        return Login(accessToken: access, refreshToken: refresh, sessionID: session)
    }

    func loginAnswer(_ username: String, tenant: String? = nil, password: String, sessionID: String? = nil) async throws -> Answer {
        remember(password)
        var body: JSONObject = ["username": .string(username), "password": .string(password)]
        if let tenant { body["tenant"] = .string(tenant) }
        if let sessionID { body["session_id"] = .string(sessionID) }
        let answer = try await post("/api/auth/login", .object(body))
        answer["access_token"].map(remember)
        answer["refresh_token"].map(remember)
        return answer
    }

    func refresh(_ token: String) async throws -> Answer {
        let answer = try await post("/api/auth/refresh", ["refresh_token": .string(token)])
        answer["access_token"].map(remember)
        answer["refresh_token"].map(remember)
        return answer
    }
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
