import JOSE

/// A refusal the Runtime answered with: HTTP status, stable code, one sentence.
///
/// The gateway receives these as typed values (it never compares the JSON by
/// hand) and decides from `code` what the public answer is.
public struct RuntimeRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: Int
    public let code: RuntimeErrorCode
    public let message: String

    public init(status: Int, code: RuntimeErrorCode, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    /// `{"error": code, "message": message}`.
    public var json: JSONValue { ["error": .string(code.rawValue), "message": .string(message)] }

    /// Reads a refusal body; `nil` unless it is `{"error": <known code>, "message": <string>}`.
    public init?(status: Int, json object: JSONObject) {
        guard let code = object["error"]?.stringValue.flatMap(RuntimeErrorCode.init(rawValue:)), let message = object["message"]?.stringValue else {
            return nil
        }
        self.init(status: status, code: code, message: message)
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
