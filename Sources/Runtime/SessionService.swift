import JOSE
import StateSurface

/// Session lifecycle: create, read, upgrade, revoke, touch, with the expiry rules.
///
/// Expired and revoked sessions read as not found. Every change goes through
/// the State Surface in one transaction; the upgrade is a compare-and-set.
public struct SessionService: Sendable {
    public let repository: any SessionRepository
    public let configuration: RuntimeConfiguration
    public let clock: any TokenClock

    public init(repository: any SessionRepository, configuration: RuntimeConfiguration, clock: any TokenClock = SystemClock()) {
        self.repository = repository
        self.configuration = configuration
        self.clock = clock
    }

    /// A new anonymous session.
    public func createAnonymous(metadata: JSONObject = JSONObject()) async throws -> SessionRecord {
        let now = clock.now()
        let session = SessionRecord(
            id: try SessionID.generate(), state: .anonymous, createdAt: now, lastSeenAt: now,
            expiresAt: now + configuration.anonymousIdleTimeout, metadata: try encodeMetadata(metadata))
        try await repository.insertSession(session)
        return session
    }

    /// A new session owned by `userID` in `tenantID` from the start.
    public func createAuthenticated(userID: String, tenantID: String, metadata: JSONObject = JSONObject()) async throws -> SessionRecord {
        let now = clock.now()
        let absolute = now + configuration.authenticatedLifetime
        let session = SessionRecord(
            id: try SessionID.generate(), state: .authenticated, userID: userID, tenantID: tenantID, createdAt: now,
            upgradedAt: now, lastSeenAt: now, expiresAt: min(now + configuration.authenticatedIdleTimeout, absolute),
            absoluteExpiresAt: absolute, metadata: try encodeMetadata(metadata))
        try await repository.insertSession(session)
        return session
    }

    /// The live session with `id`.
    ///
    /// - Throws: `session_malformed` (400) or `session_not_found` (404).
    public func live(_ id: String) async throws -> SessionRecord {
        if let problem = SessionID.problem(with: id) { throw RuntimeError.sessionMalformed(problem) }
        guard let session = try await repository.session(id: id), session.isLive(at: clock.now()) else {
            throw RuntimeError.sessionNotFound()
        }
        return session
    }

    /// The live session with `id`, checked against the caller: an owned session
    /// only for its owner, an anonymous one for anybody.
    public func accessible(_ id: String, by caller: RuntimeCaller) async throws -> SessionRecord {
        let session = try await live(id)
        if session.state == .authenticated {
            guard let userID = caller.userID, let tenantID = caller.tenantID, session.isOwned(by: userID, tenantID: tenantID) else {
                throw RuntimeError.sessionForbidden()
            }
        }
        return session
    }

    /// Attaches an anonymous session to the caller (login upgrades in place).
    ///
    /// - Throws: `session_conflict` (409) when someone else owns it or won the race.
    public func upgrade(_ id: String, userID: String, tenantID: String) async throws -> SessionRecord {
        if let problem = SessionID.problem(with: id) { throw RuntimeError.sessionMalformed(problem) }
        let now = clock.now()
        let outcome = try await repository.upgradeSession(
            id: id, userID: userID, tenantID: tenantID, now: now, expiresAt: now + configuration.authenticatedIdleTimeout,
            absoluteExpiresAt: now + configuration.authenticatedLifetime)
        switch outcome {
        case .upgraded(let session), .alreadyOwned(let session):
            return session
        case .lost:
            throw RuntimeError(.conflict, "session_conflict", "the session already belongs to another user; start a new session")
        case .notFound:
            throw RuntimeError.sessionNotFound()
        }
    }

    /// Ends a session for good.
    public func revoke(_ id: String, by caller: RuntimeCaller) async throws -> SessionRecord {
        var session = try await accessible(id, by: caller)
        try await repository.revokeSession(id: id, now: clock.now())
        session.state = .revoked
        return session
    }

    /// Records activity, extending the idle deadline (never past the absolute one).
    @discardableResult
    public func touch(_ session: SessionRecord) async throws -> SessionRecord? {
        let now = clock.now()
        let idle = session.state == .authenticated ? configuration.authenticatedIdleTimeout : configuration.anonymousIdleTimeout
        return try await repository.touchSession(id: session.id, now: now, newExpiry: now + idle)
    }

    /// Merges `patch` into the session's metadata (top-level keys; `null` removes one),
    /// retrying the compare-and-set if another write got in between.
    public func mergeMetadata(_ id: String, patch: JSONObject) async throws -> SessionRecord {
        for _ in 0..<8 {
            let session = try await live(id)
            var metadata = try decodeMetadata(session.metadata)
            for member in patch.members {
                // Spelled out: in a ternary, `nil` would become JSONValue.null, not "remove".
                let newValue: JSONValue? = member.value == .null ? .none : .some(member.value)
                metadata[member.name] = newValue
            }
            if let updated = try await repository.replaceMetadata(id: id, expectedVersion: session.version, metadata: try encodeMetadata(metadata), now: clock.now()) {
                return updated
            }
        }
        throw RuntimeError(.conflict, "session_busy", "the session changed too often to update its metadata; try again")
    }

    func encodeMetadata(_ metadata: JSONObject) throws -> String {
        let bytes = JSONWriter.bytes(.object(metadata))
        guard bytes.count <= configuration.maximumMetadataBytes else {
            throw RuntimeError(.contentTooLarge, "payload_too_large", "session metadata is limited to \(configuration.maximumMetadataBytes) bytes")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func decodeMetadata(_ text: String) throws -> JSONObject {
        do {
            return try StrictJSONReader().parseObject(Array(text.utf8))
        } catch {
            throw StateSurfaceError(.corrupt, "stored session metadata is not a JSON object")
        }
    }
}

extension SessionRecord {
    /// The session object of the API (DESIGN.md): times in RFC 3339 UTC.
    public func json() -> JSONValue {
        let metadataObject = (try? StrictJSONReader().parseObject(Array(metadata.utf8))) ?? JSONObject()
        return [
            "session_id": .string(id), "state": .string(state.rawValue),
            "user_id": userID.map(JSONValue.string) ?? .null, "tenant_id": tenantID.map(JSONValue.string) ?? .null,
            "created_at": .string(RFC3339.format(createdAt)), "upgraded_at": upgradedAt.map { .string(RFC3339.format($0)) } ?? .null,
            "expires_at": .string(RFC3339.format(expiresAt)), "metadata": .object(metadataObject),
        ]
    }
}
