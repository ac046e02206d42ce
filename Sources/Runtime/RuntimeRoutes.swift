import AgentLink
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import JOSE
import RuntimeAPI
import ServiceLifecycle
import StateSurface

/// The Runtime's internal API under `/runtime/v1`. Every route, the agent
/// channel included, first verifies the gateway's assertion.
public struct RuntimeRoutes: Sendable {
    public let sessions: SessionService
    public let executions: ExecutionService
    public let assertions: AssertionVerifier

    public init(sessions: SessionService, executions: ExecutionService, assertions: AssertionVerifier) {
        self.sessions = sessions
        self.executions = executions
        self.assertions = assertions
    }

    var maximumBody: Int { sessions.configuration.maximumMessageBytes }

    func caller(_ request: Request) throws -> RuntimeCaller {
        try assertions.caller(fromHeader: request.headers[HTTPField.Name(AssertionHeader.name)!])
    }

    /// The request body as a strict JSON object; an empty body is an empty object.
    func body(_ request: Request) async throws -> JSONObject {
        do {
            return try await request.jsonObject(limit: maximumBody)
        } catch .tooLarge(let limit) {
            throw RuntimeError(.contentTooLarge, .payloadTooLarge, "the request body is limited to \(limit) bytes")
        } catch .invalid(let message) {
            throw RuntimeError.invalidRequest("the body is not a strict JSON object: \(message)")
        }
    }

    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(value))))
    }

    /// Adds the routes to `router`.
    public func register<Context: WebSocketRequestContext>(on router: Router<Context>) {
        let group = router.group(RouterPath(RuntimeEndpoint.prefix))

        // Readiness for the gateway: the assertion verifies and the store answers.
        group.get("health") { request, _ -> Response in
            _ = try caller(request)
            do {
                try await sessions.repository.ping()
            } catch {
                throw RuntimeError(.serviceUnavailable, .unavailable, (error as? StateSurfaceError)?.message ?? "the Runtime's store does not answer")
            }
            return Self.json(["status": "ok"])
        }

        group.post("sessions") { request, _ -> Response in
            let caller = try caller(request)
            let creation: SessionCreateRequest
            do {
                creation = try SessionCreateRequest(json: try await body(request))
            } catch let error as RuntimeRequestError {
                throw RuntimeError.invalidRequest(error.message)
            }
            let session: SessionRecord
            if let userID = caller.userID, let tenantID = caller.tenantID {
                session = try await sessions.createAuthenticated(
                    userID: userID, tenantID: tenantID, metadata: creation.metadata, maximumLive: creation.maximumLiveSessions)
            } else {
                session = try await sessions.createAnonymous(metadata: creation.metadata)
            }
            return Self.json(session.view.json, status: .created)
        }

        // Which of the given sessions have ended: the gateway closes their sockets.
        group.post("ended-sessions") { request, _ -> Response in
            _ = try caller(request)
            guard case .array(let values)? = try await body(request)["session_ids"], values.count <= 10_000 else {
                throw RuntimeError.invalidRequest("session_ids must be an array of at most 10000 session ids")
            }
            let ids = values.compactMap(\.stringValue)
            return Self.json(["ended": .array(try await sessions.ended(among: ids).map(JSONValue.string))])
        }

        group.get("sessions/:id") { request, context -> Response in
            let caller = try caller(request)
            let session = try await sessions.accessible(try context.parameters.require("id"), by: caller)
            return Self.json(session.view.json)
        }

        group.post("sessions/:id/upgrade") { request, context -> Response in
            let caller = try caller(request)
            guard let userID = caller.userID, let tenantID = caller.tenantID else { throw RuntimeError.identityRequired() }
            let upgrade: SessionUpgradeRequest
            do {
                upgrade = try SessionUpgradeRequest(json: try await body(request))
            } catch let error as RuntimeRequestError {
                throw RuntimeError.invalidRequest(error.message)
            }
            let session = try await sessions.upgrade(
                try context.parameters.require("id"), userID: userID, tenantID: tenantID, maximumLive: upgrade.maximumLiveSessions)
            return Self.json(session.view.json)
        }

        group.post("sessions/:id/revoke") { request, context -> Response in
            let caller = try caller(request)
            let session = try await sessions.revoke(try context.parameters.require("id"), by: caller)
            return Self.json(session.view.json)
        }

        group.post("intents") { request, _ -> Response in
            let caller = try caller(request)
            let body = try await body(request)
            guard let sessionID = body["session_id"]?.stringValue else { throw RuntimeError.invalidRequest("session_id is required") }
            let intent: IntentRequest
            do {
                intent = try IntentRequest(body)
            } catch let error as RuntimeRequestError {
                throw RuntimeError.invalidRequest(error.message)
            }
            let outcome = try await executions.execute(
                sessionID: sessionID, intentType: intent.intentType, payload: intent.payload, idempotencyKey: intent.idempotencyKey, caller: caller)
            return Self.json(outcome.json)
        }

        group.get("executions/:id") { request, context -> Response in
            let caller = try caller(request)
            return Self.json(try await executions.execution(id: try context.parameters.require("id"), caller: caller).json)
        }

        // The agent link: one gateway's agent sockets over one connection, admitted
        // by the gateway's assertion before the 101; each stream names its session.
        group.ws("agent-link") { request, _ in
            _ = try caller(request)
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, _ in
            let streams = AgentLinkStreams(executions: executions, outbound: outbound)
            // A graceful shutdown ends the link (the gateway sees it close and ends its sockets
            // with 1011): the gateway keeps its link open, so waiting for it would hold the
            // Runtime's shutdown forever.
            await cancelWhenGracefulShutdown {
                await withDiscardingTaskGroup { group in
                    do {
                        for try await message in inbound.messages(maxSize: maximumBody + AgentLinkFrame.overhead) {
                            guard case .binary(let buffer) = message else { continue }
                            if case .drain(let id) = await streams.receive(buffer) {
                                group.addTask { await streams.drain(id) }
                            }
                        }
                    } catch {
                        // The link failed (too large a message or a broken connection): its streams end with it.
                    }
                    group.cancelAll()
                }
            }
        }
    }
}
