import RuntimeAPI

/// What a compare-and-set upgrade of an anonymous session found.
public enum SessionUpgradeOutcome: Sendable, Equatable {
    /// The session was anonymous and now belongs to the caller.
    case upgraded(SessionRecord)
    /// The session already belonged to the caller; nothing changed.
    case alreadyOwned(SessionRecord)
    /// Someone else owns it (or it was claimed first): the caller lost.
    case lost
    /// The caller already holds the most live sessions the given limit allows; nothing changed.
    case limitReached
    /// No live session has that id (unknown, expired or revoked).
    case notFound
}

/// Sessions. Every write is one atomic transaction.
///
/// Implementations: `SQLiteStateSurface` (now); PostgreSQL later, behind the
/// same protocol, so callers never change.
public protocol SessionRepository: Sendable {
    /// Stores a new session; throws `StateSurfaceError.conflict` if the id exists.
    ///
    /// - Parameter maximumLiveForOwner: for an owned session, how many live
    ///   sessions its owner may hold with this one; counted in the same write
    ///   transaction (`StateSurfaceError.limitReached` beyond), so concurrent
    ///   inserts cannot exceed it.
    func insertSession(_ session: SessionRecord, maximumLiveForOwner: Int?) async throws
    /// The session with `id`, in any state (callers decide what expired means).
    func session(id: String) async throws -> SessionRecord?
    /// Anonymous -> authenticated if still anonymous and live at `now`, as one
    /// compare-and-set; already owned by the same user and tenant is not a loss.
    /// With `maximumLiveForOwner`, the owner's live sessions are counted in the
    /// same transaction and the upgrade is `.limitReached` if it would exceed it.
    func upgradeSession(
        id: String, userID: String, tenantID: String, now: Double, expiresAt: Double, absoluteExpiresAt: Double, maximumLiveForOwner: Int?
    ) async throws -> SessionUpgradeOutcome
    /// Marks a session revoked; `false` if there is no such session.
    @discardableResult
    func revokeSession(id: String, now: Double) async throws -> Bool
    /// Records activity: `last_seen_at = now`, `expires_at = newExpiry`, if the session is live.
    @discardableResult
    func touchSession(id: String, now: Double, newExpiry: Double) async throws -> SessionRecord?
    /// Replaces the metadata if the version is still `expectedVersion`; `nil` if it moved on.
    func replaceMetadata(id: String, expectedVersion: Int, metadata: String, now: Double) async throws -> SessionRecord?
    /// Deletes sessions expired or revoked before `cutoff`; returns how many.
    func deleteSessions(endedBefore cutoff: Double) async throws -> Int
    /// Revokes every session `userID` owns in `tenantID` (a disabled account); returns how many.
    @discardableResult
    func revokeSessions(userID: String, tenantID: String, now: Double) async throws -> Int
    /// Which of `ids` are no longer live at `now` (revoked, expired or gone).
    func endedSessionIDs(among ids: [String], now: Double) async throws -> [String]
    /// A cheap read that fails when the store cannot answer (for readiness probes).
    func ping() async throws
}

/// What inserting an execution found.
public enum ExecutionInsertOutcome: Sendable, Equatable {
    /// The execution is new and was stored.
    case inserted(ExecutionRecord)
    /// The session already has an execution with that idempotency key: this is it.
    case existing(ExecutionRecord)
}

/// The execution log.
public protocol ExecutionRepository: Sendable {
    /// Stores a new execution unless the session already used its idempotency key.
    func insertExecution(_ execution: ExecutionRecord) async throws -> ExecutionInsertOutcome
    /// Moves an execution to `status` with its result or error.
    func updateExecution(id: String, status: ExecutionStatus, result: String?, error: String?, now: Double) async throws
    func execution(id: String) async throws -> ExecutionRecord?
}

/// A storage failure, with a stable code.
public struct StateSurfaceError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// A row with that key exists already.
        case conflict
        /// The database could not be opened or migrated.
        case unavailable
        /// A stored value is not what this version expects.
        case corrupt
        /// A limit given with the write was reached; nothing changed.
        case limitReached
    }

    public let code: Code
    public let message: String
    /// The database could not be reached at all (a refused or timed-out connect, a call past its
    /// deadline, a server shutting down), as opposed to a statement it refused: opens the store's circuit.
    public let isOutage: Bool

    public init(_ code: Code, _ message: String, isOutage: Bool = false) {
        self.code = code
        self.message = message
        self.isOutage = isOutage
    }

    public var description: String { message }
}
