import Hummingbird
import JOSE
import RuntimeAPI

/// A refusal from the Runtime: HTTP status, stable code, one sentence.
///
/// Rendered as `{"error": code, "message": message}`. 401s carry
/// `WWW-Authenticate`, naming the assertion scheme.
public struct RuntimeError: Error, Sendable, Equatable, HTTPResponseError {
    public let status: HTTPResponse.Status
    public let code: RuntimeErrorCode
    public let message: String

    public init(_ status: HTTPResponse.Status, _ code: RuntimeErrorCode, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    /// The same refusal as the contract's value (what the gateway's client reads back).
    public var refusal: RuntimeRefusal { RuntimeRefusal(status: status.code, code: code, message: message) }

    public var json: JSONValue { refusal.json }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if status == .unauthorized { headers[.wwwAuthenticate] = "PortcullisAssertion error=\"\(code.rawValue)\"" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(json))))
    }

    static func sessionMalformed(_ problem: SessionID.Problem = .malformed) -> RuntimeError {
        problem == .missing
            ? RuntimeError(.badRequest, .sessionMissing, problem.message)
            : RuntimeError(.badRequest, .sessionMalformed, problem.message)
    }

    static func sessionNotFound() -> RuntimeError {
        RuntimeError(.notFound, .sessionNotFound, "no live session has that session_id; it is unknown, expired or revoked")
    }

    static func sessionForbidden() -> RuntimeError {
        RuntimeError(.forbidden, .sessionForbidden, "the session belongs to another user or tenant")
    }

    static func identityRequired() -> RuntimeError {
        RuntimeError(.forbidden, .sessionAnonymous, "this needs a signed-in user; the assertion names none")
    }

    static func invalidRequest(_ message: String) -> RuntimeError {
        RuntimeError(.badRequest, .invalidRequest, message)
    }

    static func limitReached(_ limit: Int) -> RuntimeError {
        RuntimeError(.tooManyRequests, .limitReached, "you hold \(limit) live sessions, the most this gateway allows; log out of one first")
    }
}
