import JOSE

/// An intent as the API and the agent channel both receive it:
/// `{"intent_type", "payload"?, "idempotency_key"?}`. One parser, one set of rules.
struct IntentRequest: Sendable {
    let intentType: String
    let payload: JSONValue
    let idempotencyKey: String?

    /// - Throws: a sentence saying what is wrong with the object.
    init(_ object: JSONObject) throws(IntentRequestError) {
        guard let intentType = object["intent_type"]?.stringValue else { throw IntentRequestError("intent_type is required and must be a string") }
        switch object["idempotency_key"] {
        case nil, .null?: idempotencyKey = nil
        case .string(let key)?: idempotencyKey = key
        default: throw IntentRequestError("idempotency_key must be a string")
        }
        self.intentType = intentType
        self.payload = object["payload"] ?? .object(JSONObject())
    }
}

struct IntentRequestError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
