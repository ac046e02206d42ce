import JOSE
import Logging
import Observability
import ProviderLogin
import StateSurface

/// Keeps provider sign-ins honest with their provider: a session in use whose provider gave a
/// refresh token is re-checked with it every `gateway.browser_sessions.recheck_minutes`. Refused
/// there (any 4xx but 429, or an ID token for another user: the user was disabled, deleted or
/// signed out at the provider), the session ends everywhere, with everything that hangs on it:
/// its navigations are sent to sign in, its sockets close with 1008, its agents' access and
/// refresh tokens are revoked (their grants stay: a new sign-in asks no consent again).
///
/// Use is a browser's navigation (the periodic pass), and an agent's: a refresh at the
/// authorization server's token endpoint or an authorization that reuses the session re-checks
/// it before the answer when it is due (`checkInUse`), and marks the session used, so that a
/// session only agents use is re-checked on time by the pass too.
///
/// Any instance may run a re-check. Each due one is claimed in the store first (a compare-and-set
/// on its due time), so one instance asks the provider: a rotating refresh token is never
/// presented twice, which a provider would take as theft. A session nobody used since its last
/// re-check is not refreshed (the gateway never keeps a provider's session alive on its own).
///
/// A provider that cannot be asked (unreachable, a 5xx, 429, too slow) is asked again with
/// backoff (after 1, 1, 2, 4, 8 then every 15 minutes); a session it has not answered for
/// `recheck_unavailable_limit_minutes` ends as if refused.
struct ProviderRecheck: Sendable {
    let signIn: ProviderSignIn
    let store: any ProviderSessionRepository
    let ending: ProviderSessionEnd
    /// `recheck_minutes`, in seconds.
    let interval: Double
    /// `recheck_unavailable_limit_minutes`, in seconds.
    let unavailableLimit: Double
    let metrics: GatewayMetrics
    /// What the admin `/readyz` shows of the last re-check of each provider.
    let status: ProviderRecheckStatus
    let clock: any TokenClock
    let logger: Logger

    /// Re-checks one pass takes on at most (the rest wait for the next pass).
    static let batch = 100

    /// When a provider that could not be asked for `failingFor` seconds is asked again: after as
    /// long again, at least a minute and at most 15 (1, 2, 4, 8, 15, 15... minutes).
    static func retryDelay(failingFor: Double) -> Double {
        min(max(60, failingFor), 900)
    }

    /// One pass over the re-checks due now; returns how many sessions were ended.
    func runOnce() async throws -> Int {
        let now = clock.now()
        var ended = 0
        for (record, due) in try await store.providerRechecksDue(now: now, interval: interval, limit: Self.batch) {
            if try await claimAndRecheck(record, due: due, now: now) == .ended { ended += 1 }
        }
        return ended
    }

    /// What one re-check came to.
    enum Outcome: Equatable {
        /// The provider said yes, or could not be asked within the limit; or another instance has it.
        case stands
        case ended
    }

    /// An agent's use of a session (its refresh, or an authorization reusing the session): marks
    /// the session used and, when its re-check is due, runs it before the answer. `.ended` when the
    /// provider refused (the caller refuses the agent too).
    func checkInUse(sessionID: String) async throws -> Outcome {
        let now = clock.now()
        guard let (record, due) = try await store.useProviderSession(sessionID: sessionID, at: now) else { return .stands }
        return try await claimAndRecheck(record, due: due, now: now)
    }

    /// What an early renewal came to.
    enum Renewal: Equatable {
        /// The provider was asked (it said yes, or could not answer); or another instance took the claim.
        case asked
        /// The provider refused: the session ended.
        case ended
        /// The session is never re-checked (no refresh token, or an API sign-in, which refreshes itself).
        case notScheduled
        /// A re-check was claimed within the last minute, or the provider's last re-check here failed (its backoff stands).
        case notNow
    }

    /// An agent's use that needs the session's provider access token renewed now (a token
    /// exchange whose subject expires before the next re-check): the re-check runs early, under
    /// the same claim, unless one was claimed in the last minute (by this instance or another, for
    /// this exchange or any other). So a rotating refresh token is never presented twice: the
    /// claim that ran within the minute has written its rotated token by then (10 s at most). A
    /// provider whose last re-check on this instance could not be asked keeps its backoff.
    func renewInUse(sessionID: String) async throws -> Renewal {
        let now = clock.now()
        guard let (record, due) = try await store.useProviderSession(sessionID: sessionID, at: now, dueBy: .infinity) else { return .notScheduled }
        let failing = status.byProvider[record.identity.provider].map { $0.failingSince != nil } ?? false
        guard due <= (failing ? now : now + max(0, interval - 60)) else { return .notNow }
        return try await claimAndRecheck(record, due: due, now: now) == .ended ? .ended : .asked
    }

    private func claimAndRecheck(_ record: ProviderSessionRecord, due: Double, now: Double) async throws -> Outcome {
        // From the claim's own time, not the pass's start: a pass of slow re-checks claims its last
        // ones minutes later, and an early renewal (`renewInUse`) must see each claim as recent.
        let next = clock.now() + interval
        // Another instance took it since it was listed: it asks the provider, and ends the session everywhere if refused.
        guard try await store.claimProviderRecheck(sessionID: record.sessionID, due: due, next: next) else { return .stands }
        do {
            return try await recheck(record, next: next, now: now)
        } catch {
            // One session's store error never stalls the others'; it is asked again soon.
            _ = try? await store.claimProviderRecheck(sessionID: record.sessionID, due: next, next: now + 60)
            logger.warning("a provider session's re-check failed; will retry", metadata: ["session_id": "\(record.sessionID)", "error_type": "\(type(of: error))"])
            return .stands
        }
    }

    /// Asks the provider about one claimed session.
    private func recheck(_ record: ProviderSessionRecord, next: Double, now: Double) async throws -> Outcome {
        switch await signIn.refresh(record) {
        case .success(let refreshed):
            noteOutcome(record, "accepted", now: now)
            // A logout that deleted the record meanwhile stays: nothing is written back.
            _ = try await store.updateProviderSession(refreshed)
            return .stands
        case .failure(.refused):
            noteOutcome(record, "refused", now: now)
            await endEverywhere(record, reason: "signed out at the provider", next: next, now: now)
            return .ended
        case .failure(.unavailable):
            guard let since = try await store.noteProviderRecheckFailing(sessionID: record.sessionID, now: now, restartAfter: Self.streakGap)
            else { return .ended }
            let failingFor = now - since
            if failingFor >= unavailableLimit {
                noteOutcome(record, "gave_up", now: now, failingSince: since)
                logger.warning(
                    "a provider session ends: its provider has not confirmed it for recheck_unavailable_limit_minutes",
                    metadata: [
                        "session_id": "\(record.sessionID)", "user_id": "\(record.userID)", "provider": "\(record.identity.provider)",
                        "failing_seconds": "\(Int(failingFor))",
                    ])
                await endEverywhere(record, reason: "the identity provider could not confirm the sign-in", next: next, now: now)
                return .ended
            }
            noteOutcome(record, "unavailable", now: now, failingSince: since)
            // The session stands (the provider did not say no); it is asked again after a backoff.
            let retry = now + Self.retryDelay(failingFor: failingFor)
            _ = try await store.claimProviderRecheck(sessionID: record.sessionID, due: next, next: retry)
            logger.notice(
                "a provider session could not be re-checked at its provider; will retry",
                metadata: [
                    "session_id": "\(record.sessionID)", "provider": "\(record.identity.provider)", "failing_seconds": "\(Int(failingFor))",
                    "retry_in_seconds": "\(Int(retry - now))", "ends_in_seconds": "\(Int(unavailableLimit - failingFor))",
                ])
            return .stands
        }
    }

    /// A failing provider is asked at least every 15 minutes while the session is in use: a
    /// longer gap since its last failure means nobody used the session meanwhile, and a failure
    /// now starts a new streak rather than ending the session on one blip.
    static let streakGap: Double = 1_800

    /// Ends a session the provider refused. If it cannot be ended now (the Runtime or the store
    /// is down), the answer is still "ended" (the agent is refused) and the re-check comes back
    /// in a minute, when the provider refuses again and the end is tried again.
    private func endEverywhere(_ record: ProviderSessionRecord, reason: String, next: Double, now: Double) async {
        do {
            try await ending.end(record, reason: reason)
        } catch {
            logger.warning(
                "a provider session the provider refused could not be ended everywhere yet; will retry",
                metadata: ["session_id": "\(record.sessionID)", "error_type": "\(type(of: error))"])
            _ = try? await store.claimProviderRecheck(sessionID: record.sessionID, due: next, next: now + 60)
        }
    }

    private func noteOutcome(_ record: ProviderSessionRecord, _ outcome: String, now: Double, failingSince: Double? = nil) {
        metrics.providerRecheck(provider: record.identity.provider, outcome: outcome)
        status.record(provider: record.identity.provider, outcome: outcome, at: now, failingSince: failingSince)
    }
}
