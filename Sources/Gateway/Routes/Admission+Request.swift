import DataPlane
import EdgeHTTP
import HTTPTypes
import Hummingbird
import RuntimeAccess
import SecurityGuard
import TrafficCop

extension Admission {
    /// The client's address for rate limits (peer, or `X-Forwarded-For` from a trusted proxy).
    func clientAddress(_ request: Request, _ context: GatewayRequestContext) -> String {
        clientAddresses.clientAddress(peer: context.peerAddress, forwardedFor: request.headers[values: HTTPField.Name("X-Forwarded-For")!])
    }

    /// The key the client counts under in per-client rate limits: its address, or its IPv6 /64.
    func clientKey(_ request: Request, _ context: GatewayRequestContext) -> String {
        ClientAddressResolver.rateLimitKey(clientAddress(request, context))
    }
}

extension CallerAuthentication {
    /// The caller a required Bearer token proves.
    func requireCaller(_ request: Request) async throws -> AuthenticatedCaller {
        guard let caller = try await optionalCaller(request) else {
            metrics.tokenRejected(reason: "missing")
            throw GatewayError(AuthenticationFailure.missing)
        }
        return caller
    }

    /// The caller if a Bearer token was sent (it must then be valid); `nil` if none was.
    func optionalCaller(_ request: Request) async throws -> AuthenticatedCaller? {
        do {
            guard let token = try AccessTokenAuthenticator.bearerToken(fromAuthorization: request.headers[.authorization]) else { return nil }
            return try await authenticator.authenticate(token)
        } catch let failure as AuthenticationFailure {
            Self.record(failure, in: metrics)
            throw GatewayError(failure)
        }
    }
}
