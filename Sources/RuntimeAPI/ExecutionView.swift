import JOSE

/// What an execution came to: `{execution_id, status, result | error, replayed?}`.
public struct ExecutionView: Sendable, Equatable {
    public var executionID: String
    public var status: ExecutionStatus
    /// The intent's result once completed.
    public var result: JSONValue?
    /// `{error, message}` once failed.
    public var error: JSONValue?
    /// True when an earlier execution with the same idempotency key answered.
    public var replayed: Bool

    public init(executionID: String, status: ExecutionStatus, result: JSONValue?, error: JSONValue?, replayed: Bool) {
        self.executionID = executionID
        self.status = status
        self.result = result
        self.error = error
        self.replayed = replayed
    }

    public var json: JSONValue {
        var object: JSONObject = ["execution_id": .string(executionID), "status": .string(status.rawValue)]
        if let result { object["result"] = result }
        if let error { object["error"] = error }
        if replayed { object["replayed"] = true }
        return .object(object)
    }

    /// Reads the wire form; `nil` for anything that is not an execution object.
    public init?(json object: JSONObject) {
        guard let id = object["execution_id"]?.stringValue, !id.isEmpty,
            let status = object["status"]?.stringValue.flatMap(ExecutionStatus.init(rawValue:))
        else { return nil }
        self.init(executionID: id, status: status, result: object["result"], error: object["error"], replayed: object["replayed"] == true)
    }
}
