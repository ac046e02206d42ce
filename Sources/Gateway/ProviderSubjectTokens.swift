import ProviderLogin
import RuntimeAPI
import StateSurface
import TokenExchange

/// A person's access token at the company's provider, from their newest live sign-in through it:
/// the subject a token exchange presents.
///
/// A sign-in counts while its gateway session is the person's and live (the Runtime says, or the
/// session view it keeps): a provider session left behind by a session ended otherwise is skipped.
/// The token is the one the sign-in's code or its latest refresh gave (every re-check refreshes
/// it). When every one has less than the exchange's margin left, the sessions that can be renewed
/// (a refresh token and a re-check schedule) have their re-check run now, under its claim
/// (`ProviderRecheck.renewInUse`), newest first, and the first renewed token is used.
struct ProviderSubjectTokens: SubjectTokenSource {
    let store: any ProviderSessionRepository
    let signIn: ProviderSignIn
    let recheck: ProviderRecheck?
    /// Whether the gateway session is live and the person's (session id, user id, tenant id).
    let isLive: @Sendable (String, String, String) async throws -> Bool
    let now: @Sendable () -> Double

    func subjectToken(userID: String, issuer: String, minimumLife: Double, now: Double) async throws -> SubjectToken? {
        var renewable: [ProviderSessionRecord] = []
        for session in try await store.providerSessions(userID: userID, now: now) where session.identity.issuer == issuer {
            if let found = fresh(session, minimumLife: minimumLife, now: now) {
                // Only the session about to be used is asked about: each check may be a Runtime read.
                if try await live(session) { return found }
            } else if session.identity.sealedRefreshToken != nil {
                renewable.append(session)
            }
        }
        guard let recheck else { return nil }
        var notRenewed = false
        for session in renewable where try await live(session) {
            switch try await recheck.renewInUse(sessionID: session.sessionID) {
            case .ended, .notScheduled: continue
            case .asked, .notNow:
                if let renewed = try await store.providerSession(sessionID: session.sessionID),
                    let found = fresh(renewed, minimumLife: minimumLife, now: self.now())
                {
                    return found
                }
                // Claimed elsewhere just now, or the provider down: not the person's doing.
                notRenewed = true
            }
        }
        if notRenewed { throw ExchangeError.unavailable("your sign-in's token there could not be renewed just now") }
        return nil
    }

    private func live(_ session: ProviderSessionRecord) async throws -> Bool {
        try await isLive(session.sessionID, session.userID, session.identity.tenantID)
    }

    private func fresh(_ session: ProviderSessionRecord, minimumLife: Double, now: Double) -> SubjectToken? {
        guard let (token, expiresAt) = signIn.accessToken(of: session), expiresAt.map({ $0 - now >= minimumLife }) ?? true else { return nil }
        return SubjectToken(token: token, sessionID: session.sessionID)
    }
}
