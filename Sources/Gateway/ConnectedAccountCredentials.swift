import ConnectedAccounts
import DataPlane
import EdgeHTTP
import JOSE
import NIOCore
import SecurityGuard

/// The data plane's source of people's tokens at connected services: the cache on the event
/// loop, else the store's sealed row opened off it (refreshed first when it is about to expire).
struct ConnectedAccountCredentials: UpstreamCredentialSource {
    let accounts: ConnectedAccountService
    let cache: ConnectedTokenCache
    let clock: any TokenClock
    /// `{public_url}/.portcullis/connect/`.
    let connectBase: String

    func token(for caller: AuthenticatedCaller, connection: String, on eventLoop: any EventLoop) -> UpstreamCredentialLookup {
        let owner = ConnectionTokenVault.Owner(userID: caller.userID, tenantID: caller.tenantID, connection: connection)
        let now = clock.now()
        if let token = cache.token(for: owner, now: now) { return .known(token) }
        let (accounts, cache, clock) = (accounts, cache, clock)
        return .asking(
            eventLoop.makeFutureWithTask {
                do {
                    let seen = cache.generation
                    guard let (token, expiresAt) = try await accounts.currentAccessToken(for: owner, now: clock.now()) else { return nil }
                    guard cache.generation == seen else {
                        // A disconnect (or another forget) was applied during the read: read again, after it.
                        return try await accounts.currentAccessToken(for: owner, now: clock.now())?.token
                    }
                    cache.keep(token, for: owner, expiresAt: expiresAt, now: clock.now(), seen: seen)
                    return token
                } catch is ConnectError {
                    throw GatewayError(.serviceUnavailable, "connection_unavailable", "your token at \(connection) has expired and its service cannot renew it now; try again shortly")
                }
            })
    }

    func connectURL(connection: String) -> String { connectBase + connection }

    func elicitation(for caller: AuthenticatedCaller, connection: String, on eventLoop: any EventLoop) -> EventLoopFuture<String> {
        let owner = ConnectionTokenVault.Owner(userID: caller.userID, tenantID: caller.tenantID, connection: connection)
        let (accounts, clock) = (accounts, clock)
        let clientID = caller.clientID
        return eventLoop.makeFutureWithTask { try await accounts.makeElicitation(for: owner, clientID: clientID, now: clock.now()) }
    }
}
