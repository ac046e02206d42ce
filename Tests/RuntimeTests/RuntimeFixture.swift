import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JOSE
import RuntimeAPI
import Runtime
import StateSurface
import Synchronization

/// A Runtime on a real SQLite file with a gateway key, and helpers to call it as the gateway would.
struct RuntimeFixture {
    static let assertionHeader = HTTPField.Name(AssertionHeader.name)!

    let directory: String
    let state: SQLiteStateSurface
    let gatewayKey: JWSKey
    let keys: KeySet
    let configuration: RuntimeConfiguration
    let registry: IntentRegistry

    init(registry: IntentRegistry = .builtIn) throws {
        directory = NSTemporaryDirectory() + "portcullis-runtime-" + UUID().uuidString
        state = try SQLiteStateSurface(path: directory + "/portcullis.sqlite")
        gatewayKey = try JWSKey.generate(algorithm: .es256, kid: "gw1")
        keys = try KeySet([.init(key: gatewayKey, status: .active)])
        var configuration = RuntimeConfiguration()
        configuration.maximumMessageBytes = 16 * 1024
        self.configuration = configuration
        self.registry = registry
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func application() -> some ApplicationProtocol {
        RuntimeServer.makeApplication(configuration: configuration, state: state, keys: keys, registry: registry)
    }

    /// An assertion for `caller`, as the gateway signs it (overridable for attacks).
    func assertion(_ caller: RuntimeCaller, audience: String? = nil, key: JWSKey? = nil, clock: any TokenClock = SystemClock()) throws -> String {
        let signingKeys = try key.map { try KeySet([.init(key: $0, status: .active)]) } ?? keys
        return try GatewayAssertionSigner(keys: signingKeys, issuer: configuration.assertionIssuer, clock: clock)
            .assertion(audience: audience ?? configuration.name, caller: caller)
    }

    func headers(_ caller: RuntimeCaller) throws -> HTTPFields {
        [Self.assertionHeader: try assertion(caller)]
    }

    static let anonymous = RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil)
    static let alice = RuntimeCaller(userID: "alice", tenantID: "acme", sessionID: nil)
    static let bob = RuntimeCaller(userID: "bob", tenantID: "acme", sessionID: nil)
    static let aliceElsewhere = RuntimeCaller(userID: "alice", tenantID: "other", sessionID: nil)
}

extension TestClientProtocol {
    /// Creates a session through the API as the caller `headers` vouch for; returns its id.
    func createSession(headers: HTTPFields) async throws -> String {
        let (_, body) = try await call(.post, "/runtime/v1/sessions", headers: headers)
        guard let id = body["session_id"]?.stringValue else { throw TestFailure("no session_id in \(body)") }
        return id
    }

    /// Sends a request and returns status and the JSON body as an object.
    func call(_ method: HTTPRequest.Method, _ uri: String, headers: HTTPFields, json: String? = nil) async throws -> (HTTPResponse.Status, JSONObject) {
        try await execute(uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) }) { response in
            let bytes = Array(response.body.readableBytesView)
            let object = bytes.isEmpty ? JSONObject() : try StrictJSONReader().parseObject(bytes)
            return (response.status, object)
        }
    }
}

/// Counts how often a handler ran.
final class Counter: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

/// A test's own failure (a socket call failed, an answer lacked a member).
struct TestFailure: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
