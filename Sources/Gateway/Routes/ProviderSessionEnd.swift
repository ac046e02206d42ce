import JOSE
import Logging
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import SocketGuard
import StateSurface
import TrafficCop

/// Ends a gateway session a provider sign-in made, everywhere: the session in the Runtime
/// (whose ending the access-change feed carries to every instance, where its sockets close
/// with 1008), its refresh tokens, the access tokens issued to it, and the provider's tokens.
struct ProviderSessionEnd: Sendable {
    let admission: Admission
    let runtime: RuntimeClient
    let refreshTokens: RefreshTokenService
    let revocations: RevocationList
    let store: any ProviderSessionRepository
    let sockets: SocketRegistry
    let sessionOwners: SessionOwnershipView
    let clock: any TokenClock
    let logger: Logger

    /// Ends `session`; `reason` is the sockets' close reason.
    func end(_ session: ProviderSessionRecord, reason: String) async throws {
        let principal = Principal(userID: session.userID, tenantID: session.identity.tenantID)
        do {
            _ = try await runtime.session(admission.admit(SessionIntent(.revoke, principal: principal, sessionID: session.sessionID)))
        } catch let refusal as RuntimeRefusal where refusal.code == .sessionNotFound || refusal.code == .sessionForbidden {
            // Ended already (or never upgraded): the credentials below still go.
        }
        try await refreshTokens.revoke(sessionID: session.sessionID)
        let listed = try await store.sessionAccessTokens(sessionID: session.sessionID, now: clock.now())
        for token in listed {
            try await revocations.revoke(token.tokenID, expiresAt: token.expiresAt)
        }
        // The record goes with the access-token ids recorded meanwhile (a refresh racing this end):
        // those are revoked too; one recorded later finds no session, and its refresh revokes it.
        let revoked = Set(listed.map(\.tokenID))
        let now = clock.now()
        for token in try await store.deleteProviderSession(sessionID: session.sessionID) where !revoked.contains(token.tokenID) && token.expiresAt > now {
            try await revocations.revoke(token.tokenID, expiresAt: token.expiresAt)
        }
        sessionOwners.forget([session.sessionID])
        sockets.close(sessionID: session.sessionID, reason: reason)
        logger.info("provider session ended", metadata: ["session_id": "\(session.sessionID)", "provider": "\(session.identity.provider)", "why": "\(reason)"])
    }
}
