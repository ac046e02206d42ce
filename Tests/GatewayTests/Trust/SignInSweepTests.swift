import Foundation
import Gateway
import Runtime
import StateSurface
import Testing

/// What a sign-in leaves in the store expires, and the gateway's own background sweep removes it:
/// nothing of a provider's (a sealed refresh token above all) outlives its documented lifetime.
@Suite("Sign-in records: swept by the gateway once expired")
struct SignInSweepTests {
    @Test("the gateway's sweep of expired provider sign-ins deletes expired login codes, provider sessions with their sealed tokens, session access-token ids and logout-token ids, and keeps live ones")
    func gatewaySweepsExpiredSignIns() async throws {
        let fixture = try await GatewayFixture()
        let state = fixture.state
        let now = fixture.server.clock.now()
        let identity = ProviderIdentityRecord(
            provider: "acme", issuer: "https://idp.example.com", subject: "user-1", tenantID: "acme", providerSessionID: "sid-1",
            sealedIDToken: "sealed-id-token", sealedRefreshToken: "sealed-refresh-token")
        try await state.saveProviderSession(ProviderSessionRecord(sessionID: "ses_expired", userID: "ext_a", identity: identity, createdAt: now - 100, expiresAt: now - 1))
        try await state.saveProviderSession(ProviderSessionRecord(sessionID: "ses_live", userID: "ext_a", identity: identity, createdAt: now, expiresAt: now + 3_600))
        try await state.insertLoginCode(LoginCodeRecord(codeHash: "code-expired", sessionID: "ses_live", loginChallenge: "c", provider: identity, createdAt: now - 120, expiresAt: now - 60))
        try await state.recordSessionAccessToken(sessionID: "ses_live", tokenID: "jti-expired", expiresAt: now - 1)
        try await state.recordSessionAccessToken(sessionID: "ses_live", tokenID: "jti-live", expiresAt: now + 900)
        #expect(try await state.rememberLogoutToken(id: "lt-expired", expiresAt: now - 1, now: now - 10))

        let sweepers = try fixture.server.makeServices().compactMap { $0 as? Sweeper }
        let signIns = try #require(sweepers.first { $0.what == "expired provider sign-ins" }, "the gateway runs a sweep of provider sign-ins")
        // The expired session, code, access-token id and logout-token id: four rows.
        #expect(try await signIns.sweepOnce() == 4)
        #expect(try await state.providerSession(sessionID: "ses_expired") == nil, "the expired session's sealed refresh token is gone")
        #expect(try await state.providerSession(sessionID: "ses_live")?.identity.sealedRefreshToken == "sealed-refresh-token")
        #expect(try await state.sessionAccessTokens(sessionID: "ses_live", now: now - 10).map(\.tokenID) == ["jti-live"])
        #expect(try await state.rememberLogoutToken(id: "lt-expired", expiresAt: now + 60, now: now - 10), "a swept logout-token id is new again")
        #expect(try await signIns.sweepOnce() == 0)
        try await fixture.stop()
    }
}
