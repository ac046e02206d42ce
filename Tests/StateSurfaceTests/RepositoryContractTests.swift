import Foundation
import PortcullisTestSupport
import RuntimeAPI
import StateSurface
import Testing

/// The repositories' promises, checked on both stores: what one instance writes, every
/// instance sees, and the atomic steps hold under concurrency (on PostgreSQL, each task
/// of a concurrent test may run on a different pooled connection, as two gateways would).
@Suite("State Surface repositories, on SQLite and PostgreSQL")
struct RepositoryContractTests {
    let now = Date().timeIntervalSince1970

    func anonymous(_ id: String? = nil) throws -> SessionRecord {
        SessionRecord(id: try id ?? SessionID.generate(), state: .anonymous, createdAt: now, lastSeenAt: now, expiresAt: now + 1800)
    }

    @Test("a session id is stored once: a second insert with it is a conflict and changes nothing", arguments: StoreKind.available)
    func insertConflict(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let session = try anonymous()
        try await state.insertSession(session, maximumLiveForOwner: nil)
        var again = session
        again.metadata = "{\"x\":1}"
        await #expect { try await state.insertSession(again, maximumLiveForOwner: nil) } throws: { ($0 as? StateSurfaceError)?.code == .conflict }
        #expect(try await state.session(id: session.id) == session)
    }

    @Test("a provider sign-in's flow is taken once: of ten callbacks racing with one state exactly one gets it; an expired one is nobody's, and the sweep forgets it", arguments: StoreKind.available)
    func loginFlowTakenOnce(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let flow = LoginFlowRecord(
            stateHash: "hash-1", provider: "acme", sessionID: try SessionID.generate(), nonce: "n", codeVerifier: "v", returnTo: "https://app.example.com/",
            loginChallenge: "c", createdAt: now, expiresAt: now + 600)
        try await state.insertLoginFlow(flow)
        let now = self.now
        let taken = try await withThrowingTaskGroup(of: LoginFlowRecord?.self) { group in
            for _ in 0..<10 { group.addTask { try await state.takeLoginFlow(stateHash: "hash-1", now: now) } }
            return try await group.reduce(into: [LoginFlowRecord]()) { if let record = $1 { $0.append(record) } }
        }
        #expect(taken == [flow])
        #expect(try await state.takeLoginFlow(stateHash: "hash-1", now: now) == nil, "a replayed state finds nothing")
        var expired = flow
        expired.stateHash = "hash-2"
        expired.expiresAt = now - 1
        try await state.insertLoginFlow(expired)
        #expect(try await state.takeLoginFlow(stateHash: "hash-2", now: now) == nil, "an expired flow is nobody's (and is gone)")
        var stale = flow
        stale.stateHash = "hash-3"
        stale.expiresAt = now - 10
        try await state.insertLoginFlow(stale)
        #expect(try await state.deleteExpiredLoginFlows(before: now) == 1)
        await state.shutdown()
    }

    @Test("a connect flow is taken once (of ten racing callbacks one gets it; expired, nobody); a person's account at a connection is one row, replaced by connecting again, listed by person then connection, and forgotten once", arguments: StoreKind.available)
    func connections(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        let flow = ConnectFlowRecord(
            stateHash: "state-1", connection: "github", userID: "usr_a", tenantID: "default", cookieHash: "cookie-1", codeVerifier: "v",
            returnTo: "/.portcullis/agents", createdAt: now, expiresAt: now + 600)
        try await state.insertConnectFlow(flow)
        let taken = try await withThrowingTaskGroup(of: ConnectFlowRecord?.self) { group in
            for _ in 0..<10 { group.addTask { try await state.takeConnectFlow(stateHash: "state-1", now: now) } }
            return try await group.reduce(into: [ConnectFlowRecord]()) { if let record = $1 { $0.append(record) } }
        }
        #expect(taken == [flow])
        #expect(try await state.takeConnectFlow(stateHash: "state-1", now: now) == nil, "a replayed state finds nothing")
        var expired = flow
        expired.stateHash = "state-2"
        expired.expiresAt = now - 1
        try await state.insertConnectFlow(expired)
        #expect(try await state.takeConnectFlow(stateHash: "state-2", now: now) == nil, "an expired flow is nobody's")
        expired.stateHash = "state-3"
        expired.expiresAt = now - 10
        try await state.insertConnectFlow(expired)
        #expect(try await state.deleteExpiredConnectFlows(before: now) == 1)

        let first = ConnectedAccountRecord(
            userID: "usr_a", tenantID: "default", connection: "github", accessToken: "sealed-1", refreshToken: "sealed-r1", scope: "repo", expiresAt: now + 3600,
            createdAt: now, updatedAt: now)
        try await state.upsertConnectedAccount(first)
        let other = ConnectedAccountRecord(
            userID: "usr_a", tenantID: "default", connection: "drive", accessToken: "sealed-2", refreshToken: nil, scope: "", expiresAt: nil, createdAt: now,
            updatedAt: now)
        try await state.upsertConnectedAccount(other)
        let bobs = ConnectedAccountRecord(
            userID: "usr_b", tenantID: "default", connection: "github", accessToken: "sealed-3", refreshToken: nil, scope: "repo", expiresAt: nil, createdAt: now,
            updatedAt: now, lastUsedAt: now)
        try await state.upsertConnectedAccount(bobs)
        #expect(try await state.connectedAccount(userID: "usr_a", tenantID: "default", connection: "github") == first)
        #expect(try await state.connectedAccount(userID: "usr_a", tenantID: "acme", connection: "github") == nil, "another tenant's is another person's")
        var again = first
        again.accessToken = "sealed-4"
        again.refreshToken = nil
        again.updatedAt = now + 5
        try await state.upsertConnectedAccount(again)
        #expect(try await state.connectedAccount(userID: "usr_a", tenantID: "default", connection: "github") == again, "connecting again replaces")
        #expect(try await state.connectedAccounts(userID: "usr_a") == [other, again])
        #expect(try await state.connectedAccounts(userID: nil).map(\.userID) == ["usr_a", "usr_a", "usr_b"])
        let before = try await state.latestAccessChangeVersion()
        #expect(try await state.deleteConnectedAccount(userID: "usr_a", tenantID: "default", connection: "github", now: 1_000))
        #expect(try await state.deleteConnectedAccount(userID: "usr_a", tenantID: "default", connection: "github", now: 1_000) == false)
        #expect(
            try await state.accessChanges(after: before, limit: 10).map(\.change) == [.connectionEnded(userID: "usr_a", tenantID: "default", connection: "github")],
            "a disconnect tells every instance, once, and a second delete of nothing tells nobody")
        #expect(try await state.connectedAccounts(userID: nil) == [other, bobs])
        await state.shutdown()
    }

    @Test("a connected account's refresh is claimed by one caller: of ten racing claims one wins; the claim holds others off until it lapses or the refresh is written; a refresh written after a disconnect does not bring the account back; use is noted, never backwards", arguments: StoreKind.available)
    func connectionRefreshClaims(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        let account = ConnectedAccountRecord(
            userID: "usr_r", tenantID: "default", connection: "github", accessToken: "sealed-1", refreshToken: "sealed-r1", scope: "repo", expiresAt: now + 60,
            createdAt: now, updatedAt: now)
        try await state.upsertConnectedAccount(account)
        let won = try await withThrowingTaskGroup(of: ConnectedAccountRecord?.self) { group in
            for _ in 0..<10 {
                group.addTask { try await state.claimConnectedAccountRefresh(userID: "usr_r", tenantID: "default", connection: "github", now: now, until: now + 30) }
            }
            return try await group.reduce(into: []) { $0.append($1) }.compactMap { $0 }
        }
        #expect(won == [account], "one claim wins, and it reads the tokens as they are")
        #expect(try await state.claimConnectedAccountRefresh(userID: "usr_r", tenantID: "default", connection: "github", now: now + 10, until: now + 40) == nil)
        #expect(try await state.claimConnectedAccountRefresh(userID: "usr_r", tenantID: "default", connection: "github", now: now + 31, until: now + 61) != nil, "a lapsed claim is taken over")
        var refreshed = account
        refreshed.accessToken = "sealed-2"
        refreshed.refreshToken = "sealed-r2"
        refreshed.expiresAt = now + 3_600
        refreshed.updatedAt = now + 32
        #expect(
            try await state.completeConnectedAccountRefresh(refreshed, claimedUntil: now + 30, previousUpdatedAt: now) == false,
            "a claim that lapsed and was taken over writes nothing")
        #expect(try await state.completeConnectedAccountRefresh(refreshed, claimedUntil: now + 61, previousUpdatedAt: now))
        #expect(try await state.connectedAccount(userID: "usr_r", tenantID: "default", connection: "github") == refreshed)
        #expect(try await state.claimConnectedAccountRefresh(userID: "usr_r", tenantID: "default", connection: "github", now: now + 33, until: now + 63) == refreshed, "written, the claim is let go")
        try await state.releaseConnectedAccountRefresh(userID: "usr_r", tenantID: "default", connection: "github", claimedUntil: now + 1)
        #expect(try await state.claimConnectedAccountRefresh(userID: "usr_r", tenantID: "default", connection: "github", now: now + 34, until: now + 64) == nil, "another's release is no release")
        try await state.releaseConnectedAccountRefresh(userID: "usr_r", tenantID: "default", connection: "github", claimedUntil: now + 63)
        #expect(try await state.claimConnectedAccountRefresh(userID: "usr_r", tenantID: "default", connection: "github", now: now + 35, until: now + 65) != nil, "released")
        var connectedAgain = refreshed
        connectedAgain.accessToken = "sealed-3"
        connectedAgain.updatedAt = now + 36
        try await state.upsertConnectedAccount(connectedAgain)
        #expect(try await state.completeConnectedAccountRefresh(refreshed, claimedUntil: now + 65, previousUpdatedAt: refreshed.updatedAt) == false, "connected again meanwhile: it stands")
        #expect(
            try await state.deleteConnectedAccount(userID: "usr_r", tenantID: "default", connection: "github", now: now + 37, ifUpdatedAt: refreshed.updatedAt) == false,
            "a refused refresh of the account before forgets nothing")
        try await state.markConnectedAccountUsed(userID: "usr_r", tenantID: "default", connection: "github", at: now + 50)
        try await state.markConnectedAccountUsed(userID: "usr_r", tenantID: "default", connection: "github", at: now + 40)
        #expect(try await state.connectedAccount(userID: "usr_r", tenantID: "default", connection: "github")?.lastUsedAt == now + 50)
        #expect(try await state.deleteConnectedAccount(userID: "usr_r", tenantID: "default", connection: "github", now: now + 60, ifUpdatedAt: now + 36))
        #expect(try await state.completeConnectedAccountRefresh(connectedAgain, claimedUntil: now + 65, previousUpdatedAt: now + 36) == false)
        #expect(try await state.connectedAccount(userID: "usr_r", tenantID: "default", connection: "github") == nil, "a disconnect during a refresh stands")
        await state.shutdown()
    }

    @Test("a URL elicitation is one live row per person, connection and client: asked again it is the same, expired it is made anew; read while live", arguments: StoreKind.available)
    func connectElicitations(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        let first = ConnectElicitationRecord(
            id: "eli-1", connection: "github", userID: "usr_e", tenantID: "default", clientID: "desk", createdAt: now, expiresAt: now + 600)
        #expect(try await state.connectElicitation(making: first) == first)
        var second = first
        (second.id, second.createdAt, second.expiresAt) = ("eli-2", now + 10, now + 610)
        #expect(try await state.connectElicitation(making: second) == first, "the live one is given again")
        var other = second
        other.connection = "drive"
        #expect(try await state.connectElicitation(making: other) == other, "another connection has its own")
        var otherClient = second
        (otherClient.id, otherClient.clientID) = ("eli-c", "https://agent.example/client.json")
        #expect(try await state.connectElicitation(making: otherClient) == otherClient, "another client has its own")
        #expect(try await state.connectElicitation(id: "eli-1", now: now + 599) == first)
        #expect(try await state.connectElicitation(id: "eli-1", now: now + 600) == nil, "expired")
        var third = first
        (third.id, third.createdAt, third.expiresAt) = ("eli-3", now + 700, now + 1_300)
        #expect(try await state.connectElicitation(making: third) == third, "an expired one is replaced")
        await state.shutdown()
    }

    @Test("connecting completes the person's elicitations at that connection, every client's, in its transaction: their links are used up, and each live one is told to every instance", arguments: StoreKind.available)
    func connectingCompletesElicitations(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        func elicitation(_ id: String, user: String = "usr_f", connection: String = "github", client: String, expiresAt: Double) -> ConnectElicitationRecord {
            ConnectElicitationRecord(id: id, connection: connection, userID: user, tenantID: "default", clientID: client, createdAt: now - 1, expiresAt: expiresAt)
        }
        let desk = elicitation("eli-desk", client: "desk", expiresAt: now + 600)
        let agent = elicitation("eli-agent", client: "https://agent.example/a/client.json", expiresAt: now + 600)
        let stale = elicitation("eli-stale", client: "old", expiresAt: now + 30)
        for made in [desk, agent, stale, elicitation("eli-drive", connection: "drive", client: "desk", expiresAt: now + 600),
            elicitation("eli-bob", user: "usr_bob", client: "desk", expiresAt: now + 600)]
        {
            _ = try await state.connectElicitation(making: made)
        }
        let before = try await state.latestAccessChangeVersion()
        let completed = try await state.upsertConnectedAccount(
            ConnectedAccountRecord(
                userID: "usr_f", tenantID: "default", connection: "github", accessToken: "sealed", refreshToken: nil, scope: "repo", expiresAt: nil,
                createdAt: now + 60, updatedAt: now + 60))
        #expect(Set(completed.map(\.id)) == ["eli-desk", "eli-agent"], "the live ones of this person at this connection, any client")
        #expect(try await state.connectElicitation(id: "eli-desk", now: now + 61) == nil, "its link is used up")
        #expect(try await state.connectElicitation(id: "eli-drive", now: now + 61) != nil, "another connection's stays")
        #expect(try await state.connectElicitation(id: "eli-bob", now: now + 61) != nil, "another person's stays")
        let told = try await state.accessChanges(after: before, limit: 10).map(\.change)
        #expect(told.first == .connectionReplaced(userID: "usr_f", tenantID: "default", connection: "github"))
        #expect(
            Set(told.dropFirst().compactMap { if case .elicitationCompleted(let done) = $0 { done } else { nil } }) == [desk.completion, agent.completion],
            "each read back as written, a client id with slashes whole")
        #expect(told.count == 3, "the expired one is not told")
        await state.shutdown()
    }

    @Test("disabling or deleting an account forgets the services it connected and its connect flows, in the transaction that cuts it off; a new password keeps them", arguments: StoreKind.available)
    func cutOffForgetsConnections(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        for name in ["carol", "dave"] {
            try await state.insertUser(UserRecord(id: "usr_" + name, tenantID: "default", username: name, passwordHash: "h", createdAt: now))
            try await state.upsertConnectedAccount(
                ConnectedAccountRecord(
                    userID: "usr_" + name, tenantID: "default", connection: "github", accessToken: "s", refreshToken: nil, scope: "", expiresAt: nil, createdAt: now,
                    updatedAt: now))
            try await state.insertConnectFlow(
                ConnectFlowRecord(
                    stateHash: "flow-" + name, connection: "github", userID: "usr_" + name, tenantID: "default", cookieHash: "c", codeVerifier: "v", returnTo: "/",
                    createdAt: now, expiresAt: now + 600))
        }
        _ = try await state.setUserPassword(tenantID: "default", username: "dave", passwordHash: "h2", now: now)
        #expect(try await state.connectedAccounts(userID: "usr_dave").count == 1, "a new password keeps them")
        _ = try await state.disableUser(tenantID: "default", username: "carol", now: now)
        #expect(try await state.connectedAccounts(userID: "usr_carol").isEmpty)
        #expect(try await state.takeConnectFlow(stateHash: "flow-carol", now: now) == nil)
        _ = try await state.deleteUser(tenantID: "default", username: "dave", now: now)
        #expect(try await state.connectedAccounts(userID: nil).isEmpty)
        await state.shutdown()
    }

    @Test("a browser session's record is kept by its cookie's hash with optional provider fields and its claims; last-seen only moves forward; one is deleted once; the sweep takes those past their end or idle", arguments: StoreKind.available)
    func browserSessions(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let record = BrowserSessionRecord(
            cookieHash: "cookie-1", sessionID: try SessionID.generate(), userID: "ext_1", tenantID: "acme", issuer: "https://idp.example.com", subject: "user-1",
            provider: "acme", claims: #"{"groups":["a"]}"#, createdAt: now, lastSeenAt: now, expiresAt: now + 3_600)
        try await state.insertBrowserSession(record)
        #expect(try await state.browserSession(cookieHash: "cookie-1") == record)
        var local = record
        local.cookieHash = "cookie-2"
        (local.issuer, local.subject, local.provider) = (nil, nil, nil)
        try await state.insertBrowserSession(local)
        #expect(try await state.browserSession(cookieHash: "cookie-2") == local)
        await #expect(throws: (any Error).self) { try await state.insertBrowserSession(record) }
        try await state.touchBrowserSession(cookieHash: "cookie-1", lastSeenAt: now + 100)
        try await state.touchBrowserSession(cookieHash: "cookie-1", lastSeenAt: now + 50)
        #expect(try await state.browserSession(cookieHash: "cookie-1")?.lastSeenAt == now + 100)
        #expect(try await state.deleteBrowserSession(cookieHash: "cookie-2"))
        #expect(try await !state.deleteBrowserSession(cookieHash: "cookie-2"))
        var ended = record
        ended.cookieHash = "cookie-3"
        ended.expiresAt = now - 1
        try await state.insertBrowserSession(ended)
        var idle = record
        idle.cookieHash = "cookie-4"
        idle.lastSeenAt = now - 1_000
        try await state.insertBrowserSession(idle)
        #expect(try await state.deleteExpiredBrowserSessions(now: now, idleCutoff: now - 500) == 2)
        #expect(try await state.browserSession(cookieHash: "cookie-1") != nil)
        await state.shutdown()
    }

    @Test("a provider re-check is due only for a scheduled session whose browser session was used since the previous one; of ten instances claiming it exactly one wins; a claim of a moved due time fails", arguments: StoreKind.available)
    func providerRechecks(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        let identity = ProviderIdentityRecord(
            provider: "acme", issuer: "https://idp.example.com", subject: "user-1", tenantID: "acme", providerSessionID: "sid-1", sealedIDToken: "sealed-id",
            sealedRefreshToken: "sealed-refresh")
        func browser(_ cookie: String, _ sessionID: String, lastSeen: Double) -> BrowserSessionRecord {
            BrowserSessionRecord(
                cookieHash: cookie, sessionID: sessionID, userID: "ext_a", tenantID: "acme", issuer: identity.issuer, subject: identity.subject, provider: "acme",
                claims: "{}", createdAt: now - 2_000, lastSeenAt: lastSeen, expiresAt: now + 3_600)
        }
        // Used since its previous re-check (due now - 10, interval 900: seen after now - 910).
        try await state.saveProviderSession(ProviderSessionRecord(sessionID: "ses_used", userID: "ext_a", identity: identity, createdAt: now, expiresAt: now + 3_600))
        try await state.insertBrowserSession(browser("cookie-used", "ses_used", lastSeen: now - 100))
        try await state.scheduleProviderRecheck(sessionID: "ses_used", at: now - 10)
        // Not used since its previous re-check.
        try await state.saveProviderSession(ProviderSessionRecord(sessionID: "ses_unused", userID: "ext_a", identity: identity, createdAt: now, expiresAt: now + 3_600))
        try await state.insertBrowserSession(browser("cookie-unused", "ses_unused", lastSeen: now - 1_500))
        try await state.scheduleProviderRecheck(sessionID: "ses_unused", at: now - 10)
        // Not due yet; and one never scheduled (the API's own session).
        try await state.saveProviderSession(ProviderSessionRecord(sessionID: "ses_later", userID: "ext_a", identity: identity, createdAt: now, expiresAt: now + 3_600))
        try await state.insertBrowserSession(browser("cookie-later", "ses_later", lastSeen: now))
        try await state.scheduleProviderRecheck(sessionID: "ses_later", at: now + 60)
        try await state.saveProviderSession(ProviderSessionRecord(sessionID: "ses_api", userID: "ext_a", identity: identity, createdAt: now, expiresAt: now + 3_600))

        let due = try await state.providerRechecksDue(now: now, interval: 900, limit: 10)
        #expect(due.map(\.record.sessionID) == ["ses_used"])
        #expect(due.first?.due == now - 10)
        #expect(due.first?.record.identity.sealedRefreshToken == "sealed-refresh")
        let claims = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<10 { group.addTask { try await state.claimProviderRecheck(sessionID: "ses_used", due: now - 10, next: now + 890) } }
            return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(claims == 1, "one instance asks the provider")
        #expect(try await state.providerRechecksDue(now: now, interval: 900, limit: 10).isEmpty, "claimed: not due again until next")
        #expect(try await state.providerRechecksDue(now: now + 900, interval: 900, limit: 10).map(\.record.sessionID) == ["ses_later"], "ses_used was not used since its re-check")
        try await state.touchBrowserSession(cookieHash: "cookie-used", lastSeenAt: now + 5)
        #expect(try await state.providerRechecksDue(now: now + 900, interval: 900, limit: 10).map(\.record.sessionID) == ["ses_later", "ses_used"], "the longest overdue first")
        try await state.scheduleProviderRecheck(sessionID: "ses_later", at: nil)
        #expect(try await state.providerRechecksDue(now: now + 900, interval: 900, limit: 10).map(\.record.sessionID) == ["ses_used"])
        #expect(try await !state.claimProviderRecheck(sessionID: "ses_used", due: now - 10, next: now + 1_000), "a due time already moved is not claimed again")
        await state.shutdown()
    }

    @Test("an agent's use of a provider session is recorded and makes its re-check due for the pass as a browser's use does, and returns the session when its re-check is due; a failing streak starts at its first note, keeps that start, and a granted refresh or a long gap ends it", arguments: StoreKind.available)
    func providerSessionAgentUse(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        let identity = ProviderIdentityRecord(
            provider: "acme", issuer: "https://idp.example.com", subject: "user-1", tenantID: "acme", providerSessionID: "sid-1", sealedIDToken: "sealed-id",
            sealedRefreshToken: "sealed-refresh")
        let record = ProviderSessionRecord(sessionID: "ses_agent", userID: "ext_a", identity: identity, createdAt: now, expiresAt: now + 3_600)
        try await state.saveProviderSession(record)
        try await state.insertBrowserSession(
            BrowserSessionRecord(
                cookieHash: "cookie-agent", sessionID: "ses_agent", userID: "ext_a", tenantID: "acme", issuer: identity.issuer, subject: identity.subject,
                provider: "acme", claims: "{}", createdAt: now - 5_000, lastSeenAt: now - 5_000, expiresAt: now + 3_600))
        try await state.scheduleProviderRecheck(sessionID: "ses_agent", at: now + 60)
        #expect(try await state.useProviderSession(sessionID: "ses_agent", at: now) == nil, "not due yet: nothing to re-check before the answer")
        #expect(try await state.useProviderSession(sessionID: "ses_nobody", at: now) == nil)
        try await state.scheduleProviderRecheck(sessionID: "ses_agent", at: now - 10)
        // The browser was last seen long ago; the agent's use just now makes it due for the pass.
        #expect(try await state.providerRechecksDue(now: now, interval: 900, limit: 10).map(\.record.sessionID) == ["ses_agent"])
        let used = try await state.useProviderSession(sessionID: "ses_agent", at: now + 1)
        #expect(used?.record == record && used?.due == now - 10, "due: the session and its due time, to claim")
        // A session only agents use, whose browser is gone for hours, is still due to the pass.
        try await state.scheduleProviderRecheck(sessionID: "ses_agent", at: now + 800)
        #expect(try await state.providerRechecksDue(now: now + 900, interval: 900, limit: 10).map(\.record.sessionID) == ["ses_agent"])
        try await state.scheduleProviderRecheck(sessionID: "ses_agent", at: now + 3_000)
        #expect(try await state.providerRechecksDue(now: now + 3_000, interval: 900, limit: 10).isEmpty, "unused since the previous re-check: not refreshed by the gateway alone")

        #expect(try await state.noteProviderRecheckFailing(sessionID: "ses_agent", now: now + 100, restartAfter: 1_800) == now + 100)
        #expect(try await state.noteProviderRecheckFailing(sessionID: "ses_agent", now: now + 400, restartAfter: 1_800) == now + 100, "the streak keeps its start")
        #expect(try await state.updateProviderSession(record))
        #expect(try await state.noteProviderRecheckFailing(sessionID: "ses_agent", now: now + 500, restartAfter: 1_800) == now + 500, "a granted refresh ended the streak")
        #expect(
            try await state.noteProviderRecheckFailing(sessionID: "ses_agent", now: now + 5_000, restartAfter: 1_800) == now + 5_000,
            "nobody used the session for longer than the gap: one blip now starts a new streak, not the old one's end")
        #expect(try await state.noteProviderRecheckFailing(sessionID: "ses_nobody", now: now, restartAfter: 1_800) == nil)
        await state.shutdown()
    }

    @Test("a provider's user cut off is disabled, their tokens' not-before set, their refresh tokens, grants and provider sessions gone, the cut-off in the feed and among the account cut-offs; enabled, the not-before moves and the feed says so; delete forgets their names", arguments: StoreKind.available)
    func providerUserCutOff(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        try await state.recordProviderUser(
            ProviderUserRecord(
                userID: "ext_leaver", issuer: "https://idp.example.com", subject: "user-9", tenantID: "acme", email: "leaver@example.com", username: "leaver",
                name: "Lee Ver", firstSeenAt: now, lastSeenAt: now))
        let identity = ProviderIdentityRecord(
            provider: "acme", issuer: "https://idp.example.com", subject: "user-9", tenantID: "acme", providerSessionID: nil, sealedIDToken: "s", sealedRefreshToken: "s")
        try await state.saveProviderSession(ProviderSessionRecord(sessionID: "ses_leaver", userID: "ext_leaver", identity: identity, createdAt: now, expiresAt: now + 3_600))
        try await state.upsertOAuthGrant(
            OAuthGrantRecord(userID: "ext_leaver", tenantID: "acme", clientID: "c", clientName: "C", resource: "https://gw/mcp", scope: "", createdAt: now, updatedAt: now))
        try await state.insertRefreshToken(
            RefreshTokenRecord(id: "rt_leaver", tokenHash: "h_leaver", familyID: "f_leaver", sessionID: "ses_leaver", userID: "ext_leaver", tenantID: "acme", createdAt: now, expiresAt: now + 600))
        let version = try await state.latestAccessChangeVersion()
        #expect(try await state.cutOffProviderUser(id: "ext_nobody", now: now, forgetNames: false) == nil)
        let cut = try #require(try await state.cutOffProviderUser(id: "ext_leaver", now: now, forgetNames: false))
        #expect(cut.disabled && cut.tokensNotBefore == now && cut.email == "leaver@example.com")
        #expect(try await state.refreshToken(hash: "h_leaver")?.revokedAt != nil)
        #expect(try await state.oauthGrants(userID: "ext_leaver").isEmpty)
        #expect(try await state.providerSession(sessionID: "ses_leaver") == nil)
        let changes = try await state.accessChanges(after: version, limit: 10).map(\.change)
        #expect(changes.contains(.accountCutOff(AccountCutoff(userID: "ext_leaver", tenantID: "acme", notBefore: now, cause: .disabled))), "\(changes)")
        let cutoffs = try await state.accountCutoffs(since: now - 1).filter { $0.userID == "ext_leaver" }
        #expect(cutoffs.map(\.cause) == [.disabled], "\(cutoffs)")
        let enabled = try #require(try await state.enableProviderUser(id: "ext_leaver", now: now + 5))
        #expect(!enabled.disabled && enabled.tokensNotBefore == now + 5)
        #expect(try await state.accountCutoffs(since: now - 1).filter { $0.userID == "ext_leaver" }.map(\.cause) == [.enabled])
        #expect(try await state.accessChanges(after: version, limit: 10).map(\.change).contains(
            .accountCutOff(AccountCutoff(userID: "ext_leaver", tenantID: "acme", notBefore: now + 5, cause: .enabled))))
        let deleted = try #require(try await state.cutOffProviderUser(id: "ext_leaver", now: now + 10, forgetNames: true))
        #expect(deleted.disabled && deleted.email == nil && deleted.username == nil && deleted.name == nil && deleted.subject == "user-9")
        await state.shutdown()
    }

    @Test("a login code is taken once by ten racing completions; provider sessions are found by sid, by sub or both, by person (live, newest first), updated in place, and forgotten with their access-token ids; a logout token's id is new once until it expires", arguments: StoreKind.available)
    func providerSessionsContract(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        let identity = ProviderIdentityRecord(
            provider: "acme", issuer: "https://idp.example.com", subject: "user-1", tenantID: "acme", providerSessionID: "sid-1", sealedIDToken: "sealed-id",
            sealedRefreshToken: nil, sealedAccessToken: "sealed-access-0", accessTokenExpiresAt: now + 60)
        let code = LoginCodeRecord(codeHash: "code-1", sessionID: "ses_a", loginChallenge: "c", provider: identity, createdAt: now, expiresAt: now + 60)
        try await state.insertLoginCode(code)
        let taken = try await withThrowingTaskGroup(of: LoginCodeRecord?.self) { group in
            for _ in 0..<10 { group.addTask { try await state.takeLoginCode(codeHash: "code-1", now: now) } }
            return try await group.reduce(into: [LoginCodeRecord]()) { if let record = $1 { $0.append(record) } }
        }
        #expect(taken == [code])
        var expired = code
        expired.codeHash = "code-2"
        expired.expiresAt = now - 1
        try await state.insertLoginCode(expired)
        #expect(try await state.takeLoginCode(codeHash: "code-2", now: now) == nil, "an expired code is nobody's")

        let first = ProviderSessionRecord(sessionID: "ses_a", userID: "ext_a", identity: identity, createdAt: now, expiresAt: now + 100)
        var secondIdentity = identity
        secondIdentity.providerSessionID = "sid-2"
        secondIdentity.sealedRefreshToken = "sealed-refresh"
        secondIdentity.sealedAccessToken = "sealed-access"
        secondIdentity.accessTokenExpiresAt = now + 3600
        let second = ProviderSessionRecord(sessionID: "ses_b", userID: "ext_a", identity: secondIdentity, createdAt: now + 1, expiresAt: now + 100)
        var otherUser = identity
        otherUser.subject = "user-2"
        otherUser.providerSessionID = nil
        let third = ProviderSessionRecord(sessionID: "ses_c", userID: "ext_c", identity: otherUser, createdAt: now, expiresAt: now - 5)
        for record in [first, second, third] { try await state.saveProviderSession(record) }
        #expect(try await state.providerSession(sessionID: "ses_b") == second, "the sealed access token and its expiry are kept as written")
        #expect(try await state.providerSessions(userID: "ext_a", now: now).map(\.sessionID) == ["ses_b", "ses_a"], "a person's live sessions, the newest first")
        #expect(try await state.providerSessions(userID: "ext_c", now: now).isEmpty, "an expired session is nobody's subject")
        let bySID = try await state.providerSessions(issuer: identity.issuer, providerSessionID: "sid-1", subject: nil)
        #expect(bySID.map(\.sessionID) == ["ses_a"])
        let bySubject = try await state.providerSessions(issuer: identity.issuer, providerSessionID: nil, subject: "user-1")
        #expect(Set(bySubject.map(\.sessionID)) == ["ses_a", "ses_b"])
        #expect(try await state.providerSessions(issuer: identity.issuer, providerSessionID: "sid-2", subject: "user-2").isEmpty, "both must hold")
        #expect(try await state.providerSessions(issuer: "https://other.example.com", providerSessionID: "sid-1", subject: nil).isEmpty)
        #expect(try await state.providerSessions(issuer: identity.issuer, providerSessionID: nil, subject: nil).isEmpty, "naming nobody ends nobody")
        var rotated = second
        rotated.identity.sealedRefreshToken = "sealed-refresh-2"
        try await state.saveProviderSession(rotated)
        #expect(try await state.providerSession(sessionID: "ses_b")?.identity.sealedRefreshToken == "sealed-refresh-2")

        try await state.recordSessionAccessToken(sessionID: "ses_a", tokenID: "jti-1", expiresAt: now + 900)
        try await state.recordSessionAccessToken(sessionID: "ses_a", tokenID: "jti-old", expiresAt: now - 1)
        #expect(try await state.sessionAccessTokens(sessionID: "ses_a", now: now).map(\.tokenID) == ["jti-1"])
        var updated = first
        updated.expiresAt = now + 200
        #expect(try await state.updateProviderSession(updated), "an existing record is updated")
        #expect(try await state.providerSession(sessionID: "ses_a")?.expiresAt == now + 200)
        let removedTokens = try await state.deleteProviderSession(sessionID: "ses_a")
        #expect(Set(removedTokens.map(\.tokenID)) == ["jti-1", "jti-old"], "the delete returns the access-token ids it removed")
        #expect(try await state.updateProviderSession(updated) == false, "a deleted record is never brought back by an update")
        #expect(try await state.providerSession(sessionID: "ses_a") == nil)
        #expect(try await state.sessionAccessTokens(sessionID: "ses_a", now: now).isEmpty)

        #expect(try await state.rememberLogoutToken(id: "lt-1", expiresAt: now + 300, now: now))
        let replays = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<10 { group.addTask { try await state.rememberLogoutToken(id: "lt-1", expiresAt: now + 300, now: now) } }
            return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(replays == 0, "a logout token id is new once")
        #expect(try await state.rememberLogoutToken(id: "lt-1", expiresAt: now + 900, now: now + 301), "after it expired it may be recorded again")
        // The sweep forgets the expired session (ses_c) and its sealed tokens; the expired code went when it was asked for.
        var sealed = third
        sealed.identity.sealedRefreshToken = "sealed-refresh-3"
        try await state.saveProviderSession(sealed)
        #expect(try await state.deleteExpiredSignIns(before: now) == 1)
        #expect(try await state.providerSession(sessionID: "ses_c") == nil)
        #expect(try await state.providerSession(sessionID: "ses_b") != nil)
        await state.shutdown()
    }

    @Test("an owner's live-session limit holds when ten of its sessions are upgraded at once", arguments: StoreKind.available)
    func limitUnderConcurrency(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        var ids: [String] = []
        for _ in 0..<10 {
            let session = try anonymous()
            try await state.insertSession(session, maximumLiveForOwner: nil)
            ids.append(session.id)
        }
        let now = self.now
        let outcomes = try await withThrowingTaskGroup(of: SessionUpgradeOutcome.self) { group in
            for id in ids {
                group.addTask {
                    try await state.upgradeSession(
                        id: id, userID: "alice", tenantID: "acme", now: now, expiresAt: now + 3600, absoluteExpiresAt: now + 7200, maximumLiveForOwner: 3)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { if case .upgraded = $0 { true } else { false } }.count == 3)
        #expect(outcomes.filter { $0 == .limitReached }.count == 7)
        await #expect { try await state.insertSession(SessionRecord(id: try SessionID.generate(), state: .authenticated, userID: "alice", tenantID: "acme", createdAt: now, lastSeenAt: now, expiresAt: now + 60), maximumLiveForOwner: 3) } throws: {
            ($0 as? StateSurfaceError)?.code == .limitReached
        }
    }

    @Test("revoking, touching and listing ended sessions: a revoked or expired session is ended; touch never revives it", arguments: StoreKind.available)
    func revokeTouchEnded(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let live = try anonymous(), revoked = try anonymous()
        var expired = try anonymous()
        expired.expiresAt = now - 1
        for session in [live, revoked, expired] { try await state.insertSession(session, maximumLiveForOwner: nil) }
        #expect(try await state.revokeSession(id: revoked.id, now: now))
        #expect(try await state.revokeSession(id: revoked.id, now: now))  // already revoked: still "there was such a session"
        #expect(try await !state.revokeSession(id: try SessionID.generate(), now: now))
        #expect(try await state.touchSession(id: revoked.id, now: now, newExpiry: now + 99) == nil)
        #expect(try await state.touchSession(id: expired.id, now: now, newExpiry: now + 99) == nil)
        let touched = try #require(try await state.touchSession(id: live.id, now: now + 5, newExpiry: now + 900))
        #expect(touched.expiresAt == now + 900 && touched.lastSeenAt == now + 5)
        let unknown = try SessionID.generate()
        #expect(Set(try await state.endedSessionIDs(among: [live.id, revoked.id, expired.id, unknown], now: now)) == [revoked.id, expired.id, unknown])
        #expect(try await state.revokeSessions(userID: "nobody", tenantID: "acme", now: now) == 0)
    }

    @Test("one idempotency key makes one execution however many inserts race with it", arguments: StoreKind.available)
    func idempotency(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let session = try anonymous()
        try await state.insertSession(session, maximumLiveForOwner: nil)
        let now = self.now
        let outcomes = try await withThrowingTaskGroup(of: ExecutionInsertOutcome.self) { group in
            for index in 0..<12 {
                group.addTask {
                    try await state.insertExecution(
                        ExecutionRecord(
                            id: "exe_\(index)", sessionID: session.id, intentType: "echo", status: .accepted, idempotencyKey: "key-1", payload: "{}",
                            createdAt: now, updatedAt: now))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let inserted = outcomes.compactMap { if case .inserted(let record) = $0 { record } else { nil } }
        #expect(inserted.count == 1)
        #expect(outcomes.allSatisfy { if case .existing(let record) = $0 { record.id == inserted.first?.id } else { true } })
        try await state.updateExecution(id: inserted[0].id, status: .completed, result: "{\"ok\":true}", error: nil, now: now + 1)
        let stored = try #require(try await state.execution(id: inserted[0].id))
        #expect(stored.status == .completed && stored.result == "{\"ok\":true}" && stored.updatedAt == now + 1)
    }

    @Test("a username is unique per tenant; disabling sets the not-before and revokes the refresh tokens; enabling keeps the not-before", arguments: StoreKind.available)
    func accounts(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let alice = UserRecord(id: "usr_1", tenantID: "acme", username: "alice", passwordHash: "hash", createdAt: now)
        try await state.insertUser(alice)
        try await state.insertUser(UserRecord(id: "usr_2", tenantID: "other", username: "alice", passwordHash: "hash", createdAt: now))
        await #expect { try await state.insertUser(UserRecord(id: "usr_3", tenantID: "acme", username: "alice", passwordHash: "x", createdAt: now)) } throws: {
            ($0 as? StateSurfaceError)?.code == .conflict
        }
        #expect(try await state.users().map(\.id) == ["usr_1", "usr_2"])
        try await state.insertRefreshToken(RefreshTokenRecord(id: "rt_1", tokenHash: "h1", familyID: "f1", sessionID: "s1", userID: "usr_1", tenantID: "acme", createdAt: now, expiresAt: now + 600))
        let disabled = try #require(try await state.disableUser(tenantID: "acme", username: "alice", now: now + 10))
        #expect(disabled.disabled && disabled.tokensNotBefore == now + 10)
        #expect(try await state.refreshToken(hash: "h1")?.revokedAt == now + 10)
        #expect(try await state.accountCutoffs(since: now) == [AccountCutoff(userID: "usr_1", tenantID: "acme", notBefore: now + 10, cause: .disabled)])
        let enabled = try #require(try await state.enableUser(tenantID: "acme", username: "alice"))
        #expect(!enabled.disabled && enabled.tokensNotBefore == now + 10)
        #expect(try await state.disableUser(tenantID: "acme", username: "nobody", now: now) == nil)
        #expect(try await state.user(id: "usr_2", tenantID: "other")?.username == "alice")
    }

    @Test("a new password replaces the hash and cuts the account off without disabling it; a deleted account leaves a tombstone that keeps its not-before, frees its username and is not listed", arguments: StoreKind.available)
    func passwordAndDeletion(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        try await state.insertUser(UserRecord(id: "usr_1", tenantID: "acme", username: "alice", passwordHash: "old", createdAt: now))
        try await state.insertRefreshToken(RefreshTokenRecord(id: "rt_1", tokenHash: "h1", familyID: "f1", sessionID: "s1", userID: "usr_1", tenantID: "acme", createdAt: now, expiresAt: now + 600))
        let changed = try #require(try await state.setUserPassword(tenantID: "acme", username: "alice", passwordHash: "new", now: now + 5))
        #expect(changed.passwordHash == "new" && !changed.disabled && changed.tokensNotBefore == now + 5)
        #expect(try await state.refreshToken(hash: "h1")?.revokedAt == now + 5)
        #expect(try await state.accountCutoffs(since: now) == [AccountCutoff(userID: "usr_1", tenantID: "acme", notBefore: now + 5, cause: .passwordChanged)])
        #expect(try await state.setUserPassword(tenantID: "acme", username: "nobody", passwordHash: "x", now: now) == nil)

        let deleted = try #require(try await state.deleteUser(tenantID: "acme", username: "alice", now: now + 9))
        #expect(deleted.id == "usr_1")
        #expect(try await state.user(tenantID: "acme", username: "alice") == nil, "the username is free")
        #expect(try await state.users().isEmpty, "a tombstone is not listed")
        let tombstone = try #require(try await state.user(id: "usr_1", tenantID: "acme"))
        #expect(tombstone.disabled && tombstone.passwordHash == "!" && tombstone.username == "deleted:usr_1")
        #expect(try await state.accountCutoffs(since: now) == [AccountCutoff(userID: "usr_1", tenantID: "acme", notBefore: now + 9, cause: .deleted)], "its tokens stay refused after a restart")
        try await state.insertUser(UserRecord(id: "usr_2", tenantID: "acme", username: "alice", passwordHash: "h", createdAt: now))
        #expect(try await state.users().map(\.id) == ["usr_2"], "a new alice is another user")
        #expect(try await state.deleteUser(tenantID: "acme", username: "nobody", now: now) == nil)
        let causes = try await state.accessChanges(after: 0, limit: 100).compactMap {
            if case .accountCutOff(let cutoff) = $0.change { cutoff.cause } else { nil }
        }
        #expect(causes == [.passwordChanged, .deleted], "the feed says why each cut-off happened (the sockets' close reason)")
    }

    @Test("an account's groups are stored sorted and read back; adding changes only them; taking one away cuts the account off as groups changed (refresh tokens revoked, the feed and the cut-offs say so) and keeps it enabled; a later password change says so instead", arguments: StoreKind.available)
    func accountGroups(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        try await state.insertUser(UserRecord(id: "usr_1", tenantID: "acme", username: "alice", passwordHash: "h", createdAt: now, groups: ["admins", "staff"]))
        #expect(try await state.user(tenantID: "acme", username: "alice")?.groups == ["admins", "staff"])
        try await state.insertRefreshToken(RefreshTokenRecord(id: "rt_1", tokenHash: "h1", familyID: "f1", sessionID: "s1", userID: "usr_1", tenantID: "acme", createdAt: now, expiresAt: now + 600))
        let added = try #require(try await state.setUserGroups(tenantID: "acme", username: "alice", groups: ["admins", "oncall", "staff"], cuttingOff: false, now: now + 1))
        #expect(added.groups == ["admins", "oncall", "staff"] && added.tokensNotBefore == 0)
        #expect(try await state.refreshToken(hash: "h1")?.revokedAt == nil)
        #expect(try await state.accountCutoffs(since: 0).isEmpty)
        let removed = try #require(try await state.setUserGroups(tenantID: "acme", username: "alice", groups: ["oncall"], cuttingOff: true, now: now + 2))
        #expect(removed.groups == ["oncall"] && !removed.disabled && removed.tokensNotBefore == now + 2)
        #expect(try await state.refreshToken(hash: "h1")?.revokedAt == now + 2)
        #expect(try await state.accountCutoffs(since: now) == [AccountCutoff(userID: "usr_1", tenantID: "acme", notBefore: now + 2, cause: .groupsChanged)])
        #expect(try await state.setUserGroups(tenantID: "acme", username: "nobody", groups: [], cuttingOff: true, now: now) == nil)
        _ = try await state.setUserPassword(tenantID: "acme", username: "alice", passwordHash: "new", now: now + 3)
        #expect(try await state.accountCutoffs(since: now).map(\.cause) == [.passwordChanged], "the last cut-off's cause")
        let causes = try await state.accessChanges(after: 0, limit: 100).compactMap {
            if case .accountCutOff(let cutoff) = $0.change { cutoff.cause } else { nil }
        }
        #expect(causes == [.groupsChanged, .passwordChanged])
    }

    @Test("twenty concurrent rotations of one refresh token: exactly one rotates; the spent token's reuse revokes the family", arguments: StoreKind.available)
    func rotation(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        try await state.insertRefreshToken(RefreshTokenRecord(id: "rt_0", tokenHash: "h0", familyID: "fam", sessionID: "s1", userID: "u", tenantID: "t", createdAt: now, expiresAt: now + 600))
        let outcomes = try await withThrowingTaskGroup(of: RefreshRotationOutcome.self) { group in
            for index in 1...20 {
                group.addTask {
                    try await state.rotateRefreshToken(
                        tokenHash: "h0",
                        next: RefreshTokenRecord(id: "rt_\(index)", tokenHash: "h\(index)", familyID: "", sessionID: "", userID: "", tenantID: "", createdAt: now, expiresAt: now + 600),
                        now: now)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let rotated = outcomes.compactMap { if case .rotated(_, let next) = $0 { next } else { nil } }
        #expect(rotated.count == 1)
        #expect(rotated.first?.familyID == "fam" && rotated.first?.sessionID == "s1")
        // The losers presented a spent token: reuse (or, after the family's revocation, revoked).
        #expect(outcomes.allSatisfy { if case .rotated = $0 { true } else if case .reused = $0 { true } else { $0 == .revoked } })
        #expect(try await state.refreshToken(hash: rotated[0].tokenHash)?.revokedAt != nil, "the reuse revoked the successor too")
        let fresh = RefreshTokenRecord(id: "rt_x", tokenHash: "hx", familyID: "", sessionID: "", userID: "", tenantID: "", createdAt: now, expiresAt: now + 600)
        #expect(try await state.rotateRefreshToken(tokenHash: "nope", next: fresh, now: now) == .unknown)
        try await state.insertRefreshToken(RefreshTokenRecord(id: "rt_old", tokenHash: "hold", familyID: "f2", sessionID: "s2", userID: "u", tenantID: "t", createdAt: now - 900, expiresAt: now - 1))
        #expect(try await state.rotateRefreshToken(tokenHash: "hold", next: fresh, now: now) == .expired)
        #expect(try await state.revokeRefreshTokens(sessionID: "s2", now: now) == 1)
    }

    @Test("a refresh token presented again revokes, in the same step, the access tokens recorded for its family: the thief who rotated first keeps none", arguments: StoreKind.available)
    func reuseRevokesTheFamilysAccessTokens(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        let session = SessionRecord(id: try SessionID.generate(), state: .authenticated, userID: "usr_1", tenantID: "acme", createdAt: now, lastSeenAt: now, expiresAt: now + 600)
        try await state.insertSession(session, maximumLiveForOwner: nil)
        try await state.insertOAuthFamily(
            OAuthFamilyRecord(
                familyID: "fam-r", clientID: "agent", resource: "https://a.example/mcp", scope: "tools", userID: "usr_1", tenantID: "acme", sessionID: session.id,
                claims: "{}", createdAt: now))
        try await state.insertRefreshToken(
            RefreshTokenRecord(id: "rt_r0", tokenHash: "hr0", familyID: "fam-r", sessionID: session.id, userID: "usr_1", tenantID: "acme", createdAt: now, expiresAt: now + 600))
        let next = RefreshTokenRecord(id: "rt_r1", tokenHash: "hr1", familyID: "", sessionID: "", userID: "", tenantID: "", createdAt: now, expiresAt: now + 600)
        guard case .rotated = try await state.rotateRefreshToken(tokenHash: "hr0", next: next, now: now) else {
            Issue.record("the first rotation did not rotate")
            return
        }
        // The thief's access token, recorded with the family as the authorization server records it.
        #expect(try await state.recordOAuthAccessToken(tokenID: "at_thief", familyID: "fam-r", sessionID: session.id, expiresAt: now + 600, now: now))
        #expect(try await !state.isTokenIDRevoked("at_thief"))
        let again = RefreshTokenRecord(id: "rt_r2", tokenHash: "hr2", familyID: "", sessionID: "", userID: "", tenantID: "", createdAt: now, expiresAt: now + 600)
        guard case .reused = try await state.rotateRefreshToken(tokenHash: "hr0", next: again, now: now + 1) else {
            Issue.record("the second presentation was not reuse")
            return
        }
        #expect(try await state.isTokenIDRevoked("at_thief"), "the family's access token is revoked with it")
        #expect(try await state.refreshToken(hash: "hr1")?.revokedAt != nil, "and the thief's refresh token")
        #expect(try await !state.recordOAuthAccessToken(tokenID: "at_late", familyID: "fam-r", sessionID: session.id, expiresAt: now + 600, now: now + 2), "nothing more is issued for it")
    }

    @Test("a revoked token id is recorded once, listed until its token expires, then swept", arguments: StoreKind.available)
    func revokedTokenIDs(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        try await state.revokeTokenID("jti-1", expiresAt: now + 60, now: now)
        try await state.revokeTokenID("jti-1", expiresAt: now + 60, now: now + 1)
        try await state.revokeTokenID("jti-2", expiresAt: now + 5, now: now)
        #expect(try await state.isTokenIDRevoked("jti-1"))
        #expect(try await !state.isTokenIDRevoked("jti-3"))
        #expect(try await state.revokedTokenIDs(revokedSince: now, now: now).map(\.jti).sorted() == ["jti-1", "jti-2"])
        #expect(try await state.revokedTokenIDs(revokedSince: now, now: now + 10).map(\.jti) == ["jti-1"])
        #expect(try await state.deleteExpiredCredentials(before: now + 10) == 1)
        #expect(try await !state.isTokenIDRevoked("jti-2"))
    }

    @Test("opening again applies no schema step; the store's name carries no credential", arguments: StoreKind.available)
    func migrations(kind: StoreKind) async throws {
        let store = try await TestStore(kind)
        let state = try await store.open()
        #expect(state.name == store.configuration.storeName)
        let named = try PostgresSettings(url: "postgres://gate:not-a-real-secret@db.internal:6432/auth")
        #expect(named.name == "postgresql://db.internal:6432/auth")
        #expect(named.tls == .verifyFull, "TLS is verified by default beyond loopback")
        let report = try await StateStores.migrate(store.configuration)
        #expect(report.appliedNow.isEmpty)
        #expect(report.applied.count == 17 && report.applied.last?.hasPrefix("v17: a URL elicitation per MCP client") == true)
    }

    @Test("a provider's user is recorded at each sign-in: the names replaced, the first sign-in kept; listed the most recent first; found by id, subject, username or email in any case, never by part of one", arguments: StoreKind.available)
    func providerUsers(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        #expect(try await state.providerUsers().isEmpty)
        let ann = ProviderUserRecord(
            userID: "ext_ann", issuer: "https://idp.example.test", subject: "248289761001", tenantID: "acme", email: "Ann@Example.com", username: "ann",
            name: "Ann Lée", firstSeenAt: now, lastSeenAt: now)
        try await state.recordProviderUser(ann)
        let bob = ProviderUserRecord(
            userID: "ext_bob", issuer: "https://idp.example.test", subject: "99", tenantID: "acme", email: nil, username: nil, name: nil, firstSeenAt: now + 5,
            lastSeenAt: now + 5)
        try await state.recordProviderUser(bob)
        var renamed = ann
        (renamed.email, renamed.username, renamed.firstSeenAt, renamed.lastSeenAt) = ("ann.lee@example.com", "ann.lee", now + 10, now + 10)
        try await state.recordProviderUser(renamed)
        let all = try await state.providerUsers()
        #expect(all.map(\.userID) == ["ext_ann", "ext_bob"], "the most recently seen first")
        #expect(all.first?.email == "ann.lee@example.com" && all.first?.username == "ann.lee" && all.first?.name == "Ann Lée")
        #expect(all.first?.firstSeenAt == now && all.first?.lastSeenAt == now + 10, "the first sign-in is kept")
        for text in ["ext_ann", "248289761001", "ann.lee", "ANN.LEE@example.COM"] {
            #expect(try await state.providerUsers(matching: text).map(\.userID) == ["ext_ann"], "\(text)")
        }
        for text in ["ann", "Ann@Example.com", "2482", "example.com", "%", "_", ""] {
            #expect(try await state.providerUsers(matching: text).isEmpty, "\(text)")
        }
        #expect(try await state.providerUsers(matching: "99").map(\.userID) == ["ext_bob"])
    }

    @Test("an access token the authorization server issued is revoked (a revoked_tokens row and a tokenRevoked change) when its family is revoked, its consent withdrawn, its client removed or its session ended; an expired one is only forgotten", arguments: StoreKind.available)
    func oauthAccessTokensEndWithTheirGrant(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let session = try anonymous()
        try await state.insertSession(session, maximumLiveForOwner: nil)
        let other = try anonymous()
        try await state.insertSession(other, maximumLiveForOwner: nil)
        let start = try await state.latestAccessChangeVersion()
        func family(_ id: String, client: String, sessionID: String) async throws {
            try await state.insertOAuthFamily(
                OAuthFamilyRecord(
                    familyID: id, clientID: client, resource: "https://a.example/mcp", scope: "tools", userID: "usr_1", tenantID: "acme", sessionID: sessionID, claims: "{}",
                    createdAt: now))
        }
        for (index, id) in ["fam-1", "fam-2", "fam-3", "fam-4", "fam-5"].enumerated() {
            let sessionID = id == "fam-4" ? session.id : other.id
            try await family(id, client: "c\(index + 1)", sessionID: sessionID)
            try await state.insertRefreshToken(
                RefreshTokenRecord(id: "rt-\(id)", tokenHash: "h-\(id)", familyID: id, sessionID: sessionID, userID: "usr_1", tenantID: "acme", createdAt: now, expiresAt: now + 600))
        }
        for (token, family) in [("at-1", "fam-1"), ("at-2", "fam-2"), ("at-3", "fam-3"), ("at-4", "fam-4")] {
            let recorded = try await state.recordOAuthAccessToken(
                tokenID: token, familyID: family, sessionID: family == "fam-4" ? session.id : other.id, expiresAt: now + 600, now: now)
            #expect(recorded, "\(token)")
        }
        #expect(try await state.recordOAuthAccessToken(tokenID: "at-old", familyID: "fam-1", sessionID: other.id, expiresAt: now - 1, now: now))
        // Nothing is recorded (and no token may be issued) for a session that ended or a family without a live refresh token.
        _ = try await state.revokeRefreshFamily("fam-5", now: now)
        #expect(try await state.recordOAuthAccessToken(tokenID: "at-5", familyID: "fam-5", sessionID: other.id, expiresAt: now + 600, now: now) == false)
        #expect(try await state.recordOAuthAccessToken(tokenID: "at-6", familyID: "fam-1", sessionID: "ses_unknown", expiresAt: now + 600, now: now) == false)
        try await state.upsertOAuthGrant(
            OAuthGrantRecord(userID: "usr_1", tenantID: "acme", clientID: "c2", clientName: "C2", resource: "https://a.example/mcp", scope: "tools", createdAt: now, updatedAt: now))

        _ = try await state.revokeRefreshFamily("fam-1", now: now)
        let revokedNow = { (jti: String) async throws -> Bool in try await state.isTokenIDRevoked(jti) }
        #expect(try await revokedNow("at-1"))
        let (old, second) = (try await revokedNow("at-old"), try await revokedNow("at-2"))
        #expect(!old && !second, "an expired token is forgotten, another family's kept")
        _ = try await state.deleteOAuthGrant(userID: "usr_1", tenantID: "acme", clientID: "c2", resource: "https://a.example/mcp", now: now)
        #expect(try await revokedNow("at-2"))
        #expect(try await revokedNow("at-3") == false)
        _ = try await state.deleteOAuthClient(id: "c3", now: now)
        #expect(try await revokedNow("at-3"))
        #expect(try await revokedNow("at-4") == false)
        #expect(try await state.revokeSession(id: session.id, now: now))
        #expect(try await state.isTokenIDRevoked("at-4"))
        let revoked = try await state.accessChanges(after: start, limit: 100).compactMap { if case .tokenRevoked(let jti, _) = $0.change { jti } else { nil } }
        #expect(revoked == ["at-1", "at-2", "at-3", "at-4"], "every instance hears of each, in order")
        // Revoking again finds nothing left to revoke.
        _ = try await state.revokeRefreshFamily("fam-1", now: now)
        #expect(try await state.accessChanges(after: start, limit: 100).count == revoked.count + 1, "only the session's end was added")
    }

    @Test("an identity assertion grant's access token is recorded for a family without session or refresh token, only while its grant stands and its provider user is not disabled (never for an unknown family), and revoked with its grant; a grant made by an assertion is marked so until the person consents; an assertion's id is new once until it expires", arguments: StoreKind.available)
    func assertionGrantTokens(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        try await state.insertOAuthFamily(
            OAuthFamilyRecord(
                familyID: "fam-jag", clientID: "ops", resource: "https://a.example/mcp", scope: "tools", userID: "ext_1", tenantID: "acme", sessionID: "", claims: "{}",
                createdAt: now))
        // Not while the grant is missing, nor for a person who is no provider user or is disabled.
        #expect(try await state.recordAssertionAccessToken(tokenID: "at-jag", familyID: "fam-jag", expiresAt: now + 600) == false)
        try await state.upsertOAuthGrant(
            OAuthGrantRecord(
                userID: "ext_1", tenantID: "acme", clientID: "ops", clientName: "Ops", resource: "https://a.example/mcp", scope: "tools", createdAt: now, updatedAt: now,
                byAssertion: true))
        #expect(try await state.recordAssertionAccessToken(tokenID: "at-jag", familyID: "fam-jag", expiresAt: now + 600) == false)
        try await state.recordProviderUser(
            ProviderUserRecord(userID: "ext_1", issuer: "https://idp.example", subject: "s1", tenantID: "acme", email: nil, username: nil, name: nil, firstSeenAt: now, lastSeenAt: now))
        #expect(try await state.recordAssertionAccessToken(tokenID: "at-jag", familyID: "fam-jag", expiresAt: now + 600))
        #expect(try await state.recordAssertionAccessToken(tokenID: "at-none", familyID: "fam-unknown", expiresAt: now + 600) == false)
        #expect(try await state.isTokenIDRevoked("at-jag") == false)
        try await state.upsertOAuthGrant(
            OAuthGrantRecord(
                userID: "ext_1", tenantID: "acme", clientID: "ops", clientName: "Ops", resource: "https://b.example/mcp", scope: "tools", createdAt: now, updatedAt: now,
                byAssertion: true))
        #expect(try await state.oauthGrant(userID: "ext_1", tenantID: "acme", clientID: "ops", resource: "https://b.example/mcp")?.byAssertion == true)
        try await state.upsertOAuthGrant(
            OAuthGrantRecord(userID: "ext_1", tenantID: "acme", clientID: "ops", clientName: "Ops", resource: "https://b.example/mcp", scope: "tools", createdAt: now, updatedAt: now))
        #expect(try await state.oauthGrant(userID: "ext_1", tenantID: "acme", clientID: "ops", resource: "https://b.example/mcp")?.byAssertion == false, "a consent makes it the person's")
        _ = try await state.deleteOAuthGrant(userID: "ext_1", tenantID: "acme", clientID: "ops", resource: "https://a.example/mcp", now: now)
        #expect(try await state.isTokenIDRevoked("at-jag"))
        _ = try await state.cutOffProviderUser(id: "ext_1", now: now, forgetNames: false)
        try await state.upsertOAuthGrant(
            OAuthGrantRecord(userID: "ext_1", tenantID: "acme", clientID: "ops", clientName: "Ops", resource: "https://a.example/mcp", scope: "tools", createdAt: now, updatedAt: now))
        #expect(try await state.recordAssertionAccessToken(tokenID: "at-late", familyID: "fam-jag", expiresAt: now + 600) == false, "the person is disabled")
        #expect(try await state.rememberPresentedAssertion(id: "jag-1", expiresAt: now + 60, now: now))
        #expect(try await state.rememberPresentedAssertion(id: "jag-1", expiresAt: now + 60, now: now + 1) == false, "a replay")
        #expect(try await state.rememberPresentedAssertion(id: "jag-1", expiresAt: now + 200, now: now + 61), "expired, it may be taken again")
    }

    @Test("an authorization code is redeemed once (of two exchanges, one wins; the second sees what the first was given); an expired one is unknown; a consent is widened in place and its removal revokes its families' refresh tokens", arguments: StoreKind.available)
    func authorizationServerState(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let code = OAuthCodeRecord(
            codeHash: "code-1", clientID: "ops-cli", redirectURI: "http://127.0.0.1/cb", codeChallenge: "ch", resource: "https://a.example/mcp", scope: "tools",
            userID: "usr_1", tenantID: "acme", sessionID: "ses_1", claims: "{}", createdAt: now, expiresAt: now + 60)
        try await state.insertOAuthCode(code)
        var expired = code
        (expired.codeHash, expired.expiresAt) = ("code-2", now - 1)
        try await state.insertOAuthCode(expired)
        async let first = state.redeemOAuthCode(codeHash: "code-1", familyID: "fam-a", accessTokenID: "at-a", now: now)
        async let second = state.redeemOAuthCode(codeHash: "code-1", familyID: "fam-b", accessTokenID: "at-b", now: now)
        let outcomes = try await [first, second]
        let redeemed = outcomes.compactMap { if case .redeemed(let record) = $0 { record } else { nil } }
        let reused = outcomes.compactMap { if case .reused(let record) = $0 { record } else { nil } }
        #expect(redeemed.count == 1 && reused.count == 1, "\(outcomes)")
        #expect(reused.first?.familyID == redeemed.first?.familyID && reused.first?.accessTokenID == redeemed.first?.accessTokenID && reused.first?.usedAt == now)
        #expect(try await state.oauthCodeReused(codeHash: "code-1"), "the second use is marked, for an exchange still issuing to see")
        #expect(try await state.oauthCodeReused(codeHash: "code-2") == false)
        #expect(try await state.redeemOAuthCode(codeHash: "code-2", familyID: "f", accessTokenID: "a", now: now) == .unknown)
        #expect(try await state.redeemOAuthCode(codeHash: "nothing", familyID: "f", accessTokenID: "a", now: now) == .unknown)

        let grant = OAuthGrantRecord(userID: "usr_1", tenantID: "acme", clientID: "ops-cli", clientName: "Ops", resource: "https://a.example/mcp", scope: "tools", createdAt: now, updatedAt: now)
        try await state.upsertOAuthGrant(grant)
        var widened = grant
        (widened.scope, widened.updatedAt, widened.createdAt) = ("tools admin", now + 5, now + 5)
        try await state.upsertOAuthGrant(widened)
        let kept = try await state.oauthGrant(userID: "usr_1", tenantID: "acme", clientID: "ops-cli", resource: "https://a.example/mcp")
        #expect(kept?.scope == "tools admin" && kept?.createdAt == now && kept?.updatedAt == now + 5)
        #expect(try await state.oauthGrant(userID: "usr_1", tenantID: "other", clientID: "ops-cli", resource: "https://a.example/mcp") == nil)
        let (mine, others, all) = (try await state.oauthGrants(userID: "usr_1"), try await state.oauthGrants(userID: "usr_2"), try await state.oauthGrants(userID: nil))
        #expect(mine.count == 1 && others.isEmpty && all.count == 1)

        let family = OAuthFamilyRecord(
            familyID: "fam-a", clientID: "ops-cli", resource: "https://a.example/mcp", scope: "tools", userID: "usr_1", tenantID: "acme", sessionID: "ses_1", claims: "{}",
            createdAt: now)
        try await state.insertOAuthFamily(family)
        let (found, missing) = (try await state.oauthFamily(id: "fam-a"), try await state.oauthFamily(id: "fam-x"))
        #expect(found == family && missing == nil)
        try await state.insertRefreshToken(
            RefreshTokenRecord(id: "rtk_a", tokenHash: "ha", familyID: "fam-a", sessionID: "ses_1", userID: "usr_1", tenantID: "acme", createdAt: now, expiresAt: now + 600))
        try await state.insertRefreshToken(
            RefreshTokenRecord(id: "rtk_o", tokenHash: "ho", familyID: "fam-other", sessionID: "ses_1", userID: "usr_1", tenantID: "acme", createdAt: now, expiresAt: now + 600))
        #expect(try await state.deleteOAuthGrant(userID: "usr_1", tenantID: "acme", clientID: "ops-cli", resource: "https://a.example/mcp", now: now) == 1)
        #expect(try await state.refreshToken(hash: "ha")?.revokedAt == now, "the grant's family is revoked")
        #expect(try await state.refreshToken(hash: "ho")?.revokedAt == nil, "another family is not")
        let (firstRevoke, secondRevoke) = (try await state.revokeRefreshFamily("fam-other", now: now), try await state.revokeRefreshFamily("fam-other", now: now))
        #expect(firstRevoke == 1 && secondRevoke == 0)
        #expect(try await state.deleteExpiredOAuthCodes(before: now) == 1)
        // An ended family is forgotten once over an hour old; a live one is kept.
        let live = OAuthFamilyRecord(
            familyID: "fam-live", clientID: "ops-cli", resource: "https://a.example/mcp", scope: "tools", userID: "usr_1", tenantID: "acme", sessionID: "ses_1", claims: "{}",
            createdAt: now)
        try await state.insertOAuthFamily(live)
        try await state.insertRefreshToken(
            RefreshTokenRecord(id: "rtk_l", tokenHash: "hl", familyID: "fam-live", sessionID: "ses_1", userID: "usr_1", tenantID: "acme", createdAt: now, expiresAt: now + 86_400))
        #expect(try await state.oauthFamily(id: "fam-a") != nil, "an hour's grace")
        #expect(try await state.deleteExpiredOAuthCodes(before: now + 7_200) >= 1)
        let (ended, stillLive) = (try await state.oauthFamily(id: "fam-a"), try await state.oauthFamily(id: "fam-live"))
        #expect(ended == nil && stillLive == live)
    }

    @Test("revoked tokens, disabled accounts and revoked sessions enter the access-change feed once each, in order", arguments: StoreKind.available)
    func accessChangeFeed(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let start = try await state.latestAccessChangeVersion()
        let owned = SessionRecord(id: try SessionID.generate(), state: .authenticated, userID: "usr_1", tenantID: "acme", createdAt: now, lastSeenAt: now, expiresAt: now + 600)
        let other = try anonymous()
        try await state.insertSession(owned, maximumLiveForOwner: nil)
        try await state.insertSession(other, maximumLiveForOwner: nil)
        try await state.insertUser(UserRecord(id: "usr_1", tenantID: "acme", username: "alice", passwordHash: "hash", createdAt: now))
        try await state.revokeTokenID("jti-1", expiresAt: now + 60, now: now)
        try await state.revokeTokenID("jti-1", expiresAt: now + 60, now: now)  // again: no second change
        _ = try await state.revokeSession(id: other.id, now: now)
        _ = try await state.revokeSession(id: other.id, now: now)  // already revoked: no second change
        _ = try await state.disableUser(tenantID: "acme", username: "alice", now: now + 1)
        _ = try await state.revokeSessions(userID: "usr_1", tenantID: "acme", now: now + 1)
        let changes = try await state.accessChanges(after: start, limit: 100)
        #expect(changes.map(\.change) == [
            .tokenRevoked(jti: "jti-1", expiresAt: now + 60), .sessionEnded(sessionID: other.id),
            .accountCutOff(AccountCutoff(userID: "usr_1", tenantID: "acme", notBefore: now + 1, cause: .disabled)), .sessionEnded(sessionID: owned.id),
        ])
        #expect(changes.map(\.version) == changes.map(\.version).sorted() && Set(changes.map(\.version)).count == 4)
        #expect(try await state.latestAccessChangeVersion() == changes.last?.version)
        #expect(try await state.accessChanges(after: changes[1].version, limit: 1).map(\.change) == [changes[2].change])
        // A kind a newer version writes is read as unknown, and read past: its version counts.
        try await state.recordAccessChange(.unknown(kind: "from_a_newer_version"), now: now)
        let newer = try await state.accessChanges(after: changes[3].version, limit: 10)
        #expect(newer.map(\.change) == [.unknown(kind: "from_a_newer_version")])
        #expect(newer.first?.version == (try await state.latestAccessChangeVersion()))
    }

    @Test("on PostgreSQL a change committed through one instance wakes another instance's feed at once")
    func accessChangeSignal() async throws {
        guard TestPostgres.enabled else { return }
        let store = try await TestStore(.postgres)
        let writer = try await store.open(), reader = try await store.open()
        let signals = try #require(reader.accessChangeSignals())
        var iterator = signals.makeAsyncIterator()
        _ = await iterator.next()  // listening (the catch-up wake)
        try await writer.revokeTokenID("jti-signal", expiresAt: now + 60, now: now)
        // From the commit's return (the signal may already be waiting) to the wake.
        let committed = ContinuousClock.now
        let woke: Void? = await iterator.next()
        let elapsed = ContinuousClock.now - committed
        #expect(woke != nil)
        // Well under the 5-second poll; 2 s leaves room for a loaded two-core machine (1.4 s seen under the full suite).
        #expect(elapsed < .seconds(TimeBounds.seconds(2)), "woke \(elapsed) after the commit")
        #expect(try await reader.accessChanges(after: 0, limit: 10).map(\.change) == [.tokenRevoked(jti: "jti-signal", expiresAt: now + 60)])
        await writer.shutdown()
        await reader.shutdown()
    }

    @Test("on PostgreSQL change notifications have one connection of their own: with a pool of one, two listeners wake and queries still answer")
    func accessChangeListenerOutsideThePool() async throws {
        guard TestPostgres.enabled else { return }
        let store = try await TestStore(.postgres, poolSize: 1)
        let writer = try await store.open(), reader = try await store.open()
        let watcher = WakeCount(try #require(reader.accessChangeSignals()))
        let reloader = WakeCount(try #require(reader.accessChangeSignals()))
        #expect(await watcher.reach(1, within: 10), "the first listener is listening")
        #expect(await reloader.reach(1, within: 10), "the second listener is listening")
        #expect(try await reader.latestAccessChangeVersion() == 0, "the pool's one connection answers while both listen")
        try await writer.revokeTokenID("jti-pool-of-one", expiresAt: now + 60, now: now)
        let watcherWoke = await watcher.reach(2, within: 5), reloaderWoke = await reloader.reach(2, within: 5)
        #expect(watcherWoke && reloaderWoke, "both listeners woke for the commit")
        let database = try #require(store.configuration.postgres?.database)
        let listening = try await TestPostgres.shared().psql(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = '\(database)' AND application_name = 'portcullis-listen'")
        #expect(listening == "1", "one LISTEN connection for the reader's two listeners (the writer has none): \(listening)")
        await writer.shutdown()
        await reader.shutdown()
    }

    @Test("registrations nobody used are capped as a whole: of twenty racing past a limit of five exactly five are stored; one used (its expiry pushed back) or expired does not count", arguments: StoreKind.available)
    func unusedRegistrationsCapped(kind: StoreKind) async throws {
        let state = try await TestStore(kind).open()
        let now = self.now
        func record(_ id: String, at time: Double) -> OAuthClientRecord {
            OAuthClientRecord(clientID: id, name: "Agent", redirectURIs: #"["http://127.0.0.1/cb"]"#, createdAt: time, expiresAt: time + 600)
        }
        #expect(try await state.insertOAuthClient(record("dyn_used", at: now), unusedLimit: 5, now: now))
        try await state.extendOAuthClient(id: "dyn_used", expiresAt: now + 30 * 86_400)
        #expect(try await state.insertOAuthClient(record("dyn_expired", at: now - 700), unusedLimit: 5, now: now - 700))
        let stored = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<20 { group.addTask { try await state.insertOAuthClient(record("dyn_\(index)", at: now), unusedLimit: 5, now: now) } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(stored == 5)
        #expect(try await state.oauthClients(now: now).count == 6, "five unused and the used one are live")
        #expect(try await !state.insertOAuthClient(record("dyn_more", at: now), unusedLimit: 5, now: now))
        #expect(try await state.oauthClient(id: "dyn_more", now: now) == nil, "a refused registration stores nothing")
        // Ten minutes on, they have expired and no longer count.
        #expect(try await state.insertOAuthClient(record("dyn_later", at: now + 601), unusedLimit: 5, now: now + 601))
        await state.shutdown()
    }
}
