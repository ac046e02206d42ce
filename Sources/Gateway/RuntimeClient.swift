import AsyncHTTPClient
import Foundation
import JOSE
import NIOCore
import NIOHTTP1
import HTTPTypes
import Runtime
import ServiceLifecycle
import Synchronization
import TrafficCop

/// The HTTP client for upstream calls: a failed connection fails at once
/// (AsyncHTTPClient would otherwise retry until the request's deadline, so a
/// stopped Runtime would hold every request for the full timeout).
public func makeUpstreamHTTPClient(connectTimeout: Double = 2) -> HTTPClient {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool.retryConnectionEstablishment = false
    configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
    configuration.timeout.connect = .milliseconds(Int64(connectTimeout * 1000))
    configuration.redirectConfiguration = .disallow
    configuration.decompression = .disabled
    return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
}

/// Shuts an `HTTPClient` down at graceful shutdown (after the listeners that use it).
struct HTTPClientLifecycle: Service {
    let client: HTTPClient

    func run() async throws {
        try? await gracefulShutdown()
        try await client.shutdown()
    }
}

/// Talks to the Runtime over HTTP, each call with a fresh gateway assertion.
///
/// It performs only `AdmittedSessionIntent`s, so no session operation reaches
/// the Runtime unless the Traffic Cop admitted it first. The Runtime's
/// refusals (404, 403, 409, 400) pass through with their codes; its absence,
/// its failures and a refused assertion become 502/503/504, never 401 or 403.
public final class RuntimeClient: Sendable {
    let http: HTTPClient
    let signer: GatewayAssertionSigner
    let audience: String
    let timeout: Double
    private let base: Mutex<String?>

    /// - Parameter baseURL: `http://host:port`; `nil` until `setBaseURL` is called
    ///   (the embedded Runtime reports its port once it listens).
    public init(baseURL: String?, audience: String, signer: GatewayAssertionSigner, timeout: Double, http: HTTPClient) {
        self.base = Mutex(baseURL?.trimmingTrailingSlash)
        self.audience = audience
        self.signer = signer
        self.timeout = timeout
        self.http = http
    }

    /// Points the client at the Runtime (the embedded one, once its port is known).
    public func setBaseURL(_ url: String) {
        base.withLock { $0 = url.trimmingTrailingSlash }
    }

    public var baseURL: String? { base.withLock { $0 } }

    /// Performs an admitted session operation and returns the Runtime's JSON object.
    public func perform(_ admitted: AdmittedSessionIntent, body: JSONObject = JSONObject()) async throws -> JSONObject {
        let intent = admitted.intent
        let sessions = RuntimeRoutes.prefix + "/sessions"
        let session = intent.sessionID.map { sessions + "/" + $0 } ?? sessions
        let (method, path): (HTTPMethod, String)
        var body = body
        switch intent.operation {
        case .createAnonymous, .createOwned: (method, path) = (.POST, sessions)
        case .read: (method, path) = (.GET, session)
        case .upgrade: (method, path) = (.POST, session + "/upgrade")
        case .revoke: (method, path) = (.POST, session + "/revoke")
        case .runIntent:
            (method, path) = (.POST, RuntimeRoutes.prefix + "/intents")
            body["session_id"] = intent.sessionID.map(JSONValue.string)
        case .openSocket:
            throw GatewayError.invalidRequest("a socket is opened through /api/runtime/agent, not over HTTP")
        }
        let caller = RuntimeCaller(
            userID: intent.principal?.userID, tenantID: intent.principal?.tenantID,
            sessionID: intent.operation == .runIntent ? intent.sessionID : nil)
        return try await call(method, path, caller: caller, body: method == .GET ? nil : body)
    }

    /// Readiness: the Runtime answers and accepts our assertion.
    public func checkHealth() async throws {
        _ = try await call(.GET, RuntimeRoutes.prefix + "/health", caller: RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil), body: nil)
    }

    func call(_ method: HTTPMethod, _ path: String, caller: RuntimeCaller, body: JSONObject?) async throws -> JSONObject {
        guard let base = baseURL else {
            throw GatewayError(.serviceUnavailable, "upstream_unavailable", "the Runtime is not listening yet; try again in a moment")
        }
        let assertion: String
        do {
            assertion = try signer.assertion(audience: audience, caller: caller)
        } catch {
            throw GatewayError.noSigningKey
        }
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        request.headers.add(name: AssertionHeader.name, value: assertion)
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: JSONWriter.bytes(.object(body))))
        }
        let status: HTTPResponseStatus
        let bytes: ByteBuffer
        do {
            let response = try await http.execute(request, timeout: .milliseconds(Int64(timeout * 1000)))
            status = response.status
            bytes = try await response.body.collect(upTo: 1 << 20)
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            throw GatewayError(.gatewayTimeout, "upstream_timeout", "the Runtime did not answer within \(Int(timeout)) s; try again")
        } catch {
            throw GatewayError(.serviceUnavailable, "upstream_unavailable", "the Runtime cannot be reached; try again shortly")
        }
        let object = try? StrictJSONReader().parseObject(Array(bytes.readableBytesView))
        if (200..<300).contains(status.code) {
            guard let object else { throw GatewayError(.badGateway, "upstream_unavailable", "the Runtime sent an answer that is not JSON") }
            return object
        }
        // The Runtime's own refusals are the client's business; keep their code and status.
        if [400, 403, 404, 409, 413].contains(Int(status.code)), let object, let code = object["error"]?.stringValue,
            let message = object["message"]?.stringValue
        {
            throw GatewayError(HTTPResponse.Status(code: Int(status.code)), code, message)
        }
        if status.code == 503 {
            throw GatewayError(.serviceUnavailable, "upstream_unavailable", "the Runtime is overloaded or its store is busy; try again shortly")
        }
        if status.code == 401 {
            throw GatewayError(.serviceUnavailable, "upstream_unavailable", "the Runtime refused the gateway's assertion; check that both use the same keys, issuer and Runtime name")
        }
        throw GatewayError(.badGateway, "upstream_unavailable", "the Runtime failed (HTTP \(status.code)); try again shortly")
    }
}
