import AsyncHTTPClient
import EdgeHTTP
import Foundation
import HTTPTypes
import JOSE
import NIOCore
import NIOHTTP1
import Resilience
import RuntimeAPI
import ServiceLifecycle
import Synchronization
import Traces
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
package struct HTTPClientLifecycle: Service {
    let client: HTTPClient

    package init(client: HTTPClient) {
        self.client = client
    }

    package func run() async throws {
        try? await gracefulShutdown()
        try await client.shutdown()
    }
}

/// Talks to the Runtime over HTTP in the typed contract of `RuntimeAPI`, each
/// call with a fresh gateway assertion.
///
/// Its session operations take only `AdmittedSessionIntent`s, so no public
/// operation reaches the Runtime unless the Traffic Cop admitted it first,
/// and they return `SessionView` / `ExecutionView`. The Runtime's refusals
/// come back as `RuntimeRefusal` values (typed codes); its absence, its
/// failures and a refused assertion become 502/503/504, never 401 or 403.
public final class RuntimeClient: Sendable {
    package let http: HTTPClient
    /// Signs assertions, reusing each for half its life.
    package let assertions: AssertionCache
    let audience: String
    let timeout: Double
    private let base: Mutex<String?>
    /// Open while the Runtime cannot be reached: its callers are refused at once (503 with
    /// `Retry-After`) until the background health check reaches it again.
    public let circuit: DependencyCircuit

    /// - Parameter baseURL: `http://host:port`; `nil` until `setBaseURL` is called
    ///   (the embedded Runtime reports its port once it listens).
    public init(
        baseURL: String?, audience: String, signer: GatewayAssertionSigner, timeout: Double, http: HTTPClient, maximumWaiters: Int = 1_000
    ) {
        self.base = Mutex(baseURL?.trimmingTrailingSlash)
        circuit = DependencyCircuit(name: "runtime", maximumWaiters: maximumWaiters)
        self.audience = audience
        self.assertions = AssertionCache(signer: signer)
        self.timeout = timeout
        self.http = http
    }

    /// Points the client at the Runtime (the embedded one, once its port is known).
    public func setBaseURL(_ url: String) {
        base.withLock { $0 = url.trimmingTrailingSlash }
    }

    public var baseURL: String? { base.withLock { $0 } }

    static func caller(_ intent: SessionIntent, naming sessionID: String? = nil) -> RuntimeCaller {
        RuntimeCaller(userID: intent.principal?.userID, tenantID: intent.principal?.tenantID, sessionID: sessionID)
    }

    /// Performs an admitted session operation (create, read, upgrade, revoke) and returns the session.
    public func session(_ admitted: AdmittedSessionIntent, metadata: JSONObject = JSONObject()) async throws -> SessionView {
        let intent = admitted.intent
        let (method, path, body): (HTTPMethod, String, JSONValue?)
        switch intent.operation {
        case .createAnonymous, .createOwned:
            let creation = SessionCreateRequest(metadata: metadata, maximumLiveSessions: admitted.maximumLiveSessions)
            (method, path, body) = (.POST, RuntimeEndpoint.sessions, creation.json)
        case .read:
            (method, path, body) = (.GET, RuntimeEndpoint.session(try Self.sessionID(intent)), nil)
        case .upgrade:
            let upgrade = SessionUpgradeRequest(maximumLiveSessions: admitted.maximumLiveSessions)
            (method, path, body) = (.POST, RuntimeEndpoint.upgrade(try Self.sessionID(intent)), upgrade.json)
        case .revoke:
            (method, path, body) = (.POST, RuntimeEndpoint.revoke(try Self.sessionID(intent)), .object(JSONObject()))
        case .openSocket, .runIntent, .readExecution:
            throw GatewayError.invalidRequest("\(intent.operation.rawValue) is not a session operation")
        }
        let object = try await call(method, path, caller: Self.caller(intent), body: body)
        guard let view = SessionView(json: object) else { throw Self.notUnderstood }
        return view
    }

    /// Runs an admitted intent in its session and returns the execution.
    public func run(_ admitted: AdmittedSessionIntent, request: IntentRequest) async throws -> ExecutionView {
        let intent = admitted.intent
        guard intent.operation == .runIntent, intent.intentType == request.intentType else {
            throw GatewayError.invalidRequest("the intent run must be the one admitted")
        }
        let sessionID = try Self.sessionID(intent)
        let object = try await call(.POST, RuntimeEndpoint.intents, caller: Self.caller(intent, naming: sessionID), body: request.json(sessionID: sessionID))
        guard let view = ExecutionView(json: object) else { throw Self.notUnderstood }
        return view
    }

    /// Reads an admitted execution (the Runtime checks it belongs to one of the caller's sessions).
    public func execution(_ admitted: AdmittedSessionIntent) async throws -> ExecutionView {
        let intent = admitted.intent
        guard intent.operation == .readExecution, let executionID = intent.executionID else {
            throw GatewayError.invalidRequest("only an admitted execution read reads an execution")
        }
        let object = try await call(.GET, RuntimeEndpoint.execution(executionID), caller: Self.caller(intent), body: nil)
        guard let view = ExecutionView(json: object) else { throw Self.notUnderstood }
        return view
    }

    /// Which of `sessionIDs` have ended (for closing this gateway's sockets of sessions ended elsewhere).
    public func endedSessions(among sessionIDs: [String]) async throws -> [String] {
        let object = try await call(
            .POST, RuntimeEndpoint.endedSessions, caller: RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil),
            body: ["session_ids": .array(sessionIDs.map(JSONValue.string))])
        guard case .array(let values)? = object["ended"] else { throw Self.notUnderstood }
        return values.compactMap(\.stringValue)
    }

    /// Readiness: the Runtime answers and accepts our assertion.
    /// Whether the Runtime answers and its store does. A store failure comes back as a
    /// `RuntimeRefusal` whose message names the store: for readiness only (public answers stay generic).
    public func checkHealth() async throws {
        _ = try await call(.GET, RuntimeEndpoint.health, caller: RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil), body: nil)
    }

    /// The background check: the Runtime's health whatever the circuit says. An answer of any
    /// kind closes the circuit (the Runtime is there, even if its store is not); a failed
    /// connect or a timeout opens it.
    package func probeHealth() async throws {
        do {
            _ = try await exchange(.GET, RuntimeEndpoint.health, caller: RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil), body: nil)
            circuit.recordRecovery()
        } catch let error as Unreachable {
            circuit.recordOutage(error.error.message)
            throw error.error
        } catch is CancellationError {
            throw CancellationError()  // the check's own time ran out: no news either way
        } catch {
            circuit.recordRecovery()
            throw error
        }
    }


    static func sessionID(_ intent: SessionIntent) throws -> String {
        guard let sessionID = intent.sessionID else { throw GatewayError(.badRequest, "session_missing", "a session_id is required") }
        return sessionID
    }

    static let notUnderstood = GatewayError(.badGateway, "upstream_unavailable", "the Runtime sent an answer the gateway does not understand")

    package func assertion(_ caller: RuntimeCaller) throws -> String {
        do {
            return try assertions.assertion(audience: audience, caller: caller)
        } catch {
            throw GatewayError.noSigningKey
        }
    }

    /// One call through the circuit: refused at once while the Runtime is known unreachable,
    /// and opening the circuit when it cannot be reached or does not answer in time.
    func call(_ method: HTTPMethod, _ path: String, caller: RuntimeCaller, body: JSONValue?) async throws -> JSONObject {
        try circuit.enter()
        defer { circuit.leave() }
        do {
            return try await exchange(method, path, caller: caller, body: body)
        } catch let error as Unreachable {
            circuit.recordOutage(error.error.message)
            throw error.error
        }
    }

    /// The Runtime could not be reached or did not answer in time (`error` is the public answer).
    struct Unreachable: Error {
        let error: GatewayError
    }

    private func exchange(_ method: HTTPMethod, _ path: String, caller: RuntimeCaller, body: JSONValue?) async throws -> JSONObject {
        guard let base = baseURL else {
            throw GatewayError.runtimeUnavailable("the Runtime is not listening yet; try again in a moment")
        }
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        request.headers.add(name: AssertionHeader.name, value: try assertion(caller))
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: JSONWriter.bytes(body)))
        }
        let status: HTTPResponseStatus
        let bytes: ByteBuffer
        do {
            (status, bytes) = try await CallSpans.http(method.rawValue, to: base, peer: "runtime") { span in
                // The call's Trace Context goes with it, this span the parent (the Runtime records no spans of its own yet).
                if let span, let fields = CallSpans.fields(of: span), let traceparent = fields.traceparent {
                    request.headers.replaceOrAdd(name: "traceparent", value: traceparent)
                    if let tracestate = fields.tracestate { request.headers.replaceOrAdd(name: "tracestate", value: tracestate) }
                }
                let response = try await http.execute(request, timeout: .milliseconds(Int64(timeout * 1000)))
                CallSpans.answered(span, status: Int(response.status.code))
                return (response.status, try await response.body.collect(upTo: 1 << 20))
            }
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            throw Unreachable(error: GatewayError(.gatewayTimeout, "upstream_timeout", "the Runtime did not answer within \(Int(timeout)) s; try again"))
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as HTTPClientError where error == .cancelled {
            throw CancellationError()
        } catch {
            throw Unreachable(error: GatewayError.runtimeUnavailable("the Runtime cannot be reached; try again shortly"))
        }
        let object = try? StrictJSONReader().parseObject(Array(bytes.readableBytesView))
        if (200..<300).contains(status.code) {
            guard let object else { throw GatewayError(.badGateway, "upstream_unavailable", "the Runtime sent an answer that is not JSON") }
            return object
        }
        if let object, let refusal = RuntimeRefusal(status: Int(status.code), json: object) {
            throw refusal
        }
        if status.code == 503 {
            throw GatewayError.runtimeUnavailable("the Runtime is overloaded or its store is busy; try again shortly")
        }
        throw GatewayError(.badGateway, "upstream_unavailable", "the Runtime failed (HTTP \(status.code)); try again shortly")
    }
}
