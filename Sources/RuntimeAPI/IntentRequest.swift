import JOSE

/// An intent as the API and the agent channel both carry it:
/// `{"intent_type", "payload"?, "idempotency_key"?}`. One parser, one set of rules.
public struct IntentRequest: Sendable, Equatable {
    public let intentType: String
    public let payload: JSONValue
    public let idempotencyKey: String?

    public init(intentType: String, payload: JSONValue = .object(JSONObject()), idempotencyKey: String? = nil) {
        self.intentType = intentType
        self.payload = payload
        self.idempotencyKey = idempotencyKey
    }

    /// - Throws: a sentence saying what is wrong with the object.
    public init(_ object: JSONObject) throws(RuntimeRequestError) {
        guard let intentType = object["intent_type"]?.stringValue, !intentType.isEmpty else {
            throw RuntimeRequestError("intent_type is required and must be a non-empty string")
        }
        switch object["idempotency_key"] {
        case nil, .null?: idempotencyKey = nil
        case .string(let key)?: idempotencyKey = key
        default: throw RuntimeRequestError("idempotency_key must be a string")
        }
        self.intentType = intentType
        self.payload = object["payload"] ?? .object(JSONObject())
    }

    /// The body of `POST /runtime/v1/intents`: these members plus `session_id`.
    public func json(sessionID: String) -> JSONValue {
        var object: JSONObject = ["session_id": .string(sessionID), "intent_type": .string(intentType), "payload": payload]
        if let idempotencyKey { object["idempotency_key"] = .string(idempotencyKey) }
        return .object(object)
    }
}
