import Hummingbird
import JOSE
import SecurityGuard
import TrafficCop

/// A refusal at the edge: HTTP status, stable code, one sentence a person can act on.
///
/// Rendered as `{"error": code, "message": message}` plus `reason` when the
/// token verifier gave one. Every 401 carries `WWW-Authenticate: Bearer`,
/// with `error="invalid_token"` when a token was presented (RFC 6750);
/// every 429 carries `Retry-After`. Messages never repeat a credential.
public struct GatewayError: Error, Sendable, Equatable, HTTPResponseError {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    /// The verifier's reason code for `token_invalid`.
    public var reason: String?
    /// Seconds, for 429.
    public var retryAfter: Int?
    /// Whether a token was presented (shapes `WWW-Authenticate`).
    public var tokenPresented = false

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public var json: JSONValue {
        var object: JSONObject = ["error": .string(code), "message": .string(message)]
        if let reason { object["reason"] = .string(reason) }
        return .object(object)
    }

    public var headers: HTTPFields {
        var headers: HTTPFields = [.contentType: "application/json", .cacheControl: "no-store"]
        if status == .unauthorized {
            if tokenPresented {
                let description = message.filter { $0 != "\"" && $0 != "\\" && $0.isASCII }
                headers[.wwwAuthenticate] = "Bearer realm=\"portcullis\", error=\"invalid_token\", error_description=\"\(description)\""
            } else {
                headers[.wwwAuthenticate] = "Bearer realm=\"portcullis\""
            }
        }
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return headers
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        response()
    }

    func response() -> Response {
        Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(json))))
    }
}

extension GatewayError {
    static func invalidRequest(_ message: String) -> GatewayError {
        GatewayError(.badRequest, "invalid_request", message)
    }

    static func unavailable(_ message: String) -> GatewayError {
        GatewayError(.serviceUnavailable, "unavailable", message)
    }

    static func rateLimited(retryAfter seconds: Double) -> GatewayError {
        var error = GatewayError(.tooManyRequests, "rate_limited", "too many requests from you; wait \(Int(seconds.rounded(.up))) s and try again")
        error.retryAfter = max(1, Int(seconds.rounded(.up)))
        return error
    }

    static let noSigningKey = GatewayError.unavailable("the gateway has no active signing key; add one with portcullis keys generate")

    static let invalidCredentials = GatewayError(.unauthorized, "invalid_credentials", "the username or password is wrong, or the account is disabled")

    /// The 401 for a refused access token.
    init(_ failure: AuthenticationFailure) {
        switch failure {
        case .missing:
            self.init(.unauthorized, "token_missing", failure.message)
        case .sessionIDGiven:
            self.init(.unauthorized, "token_invalid", failure.message)
            reason = "session_id_given"
            tokenPresented = true
        case .refreshTokenGiven:
            self.init(.unauthorized, "token_invalid", failure.message)
            reason = "refresh_token_given"
            tokenPresented = true
        case .invalid(let error):
            self.init(.unauthorized, "token_invalid", failure.message)
            reason = error.reason.rawValue
            tokenPresented = true
        case .revoked:
            self.init(.unauthorized, "token_revoked", failure.message)
            tokenPresented = true
        }
    }

    /// The answer to an intent the Traffic Cop did not admit.
    init(_ refusal: AdmissionRefusal) {
        switch refusal.kind {
        case .incomplete: self.init(.badRequest, refusal.code, refusal.message)
        case .identityRequired: self.init(.unauthorized, refusal.code, refusal.message)
        case .notAllowed: self.init(.forbidden, refusal.code, refusal.message)
        case .limitReached: self.init(.tooManyRequests, refusal.code, refusal.message)
        }
    }
}
