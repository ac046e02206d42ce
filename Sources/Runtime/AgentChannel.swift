import JOSE
import RuntimeAPI
import StateSurface

/// The agent channel's frame protocol: one JSON object per text message.
///
/// In: `{"type":"intent","request_id","intent_type","payload","idempotency_key"?}`
/// or `{"type":"ping"}`. Out: `{"type":"result","request_id","execution_id","status","result"|"error"}`,
/// `{"type":"pong"}`, or `{"type":"error","error","message"}` for a frame that
/// could not be understood (the connection stays open).
public struct AgentChannel: Sendable {
    public let executions: ExecutionService
    public let sessionID: String
    public let caller: RuntimeCaller

    /// What to do after answering a frame.
    public enum Next: Sendable, Equatable {
        case reply(JSONValue)
        /// Reply, then close with 1008: the session is gone.
        case replyAndClose(JSONValue)
    }

    /// Answers one text frame.
    public func handle(text: String) async -> Next {
        let requestID: String
        let intent: IntentRequest
        do {
            switch try AgentFrame.parse(text) {
            case .ping:
                return .reply(["type": "pong"])
            case .intent(let id, let request):
                (requestID, intent) = (id, request)
            }
        } catch {
            return .reply(Self.error("invalid_frame", error.message, requestID: error.requestID))
        }
        do {
            let outcome = try await executions.execute(
                sessionID: sessionID, intentType: intent.intentType, payload: intent.payload,
                idempotencyKey: intent.idempotencyKey, caller: caller)
            var reply: JSONObject = ["type": "result", "request_id": .string(requestID)]
            if case .object(let body) = outcome.json {
                for member in body.members { reply[member.name] = member.value }
            }
            return .reply(.object(reply))
        } catch let error as RuntimeError {
            let reply: JSONValue = ["type": "result", "request_id": .string(requestID), "status": "failed", "error": error.json]
            return error.code == .sessionNotFound ? .replyAndClose(reply) : .reply(reply)
        } catch {
            return .reply(["type": "result", "request_id": .string(requestID), "status": "failed", "error": ["error": "unavailable", "message": "the Runtime could not run the intent; try again"]])
        }
    }

    static func error(_ code: String, _ message: String, requestID: String? = nil) -> JSONValue {
        var object: JSONObject = ["type": "error", "error": .string(code), "message": .string(message)]
        if let requestID { object["request_id"] = .string(requestID) }
        return .object(object)
    }
}
