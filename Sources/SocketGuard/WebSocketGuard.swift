import AgentLink
import DataPlane
import EdgeHTTP
import Foundation
import JOSE
import Observability
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import TrafficCop

/// A socket the guard checked: who, which session, and the Traffic Cop's admission.
public struct CheckedSocket: Sendable {
    public let caller: AuthenticatedCaller
    public let sessionID: String
    let admitted: AdmittedSessionIntent
}

/// A socket the guard admitted and registered (its slot in the session's limit is held).
///
/// Only the guard makes one, from the Traffic Cop's `.openSocket` admission;
/// a stream to the Runtime is opened for nothing else.
public struct AdmittedSocket: Sendable {
    public let caller: AuthenticatedCaller
    public let sessionID: String
    package let registration: SocketRegistration
    /// The Traffic Cop's admission of this socket.
    let admission: AdmittedSessionIntent

    /// Who the Runtime acts for on this socket's stream: the admitted session and principal.
    var streamIdentity: AgentStreamIdentity {
        AgentStreamIdentity(
            sessionID: admission.intent.sessionID ?? sessionID, userID: admission.intent.principal?.userID ?? caller.userID,
            tenantID: admission.intent.principal?.tenantID ?? caller.tenantID)
    }
}

/// Every check of DESIGN.md "WebSocket: /api/runtime/agent", in its order,
/// before any 101:
///
/// 1. token present and valid (401 `token_missing` / `token_invalid` / `token_revoked`);
/// 2. session_id present and well formed (400 `session_missing` / `session_malformed`);
/// 3. session exists and is live in the Runtime (404 `session_not_found`);
/// 4. session authenticated (403 `session_anonymous`) and owned by the token's
///    user and tenant (403 `session_forbidden`);
/// 5. Origin allowed when `allowed_origins` is set (403 `origin_forbidden`), and
///    the session's socket limit not reached (429 `rate_limited`): the count
///    and the registration are one step, so racing upgrades cannot exceed it.
public struct WebSocketGuard: Sendable {
    public static let path = "/api/runtime/agent"

    let authenticator: AccessTokenAuthenticator
    let runtime: RuntimeClient
    /// Owned sessions as the Runtime last said (kept fresh by `AccessChangeWatcher`).
    let sessions: SessionOwnershipView
    let admission: Admission
    package let registry: SocketRegistry
    /// `gateway.allowed_origins` as in force now (a reload may change them); empty: any origin.
    let allowedOrigins: @Sendable () -> Set<String>
    /// `gateway.query_credentials`: whether `access_token` in the socket URL is accepted (old clients).
    let acceptsQueryCredentials: Bool
    let metrics: GatewayMetrics

    package init(
        authenticator: AccessTokenAuthenticator, runtime: RuntimeClient, sessions: SessionOwnershipView, admission: Admission, registry: SocketRegistry,
        allowedOrigins: @escaping @Sendable () -> Set<String>, acceptsQueryCredentials: Bool, metrics: GatewayMetrics
    ) {
        self.authenticator = authenticator
        self.runtime = runtime
        self.sessions = sessions
        self.admission = admission
        self.registry = registry
        self.allowedOrigins = allowedOrigins
        self.acceptsQueryCredentials = acceptsQueryCredentials
        self.metrics = metrics
    }

    /// Checks an upgrade and registers the socket, or says why not, as the HTTP error to answer with.
    public func admitUpgrade(_ request: UpgradeRequest) async -> Result<AdmittedSocket, GatewayError> {
        await refusingAsHTTP { try register(try await check(request)) }
    }

    /// Registers a checked socket: its slot in the session's limit is taken in the same step as the count.
    private func register(_ checked: CheckedSocket) throws -> AdmittedSocket {
        let limit = checked.admitted.maximumSockets ?? Int.max
        guard
            let registration = registry.register(
                sessionID: checked.sessionID, userID: checked.caller.userID, tenantID: checked.caller.tenantID, limit: limit)
        else { throw GatewayError(admission.validator.socketLimitReached()) }
        return AdmittedSocket(caller: checked.caller, sessionID: checked.sessionID, registration: registration, admission: checked.admitted)
    }

    /// The same checks and registration without suspending, answered from the
    /// verified-token cache, the revocation mirror and the session view; `nil`
    /// when one of them cannot answer (then `admitUpgrade` asks the store and the Runtime).
    ///
    /// An upgrade of a session this gateway has seen recently is admitted on
    /// its event loop with no call to the Runtime; the view forgets a session
    /// within a second of its logout or revocation, and the registry closes the
    /// sockets already open.
    public func admitUpgradeWithoutSuspending(_ request: UpgradeRequest) -> Result<AdmittedSocket, GatewayError>? {
        do {
            guard let caller = try authenticator.authenticateInMemory(try request.token(acceptingQuery: acceptsQueryCredentials)) else { return nil }
            let sessionID = try GatewayError.checkedSessionID(request.sessionID)
            guard let owned = sessions.isOwned(sessionID, by: caller.userID, tenantID: caller.tenantID) else { return nil }
            guard owned else { throw Self.forbidden }
            return .success(try register(try admitted(caller: caller, sessionID: sessionID, request: request)))
        } catch {
            return .failure(refusal(error))
        }
    }

    /// The same checks without registering (a plain GET on the socket path asks
    /// "would this upgrade be admitted?"); the socket count is read, not held.
    public func preview(_ request: UpgradeRequest) async -> Result<CheckedSocket, GatewayError> {
        await refusingAsHTTP {
            let checked = try await check(request)
            if let limit = checked.admitted.maximumSockets, registry.count(sessionID: checked.sessionID) >= limit {
                throw GatewayError(admission.validator.socketLimitReached())
            }
            return checked
        }
    }

    private func refusingAsHTTP<T>(_ body: () async throws -> T) async -> Result<T, GatewayError> {
        do {
            return .success(try await body())
        } catch {
            return .failure(refusal(error))
        }
    }

    private func refusal(_ error: any Error) -> GatewayError {
        let refusal = GatewayError(answering: error)
        metrics.upgradeRefused(reason: refusal.reason ?? refusal.code)
        return refusal
    }

    static let forbidden = GatewayError(.forbidden, "session_forbidden", "the session belongs to another user or tenant")

    func check(_ request: UpgradeRequest) async throws -> CheckedSocket {
        // 1. The token: Authorization header, the bearer subprotocol (browsers), or access_token in the query (old clients).
        let token: String?
        do {
            token = try request.token(acceptingQuery: acceptsQueryCredentials)
        } catch let error as AuthenticationFailure {
            throw GatewayError(error)
        }
        let caller: AuthenticatedCaller
        do {
            caller = try await authenticator.authenticate(token)
        } catch let failure as AuthenticationFailure {
            throw GatewayError(failure)
        }
        // 2. The session id: X-Session-Id, the session subprotocol, or session_id in the query.
        let sessionID = try GatewayError.checkedSessionID(request.sessionID)
        // 3 and 4. The Runtime says whether it is live, and refuses another user's or tenant's.
        let principal = Principal(userID: caller.userID, tenantID: caller.tenantID)
        let session = try await runtime.session(admission.admit(SessionIntent(.read, principal: principal, sessionID: sessionID)))
        sessions.remember(session)
        guard session.state == .authenticated else {
            throw GatewayError(.forbidden, "session_anonymous", "the session is anonymous; log in with it first, then open the socket")
        }
        guard session.isOwned(by: caller.userID, tenantID: caller.tenantID) else { throw Self.forbidden }
        return try admitted(caller: caller, sessionID: sessionID, request: request)
    }

    /// 5. Origin, then the Traffic Cop's admission (the contract's sockets per session are enforced when registering).
    private func admitted(caller: AuthenticatedCaller, sessionID: String, request: UpgradeRequest) throws -> CheckedSocket {
        if let origin = request.headers["origin"], case let allowed = allowedOrigins(), !allowed.isEmpty, !allowed.contains(origin) {
            throw GatewayError(.forbidden, "origin_forbidden", "this origin may not open sockets here; it is not in gateway.allowed_origins")
        }
        let principal = Principal(userID: caller.userID, tenantID: caller.tenantID)
        let admitted = try admission.admit(SessionIntent(.openSocket, principal: principal, sessionID: sessionID))
        return CheckedSocket(caller: caller, sessionID: sessionID, admitted: admitted)
    }
}
