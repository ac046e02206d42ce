import JOSE

/// A session as the Runtime reports it and the public API shows it (DESIGN.md
/// "A session object"); times are seconds since the epoch, RFC 3339 on the wire.
public struct SessionView: Sendable, Equatable {
    public var sessionID: String
    public var state: SessionState
    public var userID: String?
    public var tenantID: String?
    public var createdAt: Double
    public var upgradedAt: Double?
    public var expiresAt: Double
    public var metadata: JSONObject

    public init(
        sessionID: String, state: SessionState, userID: String?, tenantID: String?, createdAt: Double, upgradedAt: Double?,
        expiresAt: Double, metadata: JSONObject
    ) {
        self.sessionID = sessionID
        self.state = state
        self.userID = userID
        self.tenantID = tenantID
        self.createdAt = createdAt
        self.upgradedAt = upgradedAt
        self.expiresAt = expiresAt
        self.metadata = metadata
    }

    /// True when the session is authenticated and belongs to exactly this user and tenant.
    public func isOwned(by userID: String, tenantID: String) -> Bool {
        state == .authenticated && self.userID == userID && self.tenantID == tenantID
    }

    /// `{session_id, state, user_id, tenant_id, created_at, upgraded_at, expires_at, metadata}`.
    public var json: JSONValue {
        [
            "session_id": .string(sessionID), "state": .string(state.rawValue),
            "user_id": userID.map(JSONValue.string) ?? .null, "tenant_id": tenantID.map(JSONValue.string) ?? .null,
            "created_at": .string(RFC3339.format(createdAt)), "upgraded_at": upgradedAt.map { .string(RFC3339.format($0)) } ?? .null,
            "expires_at": .string(RFC3339.format(expiresAt)), "metadata": .object(metadata),
        ]
    }

    /// Reads the wire form; `nil` for anything that is not a well-formed session object.
    public init?(json object: JSONObject) {
        guard let id = object["session_id"]?.stringValue, SessionID.isWellFormed(id),
            let state = object["state"]?.stringValue.flatMap(SessionState.init(rawValue:)),
            let created = object["created_at"]?.stringValue.flatMap(RFC3339.parse),
            let expires = object["expires_at"]?.stringValue.flatMap(RFC3339.parse)
        else { return nil }
        let userID = object["user_id"]?.stringValue
        let tenantID = object["tenant_id"]?.stringValue
        guard (userID == nil) == (tenantID == nil), (state == .authenticated) ? userID != nil : true else { return nil }
        var upgraded: Double?
        if let text = object["upgraded_at"]?.stringValue {
            guard let parsed = RFC3339.parse(text) else { return nil }
            upgraded = parsed
        }
        var metadata = JSONObject()
        if case .object(let value)? = object["metadata"] { metadata = value }
        self.init(
            sessionID: id, state: state, userID: userID, tenantID: tenantID, createdAt: created, upgradedAt: upgraded, expiresAt: expires,
            metadata: metadata)
    }
}
