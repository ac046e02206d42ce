import DataPlane
import EdgeHTTP
import HTTPTypes
import Hummingbird
import JOSE
import Logging
import NIOCore
import Observability
import Resilience
import RuntimeAPI
import SecurityGuard
import TrafficCop

/// Gives every request an id, turns every error into the JSON error model,
/// logs one line per request and records its metrics.
///
/// The log line holds the method, the route template, the path without its
/// query string (where a browser may carry `access_token`), the status, the
/// duration and the request id; never a header or a body.
struct RequestObservationMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext

    let logger: Logger
    /// The one line per request (the buffered access log under serve).
    let accessLog: AccessLog
    let metrics: GatewayMetrics
    /// Paths and their methods, for 405 instead of 404 on a known path.
    var knownRoutes: KnownRoutes? = nil

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let requestID = (try? SecureRandom.identifier(bytes: 9)) ?? "unknown"
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            response = Self.response(for: error, request: request, logger: logger, requestID: requestID, knownRoutes: knownRoutes)
        }
        response.headers[HTTPField.Name("X-Request-Id")!] = requestID
        let elapsed = ContinuousClock.now - started
        let nanoseconds = elapsed.nanoseconds
        let route = context.endpointPath ?? "unmatched"
        // A method no route answers is OTHER: over HTTP/2 a client may send any token as one, and
        // each label is a series kept for the process's life.
        let method = RouteTracingMiddleware.knownMethods.contains(request.method) ? request.method.rawValue : "OTHER"
        metrics.request(route: route, method: method, status: response.status.code, nanoseconds: nanoseconds)
        accessLog.record(
            requestID: requestID, method: request.method.rawValue, route: route, path: request.uri.path,
            status: Int(response.status.code), nanoseconds: nanoseconds, protocol: context.httpVersion)
        return response
    }

    /// A refusal a route threw, as the client is answered it; `nil` for any other error (a
    /// storage or internal failure, answered 503).
    static func refusal(_ error: any Error) -> GatewayError? {
        switch error {
        case is GatewayError, is RuntimeRefusal, is AdmissionRefusal, is AuthenticationFailure, is DependencyCircuit.Refusal: GatewayError(answering: error)
        default: nil
        }
    }

    /// The JSON error for anything a route threw.
    static func response(for error: any Error, request: Request, logger: Logger, requestID: String, knownRoutes: KnownRoutes? = nil) -> Response {
        if let refusal = refusal(error) { return refusal.response() }
        switch error {
        case let error as HTTPError:
            let code: String
            let message: String
            switch error.status {
            case .notFound:
                let allowed = knownRoutes?.methods(for: request.uri.path) ?? []
                if !allowed.isEmpty {
                    return GatewayError.methodNotAllowed(request.method.rawValue, path: PathRedaction.redactedPath(request.uri.path), allowed: allowed).response()
                }
                (code, message) = ("not_found", "no route answers \(request.method.rawValue) \(PathRedaction.redactedPath(request.uri.path)); the endpoints are listed at /.well-known/openapi.yaml")
            case .contentTooLarge:
                (code, message) = ("payload_too_large", "the request body is too large")
            case .methodNotAllowed:
                (code, message) = ("method_not_allowed", "\(request.method.rawValue) is not allowed on \(PathRedaction.redactedPath(request.uri.path))")
            default:
                (code, message) = ("invalid_request", "the request could not be read")
            }
            return GatewayError(error.status, code, message).response()
        default:
            // Storage and other infrastructure failures: 503, never 401/403.
            // Only the error's type is logged: a database error may quote values.
            logger.error("request failed", metadata: ["request_id": "\(requestID)", "error_type": "\(String(reflecting: type(of: error)))"])
            return GatewayError.unavailable("the gateway could not complete the request (storage or internal failure); try again shortly").response()
        }
    }
}

/// Cross-origin use: answers preflights and adds `Access-Control-Allow-Origin`
/// only for origins in `allowed_origins`. With the list empty nothing is added,
/// so browsers keep other origins out.
struct OriginPolicyMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    /// Its `allowedOrigins` are read once per request (a reload may change them).
    let table: LiveRouteTable

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], table.current.allowedOrigins.contains(origin) else {
            return try await next(request, context)
        }
        var response: Response
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            response = Response(status: .noContent)
            response.headers[.accessControlAllowMethods] = "GET, POST, PATCH, OPTIONS"
            response.headers[.accessControlAllowHeaders] = "Authorization, Content-Type, X-Session-Id"
            response.headers[.accessControlMaxAge] = "600"
        } else {
            response = try await next(request, context)
        }
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.vary] = "Origin"
        return response
    }
}
