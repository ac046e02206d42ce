import EdgeHTTP
import SecurityGuard

extension ProxyExchange {
    /// Looks up the caller's token at the route's connected service, then forwards: from memory
    /// on this event loop when it is there, else after the read. A caller who has not connected
    /// the service is refused with where to connect it.
    func lookUpCredential(_ credential: UpstreamCredential, caller: AuthenticatedCaller?, sessionID: String?) {
        guard case .connection(let name) = credential else { return }
        // `auth: none` without a token: nobody to act as.
        guard let caller else {
            return fail(GatewayError(.unauthorized, "token_missing", "this route acts as you at \(name): send an access token"))
        }
        guard let source = plane.credentials else {
            return fail(GatewayError.unavailable("this route's connection \(name) is not available on this gateway; try again shortly"))
        }
        switch source.token(for: caller, connection: name, on: eventLoop) {
        case .known(let token?):
            upstreamBearer = token
            proceed(caller, sessionID: sessionID)
        case .known(nil):
            fail(Self.connectionRequired(name, url: source.connectURL(connection: name)))
        case .asking(let read):
            then(read) { exchange, result in
                switch result {
                case .success(let token?):
                    exchange.upstreamBearer = token
                    exchange.proceed(caller, sessionID: sessionID)
                case .success(nil): exchange.fail(Self.connectionRequired(name, url: source.connectURL(connection: name)))
                case .failure(let error): exchange.fail(GatewayError(answering: error))
                }
            }
        }
    }

    /// 403 `connection_required`: the person must connect the service first, at `url`.
    static func connectionRequired(_ name: String, url: String) -> GatewayError {
        GatewayError(.forbidden, "connection_required", "this route acts as you at \(name), which you have not connected: open \(url) to connect it, then try again")
    }
}
