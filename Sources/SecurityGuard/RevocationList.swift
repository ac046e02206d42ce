import JOSE
import StateSurface
import Synchronization

/// Answers "is this access token's `jti` revoked?".
public protocol RevocationChecker: Sendable {
    func isRevoked(_ jti: String) async throws -> Bool
}

/// Asks the store on every call.
public struct StoreRevocationChecker: RevocationChecker {
    let credentials: any CredentialRepository
    public init(credentials: any CredentialRepository) { self.credentials = credentials }
    public func isRevoked(_ jti: String) async throws -> Bool { try await credentials.isTokenIDRevoked(jti) }
}

/// An in-memory mirror of the revoked token ids, kept in step with the store.
///
/// A read of the store on every authenticated request costs more than the
/// rest of the token check; this mirror answers from memory. Revocations made
/// by this gateway (logout) enter it at once; those made elsewhere (another
/// gateway on the same store) arrive with the next `sync()`, run every second.
/// If the mirror has not synced for `maximumStaleness` seconds (the store is
/// failing), every check goes to the store, so a store failure becomes a 503
/// rather than a stale "not revoked".
public final class RevocationList: RevocationChecker {
    let credentials: any CredentialRepository
    let clock: any TokenClock
    let maximumStaleness: Double
    private let state = Mutex<(ids: [String: Double], highWater: Double, lastSync: Double)>(([:], 0, -.infinity))

    public init(credentials: any CredentialRepository, clock: any TokenClock = SystemClock(), maximumStaleness: Double = 5) {
        self.credentials = credentials
        self.clock = clock
        self.maximumStaleness = maximumStaleness
    }

    public func isRevoked(_ jti: String) async throws -> Bool {
        let now = clock.now()
        let (fresh, revoked) = state.withLock { state in (now - state.lastSync <= maximumStaleness, state.ids[jti] != nil) }
        if fresh { return revoked }
        return try await credentials.isTokenIDRevoked(jti)
    }

    /// Records a revocation in the store and in the mirror.
    public func revoke(_ jti: String, expiresAt: Double) async throws {
        try await credentials.revokeTokenID(jti, expiresAt: expiresAt, now: clock.now())
        state.withLock { $0.ids[jti] = expiresAt }
    }

    /// Pulls revocations recorded since the last sync (with a margin for clock
    /// skew between writers) and forgets ids whose tokens have expired.
    public func sync() async throws {
        let now = clock.now()
        let since = state.withLock { $0.highWater } - 10
        let rows = try await credentials.revokedTokenIDs(revokedSince: since, now: now)
        state.withLock { state in
            for row in rows {
                state.ids[row.jti] = row.expiresAt
                state.highWater = max(state.highWater, row.revokedAt)
            }
            state.ids = state.ids.filter { $0.value > now }
            state.lastSync = now
        }
    }

    /// Ids held in memory.
    public var count: Int { state.withLock { $0.ids.count } }
}
