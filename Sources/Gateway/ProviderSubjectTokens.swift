import ProviderLogin
import StateSurface
import TokenExchange

/// A person's access token at the company's provider, from their newest live sign-in through it:
/// the subject a token exchange presents.
///
/// The token is the one the sign-in's code or its latest refresh gave (every re-check refreshes
/// it). One that expires within the exchange's margin has its session's re-check run now, under
/// the re-check's claim (one instance presents the refresh token), and is read again.
struct ProviderSubjectTokens: SubjectTokenSource {
    let store: any ProviderSessionRepository
    let signIn: ProviderSignIn
    let recheck: ProviderRecheck?

    func subjectToken(userID: String, issuer: String, minimumLife: Double, now: Double) async throws -> SubjectToken? {
        let sessions = try await store.providerSessions(userID: userID, now: now).filter { $0.identity.issuer == issuer }
        if let found = sessions.lazy.compactMap({ fresh($0, minimumLife: minimumLife, now: now) }).first { return found }
        // Every token is out of date: renew the newest session's through its provider.
        guard let recheck, let newest = sessions.first(where: { $0.identity.sealedRefreshToken != nil }) else { return nil }
        guard try await recheck.checkInUse(sessionID: newest.sessionID, dueBy: .infinity) == .stands,
            let renewed = try await store.providerSession(sessionID: newest.sessionID)
        else { return nil }
        return fresh(renewed, minimumLife: minimumLife, now: now)
    }

    private func fresh(_ session: ProviderSessionRecord, minimumLife: Double, now: Double) -> SubjectToken? {
        guard let (token, expiresAt) = signIn.accessToken(of: session), expiresAt.map({ $0 - now >= minimumLife }) ?? true else { return nil }
        return SubjectToken(token: token, sessionID: session.sessionID)
    }
}
