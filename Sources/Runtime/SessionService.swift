import JOSE
import RuntimeAPI
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
        try await repository.insertSession(session, maximumLiveForOwner: nil)
        return session
    }

    /// A new session owned by `userID` in `tenantID` from the start.
    ///
    /// - Parameter maximumLive: the owner's live sessions allowed with this one
    ///   (the gateway's contract), checked atomically with the insert: 429 `limit_reached` beyond.
    public func createAuthenticated(userID: String, tenantID: String, metadata: JSONObject = JSONObject(), maximumLive: Int? = nil) async throws -> SessionRecord {
        let now = clock.now()
        let absolute = now + configuration.authenticatedLifetime
        let session = SessionRecord(
            id: try SessionID.generate(), state: .authenticated, userID: userID, tenantID: tenantID, createdAt: now,
            upgradedAt: now, lastSeenAt: now, expiresAt: min(now + configuration.authenticatedIdleTimeout, absolute),
            absoluteExpiresAt: absolute, metadata: try encodeMetadata(metadata))
        do {
            try await repository.insertSession(session, maximumLiveForOwner: maximumLive)
        } catch let error as StateSurfaceError where error.code == .limitReached {
            throw RuntimeError.limitReached(maximumLive ?? 0)
        }
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
    /// - Parameter maximumLive: as for `createAuthenticated`; an upgrade adds a live session to the owner.
    public func upgrade(_ id: String, userID: String, tenantID: String, maximumLive: Int? = nil) async throws -> SessionRecord {
        if let problem = SessionID.problem(with: id) { throw RuntimeError.sessionMalformed(problem) }
        let now = clock.now()
        let outcome = try await repository.upgradeSession(
            id: id, userID: userID, tenantID: tenantID, now: now, expiresAt: now + configuration.authenticatedIdleTimeout,
            absoluteExpiresAt: now + configuration.authenticatedLifetime, maximumLiveForOwner: maximumLive)
        switch outcome {
        case .upgraded(let session), .alreadyOwned(let session):
            return session
        case .lost:
            throw RuntimeError(.conflict, .sessionConflict, "the session already belongs to another user; start a new session")
        case .notFound:
            throw RuntimeError.sessionNotFound()
        case .limitReached:
            throw RuntimeError.limitReached(maximumLive ?? 0)
        }
    }

    /// Ends every session of an account (it was disabled); returns how many.
    @discardableResult
    public func revokeAll(userID: String, tenantID: String) async throws -> Int {
        try await repository.revokeSessions(userID: userID, tenantID: tenantID, now: clock.now())
    }

    /// Which of `ids` are no longer live (revoked, expired or unknown).
    public func ended(among ids: [String]) async throws -> [String] {
        try await repository.endedSessionIDs(among: ids.filter(SessionID.isWellFormed), now: clock.now()) + ids.filter { !SessionID.isWellFormed($0) }
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
        throw RuntimeError(.conflict, .sessionBusy, "the session changed too often to update its metadata; try again")
    }

    func encodeMetadata(_ metadata: JSONObject) throws -> String {
        let bytes = JSONWriter.bytes(.object(metadata))
        guard bytes.count <= configuration.maximumMetadataBytes else {
            throw RuntimeError(.contentTooLarge, .payloadTooLarge, "session metadata is limited to \(configuration.maximumMetadataBytes) bytes")
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
    /// The session as the contract shows it.
    public var view: SessionView {
        let metadataObject = (try? StrictJSONReader().parseObject(Array(metadata.utf8))) ?? JSONObject()
        return SessionView(
            sessionID: id, state: state, userID: userID, tenantID: tenantID, createdAt: createdAt, upgradedAt: upgradedAt, expiresAt: expiresAt,
            metadata: metadataObject)
    }
}
