import Hummingbird
import JOSE
import Runtime
import SecurityGuard
import TrafficCop

/// `/api/auth`: login (upgrading the session in place), refresh, logout.
struct AuthRoutes: Sendable {
    let services: GatewayServices

    func register(on router: Router<GatewayRequestContext>) {
        router.post("/api/auth/login") { request, context in try await login(request, context) }
        router.post("/api/auth/refresh") { request, _ in try await refresh(request) }
        router.post("/api/auth/logout") { request, _ in try await logout(request) }
    }

    /// Checks the password, then upgrades the given anonymous session (same
    /// `session_id`), reuses it if it is already the user's, or creates one.
    func login(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try services.limit(.loginPerClient, key: services.clientAddress(request, context))
        let body = try await services.body(request)
        let username = try body.requiredString("username")
        let password = try body.requiredString("password")
        let tenantID = try body.optionalString("tenant") ?? services.configuration.defaultTenant
        let sessionID = try body.optionalString("session_id").map(GatewayServices.checkedSessionID)
        try services.limit(.loginPerUsername, key: tenantID + "/" + username)

        guard let user = try await services.accounts.authenticate(username: username, tenantID: tenantID, password: password) else {
            services.metrics.loginFailed()
            services.logger.notice("login refused", metadata: ["tenant_id": "\(JSONValue.clip(tenantID))"])
            throw GatewayError.invalidCredentials
        }
        let principal = Principal(userID: user.id, tenantID: user.tenantID)
        let session: JSONObject
        if let sessionID {
            session = try await services.runtime.perform(services.admit(SessionIntent(.upgrade, principal: principal, sessionID: sessionID)))
        } else {
            session = try await createOwnedSession(for: principal, metadata: JSONObject())
        }
        guard let grantedSessionID = session["session_id"]?.stringValue else {
            throw GatewayError(.badGateway, "upstream_unavailable", "the Runtime answered without a session_id")
        }
        let refresh = try await services.refreshTokens.issue(sessionID: grantedSessionID, userID: user.id, tenantID: user.tenantID)
        services.logger.info("login", metadata: ["user_id": "\(user.id)", "tenant_id": "\(user.tenantID)", "session_id": "\(grantedSessionID)"])
        return try tokenResponse(principal: principal, sessionID: grantedSessionID, refreshToken: refresh.token)
    }

    /// A new session owned by `principal`, within the contract's sessions-per-user limit.
    func createOwnedSession(for principal: Principal, metadata: JSONObject) async throws -> JSONObject {
        let held = try await services.state.liveSessionCount(userID: principal.userID, tenantID: principal.tenantID, now: services.clock.now())
        let admitted = try services.admit(SessionIntent(.createOwned, principal: principal), facts: AdmissionFacts(liveSessionsOfPrincipal: held))
        return try await services.runtime.perform(admitted, body: ["metadata": .object(metadata)])
    }

    /// `{access_token, token_type, expires_in, refresh_token, session_id}`, never cached.
    func tokenResponse(principal: Principal, sessionID: String, refreshToken: String) throws -> Response {
        let access: IssuedAccessToken
        do {
            access = try services.issuer.issue(subject: principal.userID, tenantID: principal.tenantID, clientID: services.configuration.clientID)
        } catch {
            throw GatewayError.noSigningKey
        }
        return GatewayServices.json(
            [
                "access_token": .string(access.token), "token_type": "Bearer", "expires_in": .number(services.configuration.accessTokenLifetime),
                "refresh_token": .string(refreshToken), "session_id": .string(sessionID),
            ], noStore: true)
    }

    /// Rotates the refresh token; a spent one revokes its family and its session.
    func refresh(_ request: Request) async throws -> Response {
        let body = try await services.body(request)
        let token = try body.requiredString("refresh_token")
        if token.hasPrefix(SessionID.prefix) {
            throw Self.refreshRefused("session_id_given", "a session_id was sent where a refresh token is expected; send the refresh_token from login")
        }
        if token.hasPrefix("eyJ") {
            throw Self.refreshRefused("access_token_given", "an access token was sent where a refresh token is expected; send the refresh_token from login")
        }
        do {
            // The session first, without spending the token: when two refreshes race,
            // the winner's answer must not depend on the loser's reuse revocation.
            let presented = try await services.refreshTokens.peek(token)
            let principal = Principal(userID: presented.userID, tenantID: presented.tenantID)
            do {
                _ = try await services.runtime.perform(services.admit(SessionIntent(.read, principal: principal, sessionID: presented.sessionID)))
            } catch let error as GatewayError where error.status == .notFound || error.status == .forbidden {
                _ = try await services.state.revokeRefreshTokens(sessionID: presented.sessionID, now: services.clock.now())
                throw Self.refreshRefused("session_ended", "the session of this refresh token has ended; log in again")
            }
            let next = try await services.refreshTokens.rotate(token)
            return try tokenResponse(principal: principal, sessionID: next.record.sessionID, refreshToken: next.token)
        } catch let failure as RefreshFailure {
            switch failure {
            case .unknown: throw Self.refreshRefused("unknown", "the refresh token is not known; log in again")
            case .expired: throw Self.refreshRefused("expired", "the refresh token has expired; log in again")
            case .revoked: throw Self.refreshRefused("revoked", "the refresh token was revoked; log in again")
            case .reused(let sessionID, let userID, let tenantID):
                // Theft signal (or a client refreshing twice): the family is already revoked; end the session too.
                let principal = Principal(userID: userID, tenantID: tenantID)
                _ = try? await services.runtime.perform(services.admit(SessionIntent(.revoke, principal: principal, sessionID: sessionID)))
                services.sockets.close(sessionID: sessionID, reason: "session ended")
                services.logger.warning("refresh token reused; family and session revoked", metadata: ["session_id": "\(sessionID)", "user_id": "\(userID)"])
                throw Self.refreshRefused("reused", "the refresh token was already used; its session has been ended for safety; log in again")
            }
        }
    }

    static func refreshRefused(_ reason: String, _ message: String) -> GatewayError {
        var error = GatewayError(.unauthorized, "token_invalid", message)
        error.reason = "refresh_" + reason
        error.tokenPresented = true
        return error
    }

    /// Ends the session, its refresh tokens and the presented access token.
    func logout(_ request: Request) async throws -> Response {
        let caller = try await services.requireCaller(request)
        let body = try await services.body(request)
        let sessionID = try GatewayServices.checkedSessionID(try body.optionalString("session_id"))
        let principal = Principal(userID: caller.userID, tenantID: caller.tenantID)
        do {
            _ = try await services.runtime.perform(services.admit(SessionIntent(.revoke, principal: principal, sessionID: sessionID)))
            _ = try await services.state.revokeRefreshTokens(sessionID: sessionID, now: services.clock.now())
        } catch let error as GatewayError where error.code == "session_not_found" {
            // Already ended: logging out still revokes the presented token.
        }
        try await services.revocations.revoke(caller.tokenID, expiresAt: caller.expiresAt)
        services.sockets.close(sessionID: sessionID, reason: "logged out")
        services.logger.info("logout", metadata: ["user_id": "\(caller.userID)", "session_id": "\(sessionID)"])
        return Response(status: .noContent, headers: [.cacheControl: "no-store"])
    }
}
