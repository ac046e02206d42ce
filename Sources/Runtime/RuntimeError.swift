import Hummingbird
import JOSE

/// A refusal from the Runtime: HTTP status, stable code, one sentence.
///
/// Rendered as `{"error": code, "message": message}`. 401s carry
/// `WWW-Authenticate`, naming the assertion scheme.
public struct RuntimeError: Error, Sendable, Equatable, HTTPResponseError {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public var json: JSONValue { ["error": .string(code), "message": .string(message)] }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if status == .unauthorized { headers[.wwwAuthenticate] = "PortcullisAssertion error=\"\(code)\"" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(json))))
    }

    static func sessionMalformed(_ problem: SessionID.Problem = .malformed) -> RuntimeError {
        problem == .missing
            ? RuntimeError(.badRequest, "session_missing", problem.message)
            : RuntimeError(.badRequest, "session_malformed", problem.message)
    }

    static func sessionNotFound() -> RuntimeError {
        RuntimeError(.notFound, "session_not_found", "no live session has that session_id; it is unknown, expired or revoked")
    }

    static func sessionForbidden() -> RuntimeError {
        RuntimeError(.forbidden, "session_forbidden", "the session belongs to another user or tenant")
    }

    static func identityRequired() -> RuntimeError {
        RuntimeError(.forbidden, "session_anonymous", "this needs a signed-in user; the assertion names none")
    }

    static func invalidRequest(_ message: String) -> RuntimeError {
        RuntimeError(.badRequest, "invalid_request", message)
    }
}
