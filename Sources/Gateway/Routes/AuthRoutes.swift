import DataPlane
import EdgeHTTP
import Hummingbird
import JOSE
import Logging
import Observability
import ProviderLogin
import StateSurface
import TrustedIssuers
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import SocketGuard
import TrafficCop

/// `/api/auth`: login (upgrading the session in place), refresh, logout.
struct AuthRoutes: Sendable {
    let authentication: CallerAuthentication
    let admission: Admission
    let runtime: RuntimeClient
    let body: JSONBody
    let accounts: AccountService
    let refreshTokens: RefreshTokenService
    let revocations: RevocationList
    let issuer: AccessTokenIssuer
    let sockets: SocketRegistry
    let sessionOwners: SessionOwnershipView
    let metrics: GatewayMetrics
    let logger: Logger
    /// Tenant of a login that names none.
    let defaultTenant: String
    /// `client_id` of the tokens minted here.
    let clientID: String
    /// `runtime.outage_refresh_grace_seconds`: how stale the ownership view may be when a
    /// refresh is answered from it because the Runtime is down.
    let runtimeOutageRefreshGrace: Double
    /// The sessions provider sign-ins made, and the access tokens issued to them.
    let providerSessions: any ProviderSessionRepository
    /// `nil` when no provider is configured for sign-in.
    let signIn: ProviderSignIn?
    /// Where a provider's end-session page sends the browser back to (the first login return origin).
    let postLogoutRedirectURI: String

    func register(on router: Router<GatewayRequestContext>) {
        router.post("/api/auth/login") { request, context in try await login(request, context) }
        router.post("/api/auth/refresh") { request, _ in try await refresh(request) }
        router.post("/api/auth/logout") { request, _ in try await logout(request) }
    }

    /// Checks the password, then upgrades the given anonymous session (same
    /// `session_id`), reuses it if it is already the user's, or creates one.
    func login(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try admission.limit(.loginPerClient, key: admission.clientKey(request, context))
        let body = try await body.object(request)
        let username = try body.requiredString("username")
        let password = try body.requiredString("password")
        let tenantID = try body.optionalString("tenant") ?? defaultTenant
        let sessionID = try body.optionalString("session_id").map(GatewayError.checkedSessionID)
        try admission.limit(.loginPerUsername, key: tenantID + "/" + username)

        guard let user = try await accounts.authenticate(username: username, tenantID: tenantID, password: password) else {
            metrics.loginFailed()
            logger.notice("login refused", metadata: ["tenant_id": "\(JSONValue.clip(tenantID))"])
            throw GatewayError.invalidCredentials
        }
        let principal = Principal(userID: user.id, tenantID: user.tenantID)
        // The given anonymous session is upgraded in place; without one, a new owned
        // session. Both count against the contract's sessions per user in the Runtime.
        let intent = sessionID.map { SessionIntent(.upgrade, principal: principal, sessionID: $0) } ?? SessionIntent(.createOwned, principal: principal)
        let granted = try await runtime.session(admission.admit(intent))
        let grantedSessionID = granted.sessionID
        sessionOwners.remember(granted)  // so that a refresh can be answered while the Runtime is down
        let refresh = try await refreshTokens.issue(sessionID: grantedSessionID, userID: user.id, tenantID: user.tenantID)
        logger.info("login", metadata: ["user_id": "\(user.id)", "tenant_id": "\(user.tenantID)", "session_id": "\(grantedSessionID)"])
        return try await tokenResponse(
            principal: principal, sessionID: grantedSessionID, refreshToken: refresh.token, username: user.username, groups: user.groups)
    }

    /// `{access_token, token_type, expires_in, refresh_token, session_id}`, never cached.
    ///
    /// - Parameter external: for a session a provider sign-in made, the provider's user: the
    ///   token carries `idp_iss` and `idp_sub`, and its id is kept with the session so that a
    ///   back-channel logout can revoke it.
    func tokenResponse(
        principal: Principal, sessionID: String, refreshToken: String, external: ExternalIdentity? = nil, username: String? = nil,
        groups: [String] = []
    ) async throws -> Response {
        let access: IssuedAccessToken
        do {
            var claims: JSONObject = external.map { ["idp_iss": .string($0.issuer), "idp_sub": .string($0.subject)] } ?? [:]
            // The account's name, for a route's `identity_headers.username` (a token says who its user is called).
            if let username { claims["preferred_username"] = .string(username) }
            // An account's groups (`users groups`), read at each login and refresh, as a provider's sign-in carries its own.
            if !groups.isEmpty { claims["groups"] = .array(groups.map(JSONValue.string)) }
            access = try issuer.issue(subject: principal.userID, tenantID: principal.tenantID, clientID: clientID, additionalClaims: claims)
        } catch {
            throw GatewayError.noSigningKey
        }
        if external != nil {
            try await providerSessions.recordSessionAccessToken(sessionID: sessionID, tokenID: access.tokenID, expiresAt: access.expiresAt)
            // Recorded after a logout took the session's tokens (a race): the logout could not revoke
            // this one, so it is revoked here and never handed out.
            guard try await providerSessions.providerSession(sessionID: sessionID) != nil else {
                try await revocations.revoke(access.tokenID, expiresAt: access.expiresAt)
                throw Self.refreshRefused("session_ended", "the session of this refresh token has ended; log in again")
            }
        }
        return JSONBody.response(
            [
                "access_token": .string(access.token), "token_type": "Bearer", "expires_in": .number(issuer.lifetime),
                "refresh_token": .string(refreshToken), "session_id": .string(sessionID),
            ], noStore: true)
    }

    /// Rotates the refresh token; a spent one revokes its family and its session.
    func refresh(_ request: Request) async throws -> Response {
        let body = try await body.object(request)
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
            let presented = try await refreshTokens.peek(token)
            // A provider's user has no account here: the provider sign-in behind the session stands in for it.
            var providerSession: ProviderSessionRecord? = nil
            var username: String? = nil
            var groups: [String] = []
            if presented.userID.hasPrefix("ext_") {
                providerSession = try await providerSessions.providerSession(sessionID: presented.sessionID)
                guard providerSession?.userID == presented.userID else {
                    try await refreshTokens.revoke(sessionID: presented.sessionID)
                    throw Self.refreshRefused("session_ended", "the session of this refresh token has ended; log in again")
                }
            } else {
                // A disabled account refreshes nothing (its families were revoked too; this holds even if a write was lost).
                guard let account = try await accounts.activeUser(userID: presented.userID, tenantID: presented.tenantID) else {
                    throw RefreshFailure.revoked
                }
                username = account.username
                groups = account.groups
            }
            let principal = Principal(userID: presented.userID, tenantID: presented.tenantID)
            // Admitted before the call, so that only the Runtime's absence (below) can stand in for it.
            let read = try admission.admit(SessionIntent(.read, principal: principal, sessionID: presented.sessionID))
            do {
                sessionOwners.remember(try await runtime.session(read))
            } catch let refusal as RuntimeRefusal where refusal.code == .sessionNotFound || refusal.code == .sessionForbidden {
                try await refreshTokens.revoke(sessionID: presented.sessionID)
                throw Self.refreshRefused("session_ended", "the session of this refresh token has ended; log in again")
            } catch where runtime.circuit.isOpen {
                // The Runtime is down: nobody can end a session through it, so the session as this
                // gateway last saw it (live, owned by this user, not expired, checked within the grace)
                // stands in for the read. A session the view does not know keeps the outage's 503.
                guard runtimeOutageRefreshGrace > 0,
                    let owned = sessionOwners.lastKnownOwnership(
                        presented.sessionID, by: presented.userID, tenantID: presented.tenantID, within: runtimeOutageRefreshGrace)
                else { throw error }
                guard owned else { throw Self.refreshRefused("session_ended", "the session of this refresh token has ended; log in again") }
                metrics.refreshedDuringRuntimeOutage()
                logger.notice("refresh answered from the last known session: the Runtime is down", metadata: ["session_id": "\(presented.sessionID)"])
            }
            var external: ExternalIdentity? = nil
            if let providerSession {
                try await refreshThroughProvider(providerSession)
                external = ExternalIdentity(issuer: providerSession.identity.issuer, subject: providerSession.identity.subject, tenantID: presented.tenantID)
            }
            let next = try await refreshTokens.rotate(token)
            return try await tokenResponse(
                principal: principal, sessionID: next.record.sessionID, refreshToken: next.token, external: external, username: username,
                groups: groups)
        } catch let failure as RefreshFailure {
            switch failure {
            case .unknown: throw Self.refreshRefused("unknown", "the refresh token is not known; log in again")
            case .expired: throw Self.refreshRefused("expired", "the refresh token has expired; log in again")
            case .revoked: throw Self.refreshRefused("revoked", "the refresh token was revoked; log in again")
            case .reused(let sessionID, let userID, let tenantID):
                // Theft signal (or a client refreshing twice): the family is already revoked; end the session too.
                let principal = Principal(userID: userID, tenantID: tenantID)
                _ = try? await runtime.session(admission.admit(SessionIntent(.revoke, principal: principal, sessionID: sessionID)))
                sessionEnded(sessionID, reason: "session ended")
                logger.warning("refresh token reused; family and session revoked", metadata: ["session_id": "\(sessionID)", "user_id": "\(userID)"])
                throw Self.refreshRefused("reused", "the refresh token was already used; its session has been ended for safety; log in again")
            }
        }
    }

    /// Asks the provider too, with the session's provider refresh token (when it gave one): a
    /// user the provider refuses (`invalid_grant`) is signed out here, sockets and all; a provider
    /// that cannot be asked is a 503, and the gateway's refresh token is not spent.
    ///
    /// The session's record is kept as long as the refresh token issued now lives: each
    /// rotation starts a new lifetime, so the record's moves with it.
    func refreshThroughProvider(_ session: ProviderSessionRecord) async throws {
        var next = session
        if let signIn, session.identity.sealedRefreshToken != nil {
            switch await signIn.refresh(session) {
            case .success(let refreshed): next = refreshed
            case .failure(.refused):
                try await providerEnding.end(session, reason: "signed out at the provider")
                throw Self.refreshRefused("provider_refused", "the identity provider no longer accepts this sign-in; sign in again")
            case .failure(.unavailable):
                var error = GatewayError(.serviceUnavailable, "issuer_unavailable", "the identity provider cannot confirm the sign-in right now; try again shortly")
                error.retryAfter = 5
                throw error
            }
        }
        next.expiresAt = issuer.clock.now() + refreshTokens.lifetime
        // Never brings back a session a logout deleted while the provider was being asked.
        guard try await providerSessions.updateProviderSession(next) else {
            try await refreshTokens.revoke(sessionID: session.sessionID)
            throw Self.refreshRefused("session_ended", "the session of this refresh token has ended; log in again")
        }
    }

    var providerEnding: ProviderSessionEnd {
        ProviderSessionEnd(
            admission: admission, runtime: runtime, refreshTokens: refreshTokens, revocations: revocations, store: providerSessions, sockets: sockets,
            sessionOwners: sessionOwners, clock: issuer.clock, logger: logger)
    }

    /// A session this gateway ended: the ownership view forgets it and its sockets close (1008, `reason`).
    func sessionEnded(_ sessionID: String, reason: String) {
        sessionOwners.forget([sessionID])
        sockets.close(sessionID: sessionID, reason: reason)
    }

    static func refreshRefused(_ reason: String, _ message: String) -> GatewayError {
        var error = GatewayError(.unauthorized, "token_invalid", message)
        error.reason = "refresh_" + reason
        error.tokenPresented = true
        return error
    }

    /// Ends the session, its refresh tokens and the presented access token.
    func logout(_ request: Request) async throws -> Response {
        let caller = try await authentication.requireCaller(request)
        let body = try await body.object(request)
        let sessionID = try GatewayError.checkedSessionID(try body.optionalString("session_id"))
        let principal = Principal(userID: caller.userID, tenantID: caller.tenantID)
        do {
            _ = try await runtime.session(admission.admit(SessionIntent(.revoke, principal: principal, sessionID: sessionID)))
            try await refreshTokens.revoke(sessionID: sessionID)
        } catch let refusal as RuntimeRefusal where refusal.code == .sessionNotFound {
            // Already ended: logging out still revokes the presented token.
        }
        try await revocations.revoke(caller.tokenID, expiresAt: caller.expiresAt)
        sessionEnded(sessionID, reason: "logged out")
        logger.info("logout", metadata: ["user_id": "\(caller.userID)", "session_id": "\(sessionID)"])
        // A provider's sign-in: its other access tokens go too, and the browser may end the provider's session.
        if caller.userID.hasPrefix("ext_"), let session = try await providerSessions.providerSession(sessionID: sessionID), session.userID == caller.userID {
            let endSession = signIn?.endSessionURL(session, postLogoutRedirectURI: postLogoutRedirectURI)
            try await providerEnding.end(session, reason: "logged out")
            if let endSession { return JSONBody.response(["end_session_url": .string(endSession)], noStore: true) }
        }
        return Response(status: .noContent, headers: [.cacheControl: "no-store"])
    }
}
