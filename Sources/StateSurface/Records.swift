// StateSurface: the only place state lives (sessions, executions, users, refresh tokens, revoked ids); SQLite in WAL mode.
import RuntimeAPI

/// One row of `sessions`. Times are seconds since the Unix epoch.
public struct SessionRecord: Sendable, Equatable {
    public var id: String
    public var state: SessionState
    public var userID: String?
    public var tenantID: String?
    public var createdAt: Double
    public var upgradedAt: Double?
    public var lastSeenAt: Double
    /// When the session stops being usable: the idle deadline, capped by `absoluteExpiresAt`.
    public var expiresAt: Double
    /// The hard limit for authenticated sessions; `nil` while anonymous.
    public var absoluteExpiresAt: Double?
    /// A JSON object, as text.
    public var metadata: String
    /// Incremented by every write; the basis of compare-and-set updates.
    public var version: Int

    public init(
        id: String, state: SessionState, userID: String? = nil, tenantID: String? = nil, createdAt: Double,
        upgradedAt: Double? = nil, lastSeenAt: Double, expiresAt: Double, absoluteExpiresAt: Double? = nil,
        metadata: String = "{}", version: Int = 1
    ) {
        self.id = id
        self.state = state
        self.userID = userID
        self.tenantID = tenantID
        self.createdAt = createdAt
        self.upgradedAt = upgradedAt
        self.lastSeenAt = lastSeenAt
        self.expiresAt = expiresAt
        self.absoluteExpiresAt = absoluteExpiresAt
        self.metadata = metadata
        self.version = version
    }

    /// True if the session can be used at `now`: not revoked and not expired.
    public func isLive(at now: Double) -> Bool {
        state != .revoked && expiresAt > now
    }

    /// True if the session belongs to that user in that tenant.
    public func isOwned(by userID: String, tenantID: String) -> Bool {
        state == .authenticated && self.userID == userID && self.tenantID == tenantID
    }
}

/// One row of `executions`.
public struct ExecutionRecord: Sendable, Equatable {
    public var id: String
    public var sessionID: String
    public var intentType: String
    public var status: ExecutionStatus
    public var idempotencyKey: String?
    /// The request payload, JSON text.
    public var payload: String
    /// The result, JSON text, once completed.
    public var result: String?
    /// The error as JSON text (`{"error":..,"message":..}`), once failed.
    public var error: String?
    public var createdAt: Double
    public var updatedAt: Double

    public init(
        id: String, sessionID: String, intentType: String, status: ExecutionStatus, idempotencyKey: String? = nil,
        payload: String, result: String? = nil, error: String? = nil, createdAt: Double, updatedAt: Double
    ) {
        self.id = id
        self.sessionID = sessionID
        self.intentType = intentType
        self.status = status
        self.idempotencyKey = idempotencyKey
        self.payload = payload
        self.result = result
        self.error = error
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}
