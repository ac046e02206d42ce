import Foundation
import Gateway
import JOSE
import Testing

@Suite("Session-first flow through the gateway, the Runtime and SQLite")
struct SessionFirstFlowTests {
    @Test("anonymous session -> readable without auth -> login with it keeps the same session_id -> owner only")
    func sessionFirstFlow() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        try await fixture.addUser("alice", tenant: "other")

        let sessionID = try await fixture.createAnonymousSession()
        #expect(sessionID.hasPrefix("ses_") && sessionID.utf8.count == 26)
        let anonymousRead = try await fixture.send(.GET, "/api/session/\(sessionID)")
        #expect(anonymousRead.status == 200)
        #expect(anonymousRead["state"] == "anonymous")
        #expect(anonymousRead.json["user_id"] == .null)

        let alice = try await fixture.login("alice", sessionID: sessionID)
        #expect(alice.sessionID == sessionID)
        #expect(alice.accessToken != sessionID && !alice.accessToken.contains(sessionID))

        let owned = try await fixture.send(.GET, "/api/session/\(sessionID)", bearer: alice.accessToken)
        #expect(owned.status == 200)
        #expect(owned["state"] == "authenticated")
        #expect(owned["tenant_id"] == "default")
        #expect(owned.json["upgraded_at"]?.stringValue != nil)

        let noToken = try await fixture.send(.GET, "/api/session/\(sessionID)")
        #expect(noToken.status == 401)
        #expect(noToken.error == "token_missing")

        let bob = try await fixture.login("bob")
        #expect(bob.sessionID != sessionID)
        let asBob = try await fixture.send(.GET, "/api/session/\(sessionID)", bearer: bob.accessToken)
        #expect(asBob.status == 403)
        #expect(asBob.error == "session_forbidden")

        let otherTenant = try await fixture.login("alice", tenant: "other")
        let asOtherTenant = try await fixture.send(.GET, "/api/session/\(sessionID)", bearer: otherTenant.accessToken)
        #expect(asOtherTenant.status == 403)
        #expect(asOtherTenant.error == "session_forbidden")

        // Logging in again with the session one already owns reuses it.
        let again = try await fixture.login("alice", sessionID: sessionID)
        #expect(again.sessionID == sessionID)
        // Another user cannot take it over by logging in with its id.
        let takeover = try await fixture.loginAnswer("bob", password: "correct horse battery", sessionID: sessionID)
        #expect(takeover.status == 409)
        #expect(takeover.error == "session_conflict")
        try await fixture.stop()
    }

    @Test("login without a session_id creates a session owned by the user")
    func loginWithoutSession() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("carol")
        let login = try await fixture.login("carol")
        let read = try await fixture.send(.GET, "/api/session/\(login.sessionID)", bearer: login.accessToken)
        #expect(read.status == 200)
        #expect(read["state"] == "authenticated")
        try await fixture.stop()
    }

    @Test("PATCH /api/session/{id}/upgrade attaches an anonymous session to the caller; a second user gets 409")
    func explicitUpgrade() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        let alice = try await fixture.login("alice")
        let bob = try await fixture.login("bob")
        let sessionID = try await fixture.createAnonymousSession()
        let upgraded = try await fixture.send(.PATCH, "/api/session/\(sessionID)/upgrade", bearer: alice.accessToken)
        #expect(upgraded.status == 200)
        #expect(upgraded["session_id"] == sessionID)
        #expect(upgraded["state"] == "authenticated")
        let stolen = try await fixture.send(.PATCH, "/api/session/\(sessionID)/upgrade", bearer: bob.accessToken)
        #expect(stolen.status == 409)
        #expect(stolen.error == "session_conflict")
        let unauthenticated = try await fixture.send(.PATCH, "/api/session/\(sessionID)/upgrade")
        #expect(unauthenticated.status == 401)
        #expect(unauthenticated.error == "token_missing")
        try await fixture.stop()
    }

    @Test("POST /api/session/create makes a session owned by the caller; the contract caps sessions per user")
    func ownedSessionsAndContract() async throws {
        let fixture = try await GatewayFixture { $0.contract.maximumSessionsPerUser = 2 }
        try await fixture.addUser("alice")
        let alice = try await fixture.login("alice")  // session 1
        let second = try await fixture.post("/api/session/create", bearer: alice.accessToken, ["metadata": ["purpose": "test"]])
        #expect(second.status == 201)
        #expect(second["state"] == "authenticated")
        #expect(second.json["metadata"] == ["purpose": "test"])
        let third = try await fixture.post("/api/session/create", bearer: alice.accessToken)
        #expect(third.status == 429)
        #expect(third.error == "limit_reached")
        let unauthenticated = try await fixture.post("/api/session/create")
        #expect(unauthenticated.status == 401)
        try await fixture.stop()
    }

    @Test("two concurrent logins upgrading one anonymous session: one wins, the other gets 409 session_conflict")
    func concurrentLogins() async throws {
        let fixture = try await GatewayFixture()
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        for _ in 0..<3 {
            let sessionID = try await fixture.createAnonymousSession()
            async let first = fixture.loginAnswer("alice", password: "correct horse battery", sessionID: sessionID)
            async let second = fixture.loginAnswer("bob", password: "correct horse battery", sessionID: sessionID)
            let statuses = try await [first.status, second.status].sorted()
            #expect(statuses == [200, 409])
        }
        try await fixture.stop()
    }
}
