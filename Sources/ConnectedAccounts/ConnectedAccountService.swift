import JOSE
import Logging
import ProviderLogin
import StateSurface

/// People's connected accounts: starting a connection, completing it at the callback, listing
/// and forgetting them.
///
/// The tokens are sealed (`ConnectionTokenVault`) before they reach the store, and opened only
/// to be sent to their own service.
public struct ConnectedAccountService: Sendable {
    public let directory: ConnectionDirectory
    let store: any ConnectionRepository
    let tokenEndpoint: TokenEndpoint
    /// Refreshes that end a grant or fail (never a token).
    let logger: Logger
    /// `{public_url}/.portcullis/connect/callback`: the one redirect URI every connection registers.
    public let redirectURI: String

    public init(
        directory: ConnectionDirectory, store: any ConnectionRepository, redirectURI: String, tokenEndpoint: TokenEndpoint = TokenEndpoint(),
        logger: Logger = Logger(label: "portcullis.connections")
    ) {
        self.logger = logger
        self.directory = directory
        self.store = store
        self.redirectURI = redirectURI
        self.tokenEndpoint = tokenEndpoint
    }

    /// The callback's path under the public URL.
    public static let callbackPath = "/.portcullis/connect/callback"

    /// Starts connecting `connection` for `owner` in the browser whose session cookie hashes to
    /// `cookieHash`: the flow is kept, and the URL to send the browser to is returned.
    public func start(_ connection: ConnectionDirectory.Connection, owner: ConnectionTokenVault.Owner, cookieHash: String, returnTo: String, now: Double)
        async throws -> String
    {
        let started = try ConnectStart(
            connection: connection.settings, owner: owner, cookieHash: cookieHash, redirectURI: redirectURI, returnTo: returnTo, now: now)
        try await store.insertConnectFlow(started.flow)
        return started.authorizationURL
    }

    /// The callback's outcome: what was connected, and where the browser goes back to.
    public struct Completed: Sendable {
        public let connection: ConnectionSettings
        public let account: ConnectedAccountRecord
        public let returnTo: String
    }

    /// Completes a connection at the callback: the flow `state` names is taken (once), it must
    /// have been started by this browser session (`cookieHash`) for this person (`owner`), and
    /// the code is exchanged with the flow's PKCE verifier; the tokens are sealed and kept.
    ///
    /// - Parameters:
    ///   - error: the callback's `error` (the person declined at the service), if any.
    ///   - iss: the callback's `iss` (RFC 9207), if any: checked when the connection names its `issuer`.
    /// - Throws: `ConnectError`; a store failure as it is.
    public func complete(
        state: String, code: String?, error: String?, iss: String? = nil, cookieHash: String, userID: String, tenantID: String, now: Double
    ) async throws -> Completed {
        guard let flow = try await store.takeConnectFlow(stateHash: try LoginStart.hash(state), now: now) else { throw ConnectError.unknownFlow }
        // Taken either way: a flow that met the wrong browser is spent, so it cannot be tried again elsewhere.
        guard flow.cookieHash == cookieHash, flow.userID == userID, flow.tenantID == tenantID else { throw ConnectError.otherBrowser }
        guard let connection = directory.connection(named: flow.connection) else {
            throw ConnectError("connect_unknown_connection", "the connection \(flow.connection) is no longer configured; nothing was connected", status: 404)
        }
        // Before the error too (RFC 9207 2.4): an error response can be mixed up as a code can.
        if let issuer = connection.settings.issuer, iss != issuer { throw ConnectError.issuerMismatch(connection.settings.displayName, missing: iss == nil) }
        if let error { throw ConnectError.declined(TokenEndpoint.isErrorCode(error) ? error : "an error") }
        guard let code, !code.isEmpty else { throw ConnectError.declined("no code came back") }
        guard let vault = directory.vault else { throw ConnectError.unavailable("no sealing key") }
        let answer: TokenEndpointAnswer
        do {
            answer = try await tokenEndpoint.exchange(
                code: code, codeVerifier: flow.codeVerifier, redirectURI: redirectURI, client: connection.client, endpoint: connection.settings.tokenEndpoint)
        } catch {
            switch error {
            case .refused(let why): throw ConnectError.refused(why)
            case .unavailable(let why), .malformed(let why): throw ConnectError.unavailable(why)
            }
        }
        let accessToken = try Self.bearerToken(in: answer)
        let owner = ConnectionTokenVault.Owner(userID: userID, tenantID: tenantID, connection: connection.settings.name)
        let account = ConnectedAccountRecord(
            userID: userID, tenantID: tenantID, connection: connection.settings.name, accessToken: try vault.seal(accessToken, kind: .accessToken, for: owner),
            refreshToken: try answer.refreshToken.map { try vault.seal($0, kind: .refreshToken, for: owner) },
            scope: Self.grantedScope(answer.scope, asked: connection.settings.scopes), expiresAt: answer.expiresIn.map { now + $0 }, createdAt: now,
            updatedAt: now)
        try await store.upsertConnectedAccount(account)
        return Completed(connection: connection.settings, account: account, returnTo: flow.returnTo)
    }

    /// The access token of a service's token answer, when the gateway can keep and send it: a
    /// Bearer token (sent as `Authorization: Bearer`, a token of another type would be sent as what
    /// it is not), it and any refresh token visible ASCII of at most 8 KiB.
    /// - Throws: `ConnectError` (`connect_unavailable`) saying what is wrong with it.
    static func bearerToken(in answer: TokenEndpointAnswer) throws(ConnectError) -> String {
        guard let accessToken = answer.accessToken, Self.isTokenText(accessToken), answer.refreshToken.map(Self.isTokenText) ?? true else {
            throw ConnectError.unavailable("the service's answer has no access_token the gateway can send (visible ASCII, at most 8 KiB)")
        }
        guard answer.tokenType?.lowercased() == "bearer" else {
            throw ConnectError.unavailable("the service's token_type is \(answer.tokenType == nil ? "missing" : "not Bearer"), and the gateway sends Bearer tokens only")
        }
        return accessToken
    }

    /// A token the gateway may keep and send in a header: visible ASCII, at most 8 KiB.
    package static func isTokenText(_ token: String) -> Bool {
        (1...8192).contains(token.utf8.count) && token.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E }
    }

    /// The scopes the service says it granted, space-separated (GitHub separates them with commas);
    /// those asked for when it says nothing or something that is not scopes (RFC 6749 3.3), so a
    /// service's answer never reaches a page or a log as anything but scope names.
    package static func grantedScope(_ said: String?, asked: [String]) -> String {
        guard let said, said.utf8.count <= 1024,
            said.utf8.allSatisfy({ $0 == 0x20 || $0 == UInt8(ascii: ",") || ($0 >= 0x21 && $0 <= 0x7E && $0 != 0x22 && $0 != 0x5C) })
        else { return asked.joined(separator: " ") }
        return said.split(whereSeparator: { $0 == " " || $0 == "," }).joined(separator: " ")
    }

    /// The person's connected accounts, for their agents page and `connections list`.
    public func accounts(userID: String?) async throws -> [ConnectedAccountRecord] {
        try await store.connectedAccounts(userID: userID)
    }

    /// `owner`'s account (its tokens sealed), if they connected it.
    public func account(for owner: ConnectionTokenVault.Owner) async throws -> ConnectedAccountRecord? {
        try await store.connectedAccount(userID: owner.userID, tenantID: owner.tenantID, connection: owner.connection)
    }

    /// The access token of `owner`'s account, opened; `nil` when they have not connected it (or
    /// the row does not open under this key for them).
    public func accessToken(for owner: ConnectionTokenVault.Owner) async throws -> String? {
        try await account(for: owner).flatMap { opened($0, for: owner) }?.token
    }

    /// `account`'s access token opened for `owner`, with when it expires; `nil` when it does not
    /// open under this key for them.
    private func opened(_ account: ConnectedAccountRecord, for owner: ConnectionTokenVault.Owner) -> (token: String, expiresAt: Double?)? {
        directory.vault?.open(account.accessToken, kind: .accessToken, for: owner).map { ($0, account.expiresAt) }
    }

    /// How long a URL elicitation's link works.
    public static let elicitationLifetime: Double = 600

    /// The id of the live URL elicitation of `owner` and `clientID` (made now when there is none):
    /// the link an MCP client is given to send its person to the connect page. An agent asking
    /// again within its ten minutes gets the same one; each client its own, so that its
    /// completion is told to that client only (MCP: "only to the client that initiated").
    public func makeElicitation(for owner: ConnectionTokenVault.Owner, clientID: String?, now: Double) async throws -> String {
        let made = ConnectElicitationRecord(
            id: try SecureRandom.identifier(bytes: 16), connection: owner.connection, userID: owner.userID, tenantID: owner.tenantID,
            clientID: clientID ?? "", createdAt: now, expiresAt: now + Self.elicitationLifetime)
        return try await store.connectElicitation(making: made).id
    }

    /// The live elicitation with `id`.
    public func elicitation(id: String, now: Double) async throws -> ConnectElicitationRecord? {
        guard id.utf8.count <= 64 else { return nil }
        return try await store.connectElicitation(id: id, now: now)
    }

    /// How long before its expiry an access token is refreshed.
    public static let refreshMargin: Double = 120
    /// How long one instance's claim on a refresh holds the others off (they wait for its result).
    static let refreshClaim: Double = 30

    /// The access token to send for `owner` now: the one kept while it has more than its refresh
    /// margin to live (two minutes, or half its lifetime if shorter), else a refreshed one. `nil`
    /// when they have not connected the service, or the service ended the grant (`invalid_grant`:
    /// the account is forgotten, and they connect again).
    ///
    /// Of instances that need one refresh at once, one claims it (compare-and-set in the store) and
    /// calls the service; the others wait for its result, so a rotating refresh token is used once.
    /// The refresh is written only over the account it started from: one connected again, or
    /// disconnected, meanwhile stands. Notes the use (`last_used_at`).
    /// - Throws: `ConnectError` (`connect_unavailable`) when the token has expired and the service
    ///   cannot refresh it now; a store failure as it is.
    public func currentAccessToken(for owner: ConnectionTokenVault.Owner, now: Double) async throws -> (token: String, expiresAt: Double?)? {
        guard let account = try await account(for: owner) else { return nil }
        try? await store.markConnectedAccountUsed(userID: owner.userID, tenantID: owner.tenantID, connection: owner.connection, at: now)
        guard let expiresAt = account.expiresAt, expiresAt - now < Self.refreshMargin(account) else { return opened(account, for: owner) }
        // Expiring: kept while it lasts (a refresh that fails now is tried again by the next request).
        let current = expiresAt > now ? opened(account, for: owner) : nil
        guard account.refreshToken != nil else { return current }
        let claim = now + Self.refreshClaim
        guard
            let claimed = try await store.claimConnectedAccountRefresh(
                userID: owner.userID, tenantID: owner.tenantID, connection: owner.connection, now: now, until: claim)
        else { return try await refreshedElsewhere(owner, current: current, since: account.updatedAt) }
        // Refreshed by another caller between the read and the claim: its token, and the claim let go.
        if let fresh = claimed.expiresAt, fresh - now >= Self.refreshMargin(claimed) {
            try await store.releaseConnectedAccountRefresh(userID: owner.userID, tenantID: owner.tenantID, connection: owner.connection, claimedUntil: claim)
            return opened(claimed, for: owner)
        }
        return try await refresh(claimed, claimedUntil: claim, owner: owner, current: current, now: now)
    }

    /// How long before its expiry `account`'s token is refreshed: two minutes, or half of what it
    /// was issued to live if that is shorter (a five-minute token is not refreshed on every request).
    static func refreshMargin(_ account: ConnectedAccountRecord) -> Double {
        guard let expiresAt = account.expiresAt else { return refreshMargin }
        return min(refreshMargin, max(0, expiresAt - account.updatedAt) / 2)
    }

    /// Another instance holds the refresh: its result, once written (a tenth of a second apart, five seconds at most).
    private func refreshedElsewhere(_ owner: ConnectionTokenVault.Owner, current: (String, Double?)?, since: Double) async throws -> (token: String, expiresAt: Double?)? {
        // Waited for even while the old token lasts: a service that rotates may end it with the refresh.
        for _ in 0..<50 {
            try await Task.sleep(for: .milliseconds(100))
            guard let account = try await account(for: owner) else { return nil }
            if account.updatedAt > since, let token = opened(account, for: owner) { return token }
        }
        if let current { return current }
        throw ConnectError.unavailable("another gateway is refreshing the token and has not finished")
    }

    /// The OAuth error codes that say the grant itself is over (the person revoked it at the service,
    /// or the refresh token expired): anything else (`invalid_client`, a proxy's 403) is the
    /// operator's to fix, and forgetting every person's account over it would be wrong.
    static let grantEndedCodes: Set<String> = ["invalid_grant", "bad_refresh_token", "unauthorized_client"]

    /// Refreshes the claimed account at its service and keeps the new tokens.
    private func refresh(
        _ account: ConnectedAccountRecord, claimedUntil: Double, owner: ConnectionTokenVault.Owner, current: (String, Double?)?, now: Double
    ) async throws -> (token: String, expiresAt: Double?)? {
        let release = { [store] in
            try? await store.releaseConnectedAccountRefresh(userID: owner.userID, tenantID: owner.tenantID, connection: owner.connection, claimedUntil: claimedUntil)
        }
        guard let vault = directory.vault, let connection = directory.connection(named: owner.connection),
            let refreshToken = account.refreshToken.flatMap({ vault.open($0, kind: .refreshToken, for: owner) })
        else {
            await release()
            return current
        }
        let metadata: Logger.Metadata = ["connection": .string(owner.connection), "user_id": .string(owner.userID)]
        let answer: TokenEndpointAnswer
        do {
            answer = try await tokenEndpoint.refresh(refreshToken, client: connection.client, endpoint: connection.settings.tokenEndpoint)
        } catch {
            switch error {
            case .refused(let code) where Self.grantEndedCodes.contains(code):
                // The service ended the grant: forgotten (unless it was connected again meanwhile), so the person is asked to connect again.
                logger.notice("connected account's grant ended at the service", metadata: metadata.merging(["error": .string(code)]) { $1 })
                try await store.deleteConnectedAccount(
                    userID: owner.userID, tenantID: owner.tenantID, connection: owner.connection, now: now, ifUpdatedAt: account.updatedAt)
                return nil
            case .refused(let why), .unavailable(let why), .malformed(let why):
                logger.warning("connected account's refresh failed; will retry", metadata: metadata.merging(["error": .string(why)]) { $1 })
                await release()
                if let current { return current }
                throw ConnectError.unavailable(why)
            }
        }
        let accessToken: String
        do {
            accessToken = try Self.bearerToken(in: answer)
        } catch {
            logger.warning("connected account's refresh answer unusable; will retry", metadata: metadata.merging(["error": .string(error.message)]) { $1 })
            await release()
            if let current { return current }
            throw error
        }
        var refreshed = account
        refreshed.accessToken = try vault.seal(accessToken, kind: .accessToken, for: owner)
        // A service that does not rotate its refresh token keeps the one it gave.
        refreshed.refreshToken = try answer.refreshToken.map { try vault.seal($0, kind: .refreshToken, for: owner) } ?? account.refreshToken
        refreshed.scope = answer.scope.map { Self.grantedScope($0, asked: connection.settings.scopes) } ?? account.scope
        refreshed.expiresAt = answer.expiresIn.map { now + $0 }
        refreshed.updatedAt = max(now, account.updatedAt + 0.001)
        // Disconnected or connected again while the service answered: that stands, and this token is not sent.
        guard try await store.completeConnectedAccountRefresh(refreshed, claimedUntil: claimedUntil, previousUpdatedAt: account.updatedAt) else {
            return nil
        }
        return (accessToken, refreshed.expiresAt)
    }

    /// What a disconnect did at the service.
    public enum ServiceRevocation: Sendable, Equatable {
        /// The service was told (RFC 7009) and answered 200.
        case revoked
        /// The connection has no `revocation_endpoint`: the tokens are only forgotten here.
        case notOffered
        /// The service could not be told (it refused, or did not answer): the tokens are forgotten here all the same.
        case failed(String)
    }

    /// Forgets `owner`'s account, then tells the service (its refresh token, else its access
    /// token) where the connection has a `revocation_endpoint`. `nil` when there was no account.
    ///
    /// Forgotten first: once the person asked, the gateway never sends it again, whatever the service says.
    /// Every instance stops sending it within a second (the store's access-change feed), and the
    /// requests under way that carry it end; `forgotten` runs as soon as the store has forgotten it,
    /// for the instance that was asked to do the same at once (its own feed comes a tick later).
    public func disconnect(
        _ owner: ConnectionTokenVault.Owner, now: Double, forgotten: @Sendable () -> Void = {}
    ) async throws -> ServiceRevocation? {
        guard let account = try await account(for: owner),
            try await store.deleteConnectedAccount(userID: owner.userID, tenantID: owner.tenantID, connection: owner.connection, now: now)
        else { return nil }
        forgotten()
        guard let connection = directory.connection(named: owner.connection), let endpoint = connection.settings.revocationEndpoint else { return .notOffered }
        // A refresh token's revocation ends its access tokens too (RFC 7009 2.1); the access token is told when there is none.
        let opened =
            account.refreshToken.flatMap { sealed in directory.vault?.open(sealed, kind: .refreshToken, for: owner).map { ($0, "refresh_token") } }
            ?? directory.vault?.open(account.accessToken, kind: .accessToken, for: owner).map { ($0, "access_token") }
        guard let (token, hint) = opened else { return .failed("the tokens could not be opened under this gateway's key") }
        do {
            try await tokenEndpoint.revoke(token, hint: hint, client: connection.client, endpoint: endpoint)
            return .revoked
        } catch {
            switch error {
            case .refused(let why), .unavailable(let why), .malformed(let why): return .failed(why)
            }
        }
    }
}
