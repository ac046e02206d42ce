import DataPlane
import EdgeHTTP
import HTTPTypes
import NIOCore
import SecurityGuard
import TokenExchange

/// The data plane's source of exchanged tokens: the cache on the event loop, else one exchange at
/// the provider off it. An `ExchangeError` becomes the caller's answer (`exchange_refused` 403,
/// `exchange_unavailable` 503, `exchange_requires_sign_in` 403).
struct ExchangedCredentials: ExchangedCredentialSource {
    let service: TokenExchangeService

    func token(for caller: AuthenticatedCaller, target: ExchangeTarget, on eventLoop: any EventLoop) -> UpstreamCredentialLookup {
        let key = TokenExchangeService.Key(userID: caller.userID, tenantID: caller.tenantID, target: target)
        if let token = service.cachedToken(for: key) { return .known(token) }
        let service = service
        return .asking(
            eventLoop.makeFutureWithTask {
                do {
                    return try await service.token(for: key)
                } catch let error as ExchangeError {
                    throw GatewayError(HTTPResponse.Status(code: error.status), error.code, error.message)
                }
            })
    }
}
