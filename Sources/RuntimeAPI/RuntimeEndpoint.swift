import JOSE

/// The Runtime's internal routes, named once for the server and its client.
public enum RuntimeEndpoint {
    public static let prefix = "/runtime/v1"
    /// `POST`: create a session (`SessionCreateRequest`) → 201 `SessionView`.
    public static let sessions = prefix + "/sessions"
    /// `POST {session_ids}` → `{ended}`: which of these sessions are no longer live.
    public static let endedSessions = prefix + "/ended-sessions"
    /// `POST`: run an intent (`IntentRequest` plus `session_id`) → `ExecutionView`.
    public static let intents = prefix + "/intents"
    /// `GET`: readiness; the assertion verifies and the store answers.
    public static let health = prefix + "/health"
    /// `GET`: the agent link (WebSocket): every agent socket of one gateway
    /// over one connection, in `AgentLinkFrame`s.
    public static let agentLink = prefix + "/agent-link"

    /// `GET` → `SessionView`.
    public static func session(_ id: String) -> String { sessions + "/" + id }
    /// `POST` (`SessionUpgradeRequest`) → `SessionView`.
    public static func upgrade(_ id: String) -> String { session(id) + "/upgrade" }
    /// `POST` → the `SessionView`, now revoked.
    public static func revoke(_ id: String) -> String { session(id) + "/revoke" }
    /// `GET` → `ExecutionView`.
    public static func execution(_ id: String) -> String { prefix + "/executions/" + id }
}

/// The body of a session creation: `{metadata?, max_live_sessions?}`.
///
/// `max_live_sessions` is the contract's sessions-per-user limit, decided by
/// the gateway's Traffic Cop; the Runtime enforces it in the same transaction
/// as the write, so concurrent creations cannot exceed it.
public struct SessionCreateRequest: Sendable, Equatable {
    public var metadata: JSONObject
    public var maximumLiveSessions: Int?

    public init(metadata: JSONObject = JSONObject(), maximumLiveSessions: Int? = nil) {
        self.metadata = metadata
        self.maximumLiveSessions = maximumLiveSessions
    }

    public var json: JSONValue {
        var object: JSONObject = ["metadata": .object(metadata)]
        if let maximumLiveSessions { object["max_live_sessions"] = .number(Double(maximumLiveSessions)) }
        return .object(object)
    }

    /// - Throws: a sentence naming the member that is wrong.
    public init(json object: JSONObject) throws(RuntimeRequestError) {
        switch object["metadata"] {
        case nil, .null?: metadata = JSONObject()
        case .object(let value)?: metadata = value
        default: throw RuntimeRequestError("metadata must be a JSON object")
        }
        maximumLiveSessions = try RuntimeRequestError.limit(object["max_live_sessions"])
    }
}

/// The body of an upgrade: `{max_live_sessions?}` (see `SessionCreateRequest`).
public struct SessionUpgradeRequest: Sendable, Equatable {
    public var maximumLiveSessions: Int?

    public init(maximumLiveSessions: Int? = nil) { self.maximumLiveSessions = maximumLiveSessions }

    public var json: JSONValue {
        maximumLiveSessions.map { ["max_live_sessions": .number(Double($0))] } ?? .object(JSONObject())
    }

    public init(json object: JSONObject) throws(RuntimeRequestError) {
        maximumLiveSessions = try RuntimeRequestError.limit(object["max_live_sessions"])
    }
}

/// A request body the Runtime cannot use, with the sentence that says why.
public struct RuntimeRequestError: Error, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }

    static func limit(_ value: JSONValue?) throws(RuntimeRequestError) -> Int? {
        guard let value, value != .null else { return nil }
        guard case .number(let number) = value, number >= 1, number <= 1_000_000, number.rounded() == number else {
            throw RuntimeRequestError("max_live_sessions must be a whole number from 1 to 1000000")
        }
        return Int(number)
    }
}
