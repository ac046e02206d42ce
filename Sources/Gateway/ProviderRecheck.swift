import JOSE
import Logging
import ProviderLogin
import StateSurface

/// Keeps browser sign-ins honest with their provider: a session in use whose provider gave a
/// refresh token is re-checked with it every `gateway.browser_sessions.recheck_minutes`, as the
/// API's refreshes do for its sessions. Refused there (`invalid_grant`: the user was disabled or
/// signed out at the provider), the session ends everywhere (the next navigation is sent to sign
/// in; its sockets close with 1008).
///
/// Any instance may run a pass. Each due re-check is claimed in the store first (a compare-and-set
/// on its due time), so one instance asks the provider: a rotating refresh token is never
/// presented twice, which a provider would take as theft. A session nobody used since its last
/// re-check is not refreshed (the gateway never keeps a provider's session alive on its own); it is
/// re-checked at the first pass after it is used again.
struct ProviderRecheck: Sendable {
    let signIn: ProviderSignIn
    let store: any ProviderSessionRepository
    let ending: ProviderSessionEnd
    /// `recheck_minutes`, in seconds.
    let interval: Double
    let clock: any TokenClock
    let logger: Logger

    /// A provider that could not be asked is asked again this much later.
    static let retryAfterUnavailable: Double = 60
    /// Re-checks one pass takes on at most (the rest wait for the next pass).
    static let batch = 100

    /// One pass over the re-checks due now; returns how many sessions were ended.
    func runOnce() async throws -> Int {
        let now = clock.now()
        var ended = 0
        for (record, due) in try await store.providerRechecksDue(now: now, interval: interval, limit: Self.batch) {
            let next = now + interval
            // Another instance took it since it was listed.
            guard try await store.claimProviderRecheck(sessionID: record.sessionID, due: due, next: next) else { continue }
            do {
                if try await recheck(record, next: next, now: now) { ended += 1 }
            } catch {
                // One session's store error never stalls the others'; it is asked again soon.
                _ = try? await store.claimProviderRecheck(sessionID: record.sessionID, due: next, next: now + Self.retryAfterUnavailable)
                logger.warning("a browser session's re-check failed; will retry", metadata: ["session_id": "\(record.sessionID)", "error_type": "\(type(of: error))"])
            }
        }
        return ended
    }

    /// Asks the provider about one claimed session; `true` when it ended.
    private func recheck(_ record: ProviderSessionRecord, next: Double, now: Double) async throws -> Bool {
        switch await signIn.refresh(record) {
        case .success(let refreshed):
            // A logout that deleted the record meanwhile stays: nothing is written back.
            _ = try await store.updateProviderSession(refreshed)
            return false
        case .failure(.refused):
            try await ending.end(record, reason: "signed out at the provider")
            return true
        case .failure(.unavailable):
            // The session stands (the provider did not say no); it is asked again soon.
            _ = try await store.claimProviderRecheck(sessionID: record.sessionID, due: next, next: now + Self.retryAfterUnavailable)
            logger.notice("a browser session could not be re-checked at its provider; will retry", metadata: ["session_id": "\(record.sessionID)"])
            return false
        }
    }
}
