import ConnectedAccounts
import DataPlane
import JOSE
import Logging
import Observability
import Runtime
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import ServiceLifecycle
import SocketGuard
import StateSurface
import TokenExchange
import Synchronization

/// Applies changes made elsewhere that end access, on every instance.
///
/// Two paths, one authoritative and one fast:
/// - **The access-change feed** (`AccessChangeFeed`): every revoked token id,
///   account not-before and revoked session, numbered by the store. It is read
///   when the store signals a commit (PostgreSQL's LISTEN/NOTIFY: milliseconds
///   after a logout on another gateway) and at every tick; a reader that
///   reconnects reads on from the last version it applied. A revoked session's
///   sockets close with 1008 "session ended", a cut-off account's with its
///   cause: "account disabled", "account deleted" or "password changed" (its
///   not-before comes first in the feed).
/// - **The periodic sync**, twice a second: pulls revoked ids and not-befores
///   into the mirror (it is what keeps the mirror fresh; a stale mirror sends
///   every check to the store), then asks the Runtime which watched sessions
///   have ended (expiry has no event), and closes theirs.
final class AccessChangeWatcher: Service, Sendable {
    let revocations: RevocationList
    let runtime: RuntimeClient
    let sockets: SocketRegistry
    let sessionOwners: SessionOwnershipView
    /// The tokens at connected services this instance keeps: a disconnect or a cut-off drops the person's.
    let connectedTokens: ConnectedTokenCache?
    /// Tokens exchanged for people: dropped with their access, and with the session whose provider token was exchanged.
    let exchangedTokens: ExchangedTokenCache?
    /// The store's feed; `nil` runs the periodic sync alone.
    let feed: (any AccessChangeFeed)?
    let clock: any TokenClock
    let logger: Logger
    let interval: Double
    /// The last feed version applied; `nil` until the first read.
    private let cursor = Mutex<Int64?>(nil)
    /// Whether the mirror was synced once (the first sync's cut-offs are history, not news).
    private let synced = Mutex(false)
    /// One warning per outage of each check below, not one per attempt.
    private let failures: RecurringFailureLog

    static let revocationSync = RecurringFailureLog.Check(name: "revocation sync", meanwhile: "checks go to the store until it recovers")
    static let feedRead = RecurringFailureLog.Check(name: "access-change feed read", meanwhile: "the periodic sync carries on")
    static let endedSessionCheck = RecurringFailureLog.Check(name: "ended-session check", meanwhile: "will retry")

    init(
        revocations: RevocationList, runtime: RuntimeClient, sockets: SocketRegistry, sessionOwners: SessionOwnershipView,
        connectedTokens: ConnectedTokenCache? = nil, exchangedTokens: ExchangedTokenCache? = nil, feed: (any AccessChangeFeed)?, clock: any TokenClock, logger: Logger, interval: Double = 0.5
    ) {
        self.connectedTokens = connectedTokens
        self.exchangedTokens = exchangedTokens
        self.revocations = revocations
        self.runtime = runtime
        self.sockets = sockets
        self.sessionOwners = sessionOwners
        self.feed = feed
        self.clock = clock
        self.logger = logger
        self.interval = interval
        self.failures = RecurringFailureLog(logger: logger)
    }

    enum Wake: Sendable {
        /// The timer: the feed and the periodic sync.
        case tick
        /// The store signalled a commit: the feed only.
        case signal
    }

    func run() async throws {
        let (wakes, wake) = AsyncStream<Wake>.makeStream(bufferingPolicy: .bufferingNewest(4))
        let signals = feed?.accessChangeSignals()
        await cancelWhenGracefulShutdown { [self] in
            await withTaskGroup(of: Void.self) { group in
                // At once, then on the timer: until the first sync, every check would go to the store.
                group.addTask { [self] in
                    while !Task.isCancelled {
                        wake.yield(.tick)
                        try? await Task.sleep(for: .milliseconds(Int64(interval * 1000)))
                    }
                }
                if let signals {
                    group.addTask {
                        for await _ in signals { wake.yield(.signal) }
                    }
                }
                for await reason in wakes {
                    if Task.isCancelled { break }
                    if reason == .tick { await syncRevocations() }
                    await readFeed()
                    if reason == .tick { await checkWatchedSessions() }
                }
                group.cancelAll()
            }
        }
        wake.finish()
    }

    /// Pulls revocations and not-befores into the mirror; closes the sockets of newly disabled accounts.
    func syncRevocations() async {
        do {
            let changed = try await revocations.sync()
            // The first sync reads every cut-off there has been: actions taken before this instance started, not now.
            let first = synced.withLock { first in
                defer { first = true }
                return !first
            }
            for account in changed {
                connectedTokens?.forget(userID: account.userID, tenantID: account.tenantID)
                exchangedTokens?.forget(userID: account.userID, tenantID: account.tenantID)
                let closed = account.cause == .enabled ? 0 : sockets.close(userID: account.userID, tenantID: account.tenantID, reason: account.cause.closeReason)
                if !first { logAdministrativeAction(account, closed: closed) }
            }
            failures.succeeded(Self.revocationSync)
        } catch {
            failures.failed(Self.revocationSync, error: error)
        }
    }

    /// Applies the feed's changes after the last version applied (the first read only
    /// notes where the feed is: what came before is in the store, which the sync reads).
    func readFeed() async {
        guard let feed else { return }
        do {
            guard let start = cursor.withLock({ $0 }) else {
                let latest = try await feed.latestAccessChangeVersion()
                cursor.withLock { $0 = $0 ?? latest }
                failures.succeeded(Self.feedRead)
                return
            }
            var version = start
            while true {
                let changes = try await feed.accessChanges(after: version, limit: 1_000)
                apply(changes.map(\.change))
                guard let last = changes.last else { break }
                version = last.version
                cursor.withLock { $0 = max($0 ?? 0, version) }
                if changes.count < 1_000 { break }
            }
            failures.succeeded(Self.feedRead)
        } catch {
            failures.failed(Self.feedRead, error: error)
        }
    }

    func apply(_ changes: [AccessChange]) {
        var ended: [String] = []
        // Streams closed for the tokens revoked since the last administrative action of the batch:
        // an operator's revoke writes its tokens first, then the action.
        var closedForTokens = 0
        for change in changes {
            switch change {
            case .tokenRevoked(let jti, let expiresAt):
                revocations.remember(jti, expiresAt: expiresAt)
                closedForTokens += sockets.close(tokenID: jti, reason: "token revoked")
            case .accountCutOff(let cutoff):
                // Disabled or deleted: the person's connected accounts are gone from the store too.
                connectedTokens?.forget(userID: cutoff.userID, tenantID: cutoff.tenantID)
                exchangedTokens?.forget(userID: cutoff.userID, tenantID: cutoff.tenantID)
                guard revocations.apply(cutoff) else { break }
                let closed = cutoff.cause == .enabled ? 0 : sockets.close(userID: cutoff.userID, tenantID: cutoff.tenantID, reason: cutoff.cause.closeReason)
                logAdministrativeAction(cutoff, closed: closed)
            case .sessionEnded(let sessionID):
                ended.append(sessionID)
            case .keyRingChanged:
                break  // KeyRingReloader wakes on the same signal and reloads (and logs what it loaded)
            case .administrativeAction(let action):
                logAdministrativeAction(action, closed: closedForTokens)
                closedForTokens = 0
            case .connectionEnded(let userID, let tenantID, let connection):
                connectedTokens?.forget(userID: userID, tenantID: tenantID, connection: connection)
                sockets.close(userID: userID, tenantID: tenantID, connection: connection, reason: "\(connection) disconnected")
            case .connectionReplaced(let userID, let tenantID, let connection):
                connectedTokens?.forget(userID: userID, tenantID: tenantID, connection: connection)
            case .elicitationCompleted(let done):
                sockets.completeElicitation(id: done.id, userID: done.userID, tenantID: done.tenantID, connection: done.connection, clientID: done.clientID)
            case .unknown:
                break  // a newer version's kind: the periodic sync applies what its rows changed
            }
        }
        guard !ended.isEmpty else { return }
        // The view first: an exchange that starts after the forget below must not find the session live.
        sessionOwners.forget(ended)
        exchangedTokens?.forget(sessionIDs: ended)
        for sessionID in ended { sockets.close(sessionID: sessionID, reason: "session ended") }
    }

    /// A structured line for an administrative action this instance carried out (`users disable`,
    /// `enable`, `delete`, `passwd`, from any host): what was done, to whom (the id, and the name
    /// the store knows them by), and how many of this instance's sockets, tunnels and MCP streams
    /// it ended. The name is looked up after the line's facts are settled, off the feed's path.
    func logAdministrativeAction(_ cutoff: AccountCutoff, closed: Int) {
        let logger = self.logger
        Task {
            // A person deleted has no name left (`users delete` forgets them; the id stays).
            let name = cutoff.cause == .deleted ? "-" : await personName(userID: cutoff.userID, tenantID: cutoff.tenantID)
            logger.notice(
                "administrative action applied",
                metadata: [
                    "action": "\(cutoff.cause.rawValue)", "user_id": "\(cutoff.userID)", "tenant_id": "\(cutoff.tenantID)", "user_name": "\(name)",
                    "streams_and_sockets_ended": "\(closed)", "tokens_refused_before": "\(RFC3339.format(cutoff.notBefore))",
                ])
        }
    }

    /// The line for an operator's `oauth revoke` or `oauth remove-client`: what, the client, the
    /// person (id and name) for a grant, and the streams this instance closed for its tokens.
    func logAdministrativeAction(_ action: AdministrativeAction, closed: Int) {
        let logger = self.logger
        Task {
            var metadata: Logger.Metadata = [
                "action": "\(action.kind.rawValue)", "client_id": "\(action.clientID)", "streams_and_sockets_ended": "\(closed)",
            ]
            if let userID = action.userID {
                metadata["user_id"] = "\(userID)"
                metadata["user_name"] = "\(await personName(userID: userID, tenantID: action.tenantID ?? ""))"
                metadata["tenant_id"] = "\(action.tenantID ?? "-")"
            }
            if let resource = action.resource { metadata["resource"] = "\(resource)" }
            logger.notice("administrative action applied", metadata: metadata)
        }
    }

    /// How an action's line names its person: an account's username, a provider user's email (else
    /// their username or subject), printable; `-` when the store does not say.
    func personName(userID: String, tenantID: String) async -> String {
        let store = revocations.store
        let name: String? =
            if userID.hasPrefix("ext_") {
                try? await store.providerUser(id: userID).flatMap { $0.email ?? $0.username ?? $0.subject }
            } else {
                try? await store.user(id: userID, tenantID: tenantID).map(\.username)
            }
        return LogText.printable(name ?? "-")
    }

    /// Asks the Runtime which sessions with open sockets, or vouched for by the ownership
    /// view, have ended (expiry has no event), and closes theirs.
    func checkWatchedSessions() async {
        let checkedAt = clock.now()
        let watched = Array(Set(sockets.sessionIDs).union(sessionOwners.sessionIDs))
        do {
            var ended: [String] = []
            for start in stride(from: 0, to: watched.count, by: 1_000) {
                ended += try await runtime.endedSessions(among: Array(watched[start..<min(start + 1_000, watched.count)]))
            }
            if !ended.isEmpty {
                // A session can end because its account was disabled after the sync above (the
                // disable writes the not-before, then ends the sessions): sync again, so the
                // socket hears the real reason and the mirror refuses the account's tokens first.
                await syncRevocations()
            }
            sessionOwners.forget(ended)
            if !ended.isEmpty { exchangedTokens?.forget(sessionIDs: ended) }
            sessionOwners.validated(at: checkedAt)
            for sessionID in ended { sockets.close(sessionID: sessionID, reason: "session ended") }
            failures.succeeded(Self.endedSessionCheck)
        } catch {
            failures.failed(Self.endedSessionCheck, error: error)
        }
    }
}
