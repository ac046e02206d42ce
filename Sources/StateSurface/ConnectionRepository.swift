/// One person's connecting of a service (`connections`), between the gateway's redirect to the
/// service and its callback (`connect_flows`).
///
/// Kept by the hash of its `state`, so the table never holds what a URL carried; the PKCE verifier
/// lives here for the flow's ten minutes at most and goes with the row. The flow is bound to the
/// browser session that started it (`cookieHash`): the callback completes it only in that browser,
/// signed in as that person, so a code can never land in another person's account.
public struct ConnectFlowRecord: Sendable, Equatable {
    /// SHA-256 of the `state` parameter, base64url.
    public var stateHash: String
    /// The connection's name (`connections[N].name`).
    public var connection: String
    public var userID: String
    public var tenantID: String
    /// SHA-256 of the session cookie of the browser that started it (its `browser_sessions` key).
    public var cookieHash: String
    /// The PKCE code verifier sent with the code to the service's token endpoint.
    public var codeVerifier: String
    /// Where the browser goes back to once connected (a checked same-site target).
    public var returnTo: String
    public var createdAt: Double
    public var expiresAt: Double

    public init(
        stateHash: String, connection: String, userID: String, tenantID: String, cookieHash: String, codeVerifier: String, returnTo: String,
        createdAt: Double, expiresAt: Double
    ) {
        self.stateHash = stateHash
        self.connection = connection
        self.userID = userID
        self.tenantID = tenantID
        self.cookieHash = cookieHash
        self.codeVerifier = codeVerifier
        self.returnTo = returnTo
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A URL elicitation an MCP client was given to send its person to the connect page
/// (`connect_elicitations`): bound to that person, connection and client, and completed (removed,
/// and told to its client) when the person connects. The id is no credential (the page asks for
/// the person's own browser session); it lets the page refuse a link made for someone else.
public struct ConnectElicitationRecord: Sendable, Equatable {
    /// The `elicitationId`, and the connect page URL's `elicitation` parameter.
    public var id: String
    public var connection: String
    public var userID: String
    public var tenantID: String
    /// The OAuth client it was given to (its token's `client_id`; `""` for a token that names none):
    /// only that client's streams hear of its completion.
    public var clientID: String
    public var createdAt: Double
    public var expiresAt: Double

    public init(id: String, connection: String, userID: String, tenantID: String, clientID: String, createdAt: Double, expiresAt: Double) {
        self.id = id
        self.connection = connection
        self.userID = userID
        self.tenantID = tenantID
        self.clientID = clientID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }

    /// What every instance is told when the person connects.
    public var completion: ElicitationCompletion {
        ElicitationCompletion(id: id, connection: connection, userID: userID, tenantID: tenantID, clientID: clientID)
    }
}

/// A URL elicitation the person completed (they connected its service), told to every instance
/// (`AccessChange.elicitationCompleted`), which tells the client it was given to on its open
/// MCP streams (`notifications/elicitation/complete`).
public struct ElicitationCompletion: Sendable, Hashable {
    public var id: String
    public var connection: String
    public var userID: String
    public var tenantID: String
    public var clientID: String

    public init(id: String, connection: String, userID: String, tenantID: String, clientID: String) {
        self.id = id
        self.connection = connection
        self.userID = userID
        self.tenantID = tenantID
        self.clientID = clientID
    }
}

/// A service a person connected: the tokens the gateway holds for them there (`connected_accounts`).
///
/// The tokens are sealed (AES-256-GCM, bound to the person, the connection and the kind) before
/// they reach this record: a copy of the store, or a row moved to another person, opens nothing.
public struct ConnectedAccountRecord: Sendable, Equatable {
    public var userID: String
    public var tenantID: String
    /// The connection's name (`connections[N].name`).
    public var connection: String
    /// The service's access token, sealed.
    public var accessToken: String
    /// The service's refresh token, sealed; `nil` when the service gave none.
    public var refreshToken: String?
    /// The scopes the service granted (its `scope`, or those asked for when it did not say), space-separated.
    public var scope: String
    /// When the access token expires (`expires_in` from when it was issued); `nil` when the service did not say.
    public var expiresAt: Double?
    /// When the person connected (or connected again).
    public var createdAt: Double
    /// When the tokens were last written (connected, or refreshed).
    public var updatedAt: Double
    /// When a request last went upstream with it; `nil` before the first.
    public var lastUsedAt: Double?

    public init(
        userID: String, tenantID: String, connection: String, accessToken: String, refreshToken: String?, scope: String, expiresAt: Double?,
        createdAt: Double, updatedAt: Double, lastUsedAt: Double? = nil
    ) {
        self.userID = userID
        self.tenantID = tenantID
        self.connection = connection
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.scope = scope
        self.expiresAt = expiresAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.lastUsedAt = lastUsedAt
    }
}

/// The services people connected, and their connecting in flight: started on one instance,
/// completed and used on any.
public protocol ConnectionRepository: Sendable {
    func insertConnectFlow(_ record: ConnectFlowRecord) async throws
    /// Removes the flow with `stateHash` and returns it when it had not expired at `now`: one
    /// caller at most ever gets a flow (a replayed or raced callback gets `nil`).
    func takeConnectFlow(stateHash: String, now: Double) async throws -> ConnectFlowRecord?
    /// Forgets flows that expired before `cutoff`; returns how many.
    @discardableResult
    func deleteExpiredConnectFlows(before cutoff: Double) async throws -> Int

    /// The live elicitation of `record`'s person and client at its connection: the one kept when it
    /// has not expired at `record.createdAt` (an agent asking again gets the link it was given), else `record`, kept.
    func connectElicitation(making record: ConnectElicitationRecord) async throws -> ConnectElicitationRecord
    /// The elicitation with `id`, when it has not expired at `now`.
    func connectElicitation(id: String, now: Double) async throws -> ConnectElicitationRecord?

    /// Keeps `record` as the person's one account at its connection, replacing any before it, and
    /// tells every instance in the same transaction (`AccessChange.connectionReplaced` at `record.updatedAt`):
    /// what they kept of the account before is dropped. The person's elicitations at the connection
    /// are completed in it too: removed (their links work no more), each told to every instance
    /// (`AccessChange.elicitationCompleted`) when it was live at `record.updatedAt`.
    /// - Returns: the elicitations completed.
    @discardableResult
    func upsertConnectedAccount(_ record: ConnectedAccountRecord) async throws -> [ElicitationCompletion]
    /// The person's account at `connection`, if they connected it.
    func connectedAccount(userID: String, tenantID: String, connection: String) async throws -> ConnectedAccountRecord?
    /// A person's connected accounts (every person's with `nil`), by person then connection.
    func connectedAccounts(userID: String?) async throws -> [ConnectedAccountRecord]
    /// Claims the refresh of the person's account at `connection` until `until`, unless another
    /// caller holds an unexpired claim: the account as claimed (its tokens as they are now), or
    /// `nil` when someone else is refreshing it (or there is no account). Of racing instances one wins.
    func claimConnectedAccountRefresh(userID: String, tenantID: String, connection: String, now: Double, until: Double) async throws -> ConnectedAccountRecord?
    /// Writes a refresh's tokens (`record`'s access and refresh tokens, scope, expiry, `updatedAt`)
    /// and lets go of the claim, only over the account the refresh started from: the claim is still
    /// `claimedUntil` and the row's `updated_at` still `previousUpdatedAt`. `false` when it was
    /// disconnected, connected again, or its lapsed claim taken over meanwhile (that stands).
    @discardableResult
    func completeConnectedAccountRefresh(_ record: ConnectedAccountRecord, claimedUntil: Double, previousUpdatedAt: Double) async throws -> Bool
    /// Lets go of a refresh claim (`claimedUntil`, the caller's) without writing anything: the next caller may refresh.
    func releaseConnectedAccountRefresh(userID: String, tenantID: String, connection: String, claimedUntil: Double) async throws
    /// Notes that a request went upstream with the account at `at` (no earlier than what is kept).
    func markConnectedAccountUsed(userID: String, tenantID: String, connection: String, at: Double) async throws

    /// Forgets the person's account at `connection`, and tells every instance in the same
    /// transaction (`AccessChange.connectionEnded`); returns whether there was one.
    /// With `ifUpdatedAt`, only while the row's `updated_at` is that (a refresh refused for an
    /// account connected again meanwhile forgets nothing).
    @discardableResult
    func deleteConnectedAccount(userID: String, tenantID: String, connection: String, now: Double, ifUpdatedAt: Double?) async throws -> Bool
}

extension ConnectionRepository {
    /// Forgets the person's account at `connection`, whatever it holds (a disconnect).
    @discardableResult
    public func deleteConnectedAccount(userID: String, tenantID: String, connection: String, now: Double) async throws -> Bool {
        try await deleteConnectedAccount(userID: userID, tenantID: tenantID, connection: connection, now: now, ifUpdatedAt: nil)
    }
}
