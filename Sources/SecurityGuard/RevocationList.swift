import JOSE
import StateSurface
import Synchronization

/// An in-memory mirror of what ends access tokens before their `exp`: revoked
/// token ids (logout) and account not-befores (a disabled account), kept in
/// step with the store.
///
/// A read of the store on every authenticated request costs more than the
/// rest of the token check; this mirror answers from memory. Revocations made
/// by this gateway (logout) enter it at once; those made elsewhere (another
/// gateway, `portcullis users disable` in another process) arrive with the
/// next `sync()`, run twice a second. If the mirror has not synced for
/// `maximumStaleness` seconds (the store is failing), every check goes to the
/// store, so a store failure becomes a 503 rather than a stale "not revoked".
///
/// One exception, bounded: while the store is known unreachable (its circuit
/// is open, `storeIsDown`), nobody can record a revocation in it through this
/// gateway, and every other instance on the same database is as cut off as
/// this one unless the network is split. The mirror then keeps answering for
/// up to `outageGrace` seconds after its last sync (`tokens.revocation_outage_grace_seconds`),
/// so requests that need nothing else from the store (a proxied request with a
/// verified token) keep being served through an outage. 0 turns it off.
public final class RevocationList: Sendable {
    public typealias Store = CredentialRepository & UserRepository & ProviderUserRepository

    struct State {
        var ids: [String: Double] = [:]
        var highWater: Double = 0
        /// Not-before by account.
        var cutoffs: [AccountKey: Double] = [:]
        /// Provider users (`ext_...`) disabled or deleted by the operator: every token of theirs is
        /// refused, whatever its age (their provider may go on issuing them tokens).
        var refusedUsers: Set<String> = []
        var cutoffHighWater: Double = 0
        var lastSync: Double = -.infinity
    }

    package let store: any Store
    let clock: any TokenClock
    let maximumStaleness: Double
    /// How long after its last sync the mirror still answers while `storeIsDown`.
    let outageGrace: Double
    /// Whether the store is known unreachable now (its circuit is open).
    let storeIsDown: @Sendable () -> Bool
    private let state = Mutex(State())

    public init(
        store: any Store, clock: any TokenClock = SystemClock(), maximumStaleness: Double = 5, outageGrace: Double = 0,
        storeIsDown: @escaping @Sendable () -> Bool = { false }
    ) {
        self.store = store
        self.clock = clock
        self.maximumStaleness = maximumStaleness
        self.outageGrace = outageGrace
        self.storeIsDown = storeIsDown
    }

    /// An account, as the mirror keys it (no string is built per check).
    struct AccountKey: Hashable {
        let userID: String
        let tenantID: String
    }

    static func accountKey(userID: String, tenantID: String) -> AccountKey { AccountKey(userID: userID, tenantID: tenantID) }

    /// True when the token was issued at or before its account's not-before
    /// second. `iat` has whole seconds, so a token issued in the same second as
    /// a disable is refused too.
    static func isCutOff(issuedAt: Double, notBefore: Double?) -> Bool {
        guard let notBefore, notBefore > 0 else { return false }
        return issuedAt < notBefore.rounded(.down) + 1
    }

    /// The mirror's answer without waiting: `nil` when it is stale and only the store may answer.
    public func isRevokedInMemory(_ caller: AuthenticatedCaller) -> Bool? {
        let now = clock.now()
        let key = Self.accountKey(userID: caller.userID, tenantID: caller.tenantID)
        let storeIsDown = self.storeIsDown
        return state.withLock { state -> Bool? in
            let age = now - state.lastSync
            guard age <= maximumStaleness || (age <= outageGrace && storeIsDown()) else { return nil }
            return state.ids[caller.tokenID] != nil || Self.isCutOff(issuedAt: caller.issuedAt, notBefore: state.cutoffs[key])
                || (!state.refusedUsers.isEmpty && state.refusedUsers.contains(caller.userID))
        }
    }

    /// Whether the caller's token was revoked or its account cut off.
    public func isRevoked(_ caller: AuthenticatedCaller) async throws -> Bool {
        if let answer = isRevokedInMemory(caller) { return answer }
        if try await store.isTokenIDRevoked(caller.tokenID) { return true }
        // A provider's user (`ext_...`) is cut off in provider_users, an account in users.
        let notBefore =
            caller.userID.hasPrefix("ext_")
            // Their id is their issuer's and subject's alone: disabled, they are refused in every tenant their tokens may name.
            ? try await store.providerUser(id: caller.userID).map { $0.disabled ? .infinity : $0.tokensNotBefore }
            : try await store.user(id: caller.userID, tenantID: caller.tenantID)?.tokensNotBefore
        return Self.isCutOff(issuedAt: caller.issuedAt, notBefore: notBefore)
    }

    /// Records a revocation in the store and in the mirror.
    public func revoke(_ jti: String, expiresAt: Double) async throws {
        try await store.revokeTokenID(jti, expiresAt: expiresAt, now: clock.now())
        state.withLock { $0.ids[jti] = expiresAt }
    }

    /// Pulls revocations and account not-befores recorded since the last sync
    /// (with a margin for clock skew between writers), forgets ids whose tokens
    /// have expired, and returns the accounts whose not-before is new or moved:
    /// their live sockets must close.
    @discardableResult
    public func sync() async throws -> [AccountCutoff] {
        let now = clock.now()
        let (since, cutoffsSince) = state.withLock { ($0.highWater - 10, $0.cutoffHighWater - 10) }
        let rows = try await store.revokedTokenIDs(revokedSince: since, now: now)
        let cutoffs = try await store.accountCutoffs(since: cutoffsSince)
        return state.withLock { state in
            for row in rows {
                state.ids[row.jti] = row.expiresAt
                state.highWater = max(state.highWater, row.revokedAt)
            }
            state.ids = state.ids.filter { $0.value > now }
            var changed: [AccountCutoff] = []
            for cutoff in cutoffs {
                let key = Self.accountKey(userID: cutoff.userID, tenantID: cutoff.tenantID)
                Self.noteRefusal(cutoff, in: &state)
                if state.cutoffs[key] != cutoff.notBefore {
                    state.cutoffs[key] = cutoff.notBefore
                    changed.append(cutoff)
                }
                state.cutoffHighWater = max(state.cutoffHighWater, cutoff.notBefore)
            }
            state.lastSync = now
            return changed
        }
    }

    /// Takes a revocation another instance recorded (read from the access-change feed).
    public func remember(_ jti: String, expiresAt: Double) {
        guard expiresAt > clock.now() else { return }
        state.withLock { $0.ids[jti] = expiresAt }
    }

    /// Takes an account's not-before from the access-change feed; true when it is new or
    /// moved (the account's live sockets must close).
    public func apply(_ cutoff: AccountCutoff) -> Bool {
        let key = Self.accountKey(userID: cutoff.userID, tenantID: cutoff.tenantID)
        return state.withLock { state in
            Self.noteRefusal(cutoff, in: &state)
            guard state.cutoffs[key] != cutoff.notBefore else { return false }
            state.cutoffs[key] = cutoff.notBefore
            return true
        }
    }

    /// A provider user's disable or delete refuses all their tokens until an enable; an account's
    /// disable needs no such set (a disabled account is issued no new token).
    static func noteRefusal(_ cutoff: AccountCutoff, in state: inout State) {
        guard cutoff.userID.hasPrefix("ext_") else { return }
        if cutoff.cause.refusesEveryToken { state.refusedUsers.insert(cutoff.userID) } else { state.refusedUsers.remove(cutoff.userID) }
    }

    /// Ids held in memory.
    public var count: Int { state.withLock { $0.ids.count } }
}
