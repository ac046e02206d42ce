import HTTPTypes
import JOSE
import NIOCore
import Resilience
import RuntimeAPI
import SecurityGuard
import TrafficCop

/// A refusal at the edge: HTTP status, stable code, one sentence a person can act on.
///
/// Rendered as `{"error": code, "message": message}` plus `reason` when the
/// token verifier gave one. Every 401 carries `WWW-Authenticate: Bearer`,
/// with `error="invalid_token"` when a token was presented (RFC 6750);
/// every 429 carries `Retry-After`. Messages never repeat a credential.
public struct GatewayError: Error, Sendable, Equatable {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    /// The verifier's reason code for `token_invalid`.
    public var reason: String?
    /// Seconds, for 429.
    public var retryAfter: Int?
    /// Whether a token was presented (shapes `WWW-Authenticate`).
    public var tokenPresented = false
    /// The methods the path answers, for 405 (`Allow`).
    public var allow: String?
    /// A route policy's refusal: `WWW-Authenticate: Bearer error="insufficient_scope"`, with
    /// `scope=` these scopes when not empty.
    public var insufficientScope: String?
    /// An MCP resource's metadata URL, named as `resource_metadata` (RFC 9728 §5.1) in the
    /// `WWW-Authenticate` of a 401 or an `insufficient_scope` 403, so that a client finds where to
    /// get a token from the refusal alone.
    public var resourceMetadata: String?
    /// The scopes a 401's challenge asks for (`scope=`, space-separated), beside `resourceMetadata`.
    public var challengeScope: String?

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
            let challenge =
                (resourceMetadata.map { ", resource_metadata=\"\($0)\"" } ?? "") + (challengeScope.map { $0.isEmpty ? "" : ", scope=\"\($0)\"" } ?? "")
            if tokenPresented {
                let description = message.filter { $0 != "\"" && $0 != "\\" && $0.isASCII }
                headers[.wwwAuthenticate] = "Bearer realm=\"portcullis\"\(challenge), error=\"invalid_token\", error_description=\"\(description)\""
            } else {
                headers[.wwwAuthenticate] = "Bearer realm=\"portcullis\"" + challenge
            }
        }
        if let insufficientScope {
            // RFC 6750 3.1: the scopes the route needs, when it was scopes that failed.
            let metadata = resourceMetadata.map { ", resource_metadata=\"\($0)\"" } ?? ""
            headers[.wwwAuthenticate] =
                "Bearer realm=\"portcullis\", error=\"insufficient_scope\"" + (insufficientScope.isEmpty ? "" : ", scope=\"\(insufficientScope)\"") + metadata
        }
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        if let allow { headers[.allow] = allow }
        return headers
    }

}

extension GatewayError {
    package static func invalidRequest(_ message: String) -> GatewayError {
        GatewayError(.badRequest, "invalid_request", message)
    }

    /// 405 with `Allow`: `method` is not one `path` answers.
    package static func methodNotAllowed(_ method: String, path: String, allowed: some Sequence<String>) -> GatewayError {
        let list = allowed.sorted().joined(separator: ", ")
        var error = GatewayError(.methodNotAllowed, "method_not_allowed", "\(method) is not allowed on \(path); it answers \(list)")
        error.allow = list
        return error
    }

    package static func unavailable(_ message: String) -> GatewayError {
        GatewayError(.serviceUnavailable, "unavailable", message)
    }

    package static func rateLimited(retryAfter seconds: Double) -> GatewayError {
        var error = GatewayError(.tooManyRequests, "rate_limited", "too many requests from you; wait \(Int(seconds.rounded(.up))) s and try again")
        error.retryAfter = max(1, Int(seconds.rounded(.up)))
        return error
    }

    package static let noSigningKey = GatewayError.unavailable("the gateway has no active signing key; add one with portcullis keys generate")

    package static let invalidCredentials = GatewayError(.unauthorized, "invalid_credentials", "the username or password is wrong, or the account is disabled")

    /// The 401 for a refused access token.
    package init(_ failure: AuthenticationFailure) {
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
        case .issuerUnavailable:
            // The provider is down, not the token bad: 503, never 401, so clients keep their token.
            self.init(.serviceUnavailable, "issuer_unavailable", failure.message)
            retryAfter = 5
        case .tenantNotAllowed:
            self.init(.forbidden, "tenant_forbidden", failure.message)
            tokenPresented = true
        }
    }

    /// The answer to an intent the Traffic Cop did not admit.
    package init(_ refusal: AdmissionRefusal) {
        switch refusal.kind {
        case .incomplete: self.init(.badRequest, refusal.code, refusal.message)
        case .identityRequired: self.init(.unauthorized, refusal.code, refusal.message)
        case .notAllowed: self.init(.forbidden, refusal.code, refusal.message)
        case .limitReached: self.init(.tooManyRequests, refusal.code, refusal.message)
        }
    }

    /// The Runtime's refusal as the public answer: its status and code (the
    /// client's business); a refusal of the gateway's own assertion is the
    /// gateway's fault, so 503, never 401.
    package init(_ refusal: RuntimeRefusal) {
        switch refusal.code {
        case .assertionMissing, .assertionInvalid:
            self = .runtimeUnavailable(
                "the Runtime refused the gateway's assertion; check that both use the same keys, issuer and Runtime name")
        case .unavailable:
            self = .runtimeUnavailable("the Runtime is overloaded or its store is busy; try again shortly")
        default:
            self.init(HTTPResponse.Status(code: refusal.status), refusal.code.rawValue, refusal.message)
        }
    }

    /// Any error a route or the guard met, as the answer to give: the typed
    /// refusals keep their status and code, anything else is a 503.
    package init(answering error: any Error) {
        switch error {
        case let error as GatewayError: self = error
        case let refusal as RuntimeRefusal: self.init(refusal)
        case let refusal as AdmissionRefusal: self.init(refusal)
        case let failure as AuthenticationFailure: self.init(failure)
        case let refusal as DependencyCircuit.Refusal: self.init(refusal)
        default: self = .unavailable("the gateway could not complete the request (storage or internal failure); try again shortly")
        }
    }

    /// A request refused at once because a dependency it needs is known down (`store_unavailable`,
    /// `runtime_unavailable`) or has too many waiting already (`store_busy`, `runtime_busy`): 503 with `Retry-After`.
    package init(_ refusal: DependencyCircuit.Refusal) {
        self.init(.serviceUnavailable, "\(refusal.dependency)_\(refusal.reason == .open ? "unavailable" : "busy")", refusal.message)
        retryAfter = refusal.retryAfter
    }

    package static func runtimeUnavailable(_ message: String) -> GatewayError {
        GatewayError(.serviceUnavailable, "upstream_unavailable", message)
    }

    /// A session id from the path, body or a header, checked for form (naming a token mix-up).
    package static func checkedSessionID(_ value: String?) throws -> String {
        if let problem = SessionID.problem(with: value) {
            throw GatewayError(.badRequest, problem == .missing ? "session_missing" : "session_malformed", problem.message)
        }
        guard let value else { throw GatewayError(.badRequest, "session_missing", SessionID.Problem.missing.message) }
        return value
    }
}

extension GatewayError {
    /// 403 `insufficient_scope` for a route policy's refusal: `reason` names the requirement
    /// that failed (`scopes`, `any_of`, `tenants`, `issuers`, `session`), never the caller's claims.
    package init(refusedBy refusal: RoutePolicy.Refusal) {
        self.init(.forbidden, "insufficient_scope", refusal.message)
        reason = refusal.requirement
        insufficientScope = refusal.scopes.joined(separator: " ")
    }
}
