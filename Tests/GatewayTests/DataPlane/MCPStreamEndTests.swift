import AsyncHTTPClient
import DataPlane
import Foundation
import Gateway
import JOSE
import NIOCore
import NIOHTTP1
import PortcullisTestSupport
import SecurityGuard
import StateSurface
import Synchronization
import Testing

/// A stream held by a client, read in the background: what came, and how and when it ended.
final class HeldStream: Sendable {
    final class Record: Sendable {
        let state = Mutex<(text: String, ended: ContinuousClock.Instant?, failed: Bool)>(("", nil, false))
    }

    private let record = Record()
    let task: Task<Void, Never>

    init(_ request: HTTPClientRequest) {
        let record = self.record
        task = Task {
            do {
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
                for try await piece in response.body { record.state.withLock { $0.text += String(buffer: piece) } }
            } catch {
                record.state.withLock { $0.failed = true }
            }
            record.state.withLock { $0.ended = .now }
        }
    }

    var text: String { record.state.withLock { $0.text } }
    var failed: Bool { record.state.withLock { $0.failed } }
    var ended: ContinuousClock.Instant? { record.state.withLock { $0.ended } }

    /// Waits until `condition` holds or `seconds` pass.
    func wait(seconds: Double, until condition: (HeldStream) -> Bool) async {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while !condition(self), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
    }
}

@Suite("MCP streams end the moment access ends")
struct MCPStreamEndTests {
    static let resource = MCPRouteTests.publicURL + "/mcp/s"

    /// A token as the authorization server issues one for `sessionID` (recorded with its family and session).
    static func token(_ fixture: GatewayFixture, sessionID: String, family: String, lifetime: Double = 300) async throws -> (token: String, id: String) {
        let tokenID = "at_" + (try SecureRandom.identifier(bytes: 16))
        let now = Date().timeIntervalSince1970
        try await fixture.state.insertOAuthFamily(
            OAuthFamilyRecord(
                familyID: family, clientID: "agent", resource: resource, scope: "", userID: try await Self.userID(fixture), tenantID: "default", sessionID: sessionID,
                claims: "{}", createdAt: now))
        try await fixture.state.insertRefreshToken(
            RefreshTokenRecord(
                id: "rt_" + family, tokenHash: "h_" + family, familyID: family, sessionID: sessionID, userID: try await Self.userID(fixture), tenantID: "default",
                createdAt: now, expiresAt: now + 3600))
        #expect(try await fixture.state.recordOAuthAccessToken(tokenID: tokenID, familyID: family, sessionID: sessionID, expiresAt: now + lifetime + 60, now: now))
        let issuer = AccessTokenIssuer(keys: fixture.keys, issuer: MCPRouteTests.publicURL, audience: resource, lifetime: lifetime)
        let token = try issuer.issue(subject: try await Self.userID(fixture), tenantID: "default", clientID: "agent", tokenID: tokenID).token
        fixture.remember(token)
        return (token, tokenID)
    }

    static func userID(_ fixture: GatewayFixture) async throws -> String {
        try #require(try await fixture.state.user(tenantID: "default", username: "alice")).id
    }

    static func hold(_ fixture: GatewayFixture, _ token: String, method: HTTPMethod = .POST, split: Bool = false) -> HeldStream {
        var request = HTTPClientRequest(url: fixture.baseURL + "/mcp/s" + (split ? "?split=1" : ""))
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer " + token)
        request.headers.add(name: "Accept", value: "application/json, text/event-stream")
        if method == .POST {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}"#))
        }
        return HeldStream(request)
    }

    func fixture() async throws -> (GatewayFixture, BackgroundServer) {
        let upstream = try await EventStreamUpstream.start()
        let port = upstream.port
        let fixture = try await GatewayFixture { configuration in configuration.routes = [try! MCPRouteTests.mcpRoute("/mcp/s", upstream: port, base: "")] }
        try await fixture.addUser("alice")
        return (fixture, upstream)
    }

    /// Holds a stream, ends access with `end`, and checks the stream ended within a second,
    /// cleanly between two events, and that the next call is 401 pointing at the metadata.
    func expectEnded(_ fixture: GatewayFixture, _ token: String, split: Bool = false, method: HTTPMethod = .POST, _ cause: String, end: () async throws -> Void) async throws {
        let stream = Self.hold(fixture, token, method: method, split: split)
        await stream.wait(seconds: 3) { $0.text.contains("\"progress\":2") }
        #expect(stream.text.contains("\"progress\":2") && stream.ended == nil, "\(cause): \(stream.text) \(stream.failed)")
        let open = try await fixture.send(.GET, "/metrics", port: fixture.adminPort).raw
        #expect(open.contains("portcullis_mcp_open_streams 1"), "\(cause)")
        try await end()
        // Access has ended once the call that ends it has returned (its write committed); the
        // stream may end before that, never later than the contract's second after it. (From
        // before the call, a loaded two-core run read 1.005 s with the call's own time in it.)
        let revoked = ContinuousClock.now
        await stream.wait(seconds: TimeBounds.seconds(3)) { $0.ended != nil }
        let ended = try #require(stream.ended, "\(cause): the stream did not end")
        // The contract's second, stretched as every bound is under AddressSanitizer (TimeBounds).
        #expect(ended - revoked < .seconds(TimeBounds.seconds(1)), "\(cause): ended \(ended - revoked) after access ended")
        #expect(!stream.failed && stream.text.hasSuffix("}\n\n"), "\(cause): \(stream.failed ? "cut" : "ended") after \(stream.text.suffix(80))")
        let next = try await fixture.send(.POST, "/mcp/s", bearer: token, body: MCPRouteTests.ping)
        #expect(next.status == 401 && next.headers.first(name: "www-authenticate")?.contains("resource_metadata=") == true, "\(cause): \(next.raw)")
        let closed = try await fixture.send(.GET, "/metrics", port: fixture.adminPort).raw
        #expect(closed.contains("portcullis_mcp_open_streams 0"), "\(cause)")
    }

    @Test("signing out ends the agent's stream within a second, between two events (an event under way is finished first), and its token is refused next; a GET stream likewise")
    func signOut() async throws {
        let (fixture, upstream) = try await fixture()
        defer { Task { try? await fixture.stop(); try? await upstream.stop() } }
        for (split, method) in [(false, HTTPMethod.POST), (true, .POST), (false, .GET)] {
            let login = try await fixture.login("alice")
            let (token, _) = try await Self.token(fixture, sessionID: login.sessionID, family: "fam_signout\(split)\(method.rawValue)")
            try await expectEnded(fixture, token, split: split, method: method, "sign-out") {
                let out = try await fixture.send(.POST, "/api/auth/logout", bearer: login.accessToken, body: #"{"session_id":"\#(login.sessionID)"}"#)
                #expect(out.status == 204, "\(out.raw)")
            }
        }
    }

    @Test("a revoked refresh family, a withdrawn consent, a disabled account and the token's expiry each end the stream within a second; the token is refused next")
    func otherCauses() async throws {
        let (fixture, upstream) = try await fixture()
        defer { Task { try? await fixture.stop(); try? await upstream.stop() } }
        let now = { Date().timeIntervalSince1970 }
        let family = try await fixture.login("alice")
        let (familyToken, _) = try await Self.token(fixture, sessionID: family.sessionID, family: "fam_family")
        try await expectEnded(fixture, familyToken, "family revoked") { _ = try await fixture.state.revokeRefreshFamily("fam_family", now: now()) }

        let grant = try await fixture.login("alice")
        let (grantToken, _) = try await Self.token(fixture, sessionID: grant.sessionID, family: "fam_grant")
        try await expectEnded(fixture, grantToken, "consent withdrawn") {
            _ = try await fixture.state.deleteOAuthGrant(userID: try await Self.userID(fixture), tenantID: "default", clientID: "agent", resource: Self.resource, now: now())
        }

        let expiring = try await fixture.login("alice")
        let (shortToken, _) = try await Self.token(fixture, sessionID: expiring.sessionID, family: "fam_short", lifetime: 2)
        let stream = Self.hold(fixture, shortToken)
        await stream.wait(seconds: 4) { $0.ended != nil }
        #expect(stream.ended != nil && !stream.failed && stream.text.hasSuffix("}\n\n"), "expiry: \(stream.text.suffix(60))")

        let disabled = try await fixture.login("alice")
        let (disabledToken, _) = try await Self.token(fixture, sessionID: disabled.sessionID, family: "fam_disabled")
        try await expectEnded(fixture, disabledToken, "account disabled") {
            _ = try await fixture.state.disableUser(tenantID: "default", username: "alice", now: now())
        }
    }

    @Test(
        "ending access ends the work: the MCP server is sent notifications/cancelled for the request under way, with its Mcp-Session-Id and the gateway's assertion, and the request's upstream connection (HTTP/1.1) or stream (h2c, reset) closes, both within a second; a client of 2026-07-28 (a closed stream is its cancellation) gets no notification, the connection or stream closes all the same",
        .serialized, arguments: [false, true])
    func endingAccessCancelsUpstreamWork(http2: Bool) async throws {
        let seen = EventStreamUpstream.Seen()
        let upstream = try await EventStreamUpstream.start(seen: seen, http2: http2)
        let port = upstream.port
        let fixture = try await GatewayFixture { configuration in
            var route = try! MCPRouteTests.mcpRoute("/mcp/s", upstream: port, base: "")
            if http2 { route.upstreamProtocol = .h2c }
            configuration.routes = [route]
        }
        try await fixture.addUser("alice")
        defer { Task { try? await fixture.stop(); try? await upstream.stop() } }
        for (revision, notified) in [("2025-11-25", true), ("2026-07-28", false)] {
            let version = revision + (http2 ? " over h2c" : "")
            let login = try await fixture.login("alice")
            let (token, _) = try await Self.token(fixture, sessionID: login.sessionID, family: "fam_cancel_" + revision)
            var request = HTTPClientRequest(url: fixture.baseURL + "/mcp/s")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer " + token)
            request.headers.add(name: "Accept", value: "application/json, text/event-stream")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "Mcp-Session-Id", value: "mcp-session-" + revision)
            request.headers.add(name: "MCP-Protocol-Version", value: revision)
            if !notified {
                request.headers.add(name: "Mcp-Method", value: "tools/call")
                request.headers.add(name: "Mcp-Name", value: "slow")
            }
            request.body = .bytes(ByteBuffer(string: #"{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"slow"}}"#))
            let stream = HeldStream(request)
            await stream.wait(seconds: 3) { $0.text.contains("\"progress\":2") }
            #expect(stream.text.contains("\"progress\":2"), "\(version): the upstream's events did not come: \(stream.text) \(stream.failed)")
            let (cancellationsBefore, closedBefore) = (seen.cancellations.count, seen.closedStreams.count)
            let out = try await fixture.send(.POST, "/api/auth/logout", bearer: login.accessToken, body: #"{"session_id":"\#(login.sessionID)"}"#)
            #expect(out.status == 204, "\(out.raw)")
            let revoked = ContinuousClock.now
            let deadline = revoked + .seconds(TimeBounds.seconds(3))
            while seen.closedStreams.count == closedBefore || (notified && seen.cancellations.count == cancellationsBefore), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            let closed = try #require(seen.closedStreams.dropFirst(closedBefore).first, "\(version): the request's upstream connection was not closed")
            #expect(closed - revoked < .seconds(TimeBounds.seconds(1)), "\(version): closed \(closed - revoked) after access ended")
            // A notification sent wrongly would come on a connection of its own, after the close: give it time to.
            if !notified { try await Task.sleep(for: .milliseconds(500)) }
            let cancellations = Array(seen.cancellations.dropFirst(cancellationsBefore))
            if notified {
                let cancellation = try #require(cancellations.first, "\(version): no notifications/cancelled")
                #expect(cancellations.count == 1)
                #expect(cancellation.at - revoked < .seconds(TimeBounds.seconds(1)), "\(version): told \(cancellation.at - revoked) after access ended")
                let body = try StrictJSONReader().parseObject(Array(cancellation.body.utf8))
                #expect(body["method"] == "notifications/cancelled" && body["id"] == nil, "a notification: \(cancellation.body)")
                #expect(body["params"]?.objectValue?["requestId"] == "call-7", "the request's own id: \(cancellation.body)")
                #expect(cancellation.sessionID == "mcp-session-" + revision && cancellation.hasAssertion, "as the request went")
            } else {
                #expect(cancellations.isEmpty, "2026-07-28: the closed stream is the cancellation")
            }
        }
    }

    @Test("a refresh token used twice ends all its family gave: the thief who refreshed first loses their stream within a second, their access token next, and the refresh token they got")
    func refreshTokenReuse() async throws {
        let (fixture, upstream) = try await fixture()
        defer { Task { try? await fixture.stop(); try? await upstream.stop() } }
        let login = try await fixture.login("alice")
        let now = Date().timeIntervalSince1970
        let stolen = RefreshTokenService.oauthPrefix + (try SecureRandom.identifier(bytes: 32))
        fixture.remember(stolen)
        try await fixture.state.insertOAuthFamily(
            OAuthFamilyRecord(
                familyID: "fam_reuse", clientID: "agent", resource: Self.resource, scope: "", userID: try await Self.userID(fixture), tenantID: "default",
                sessionID: login.sessionID, claims: "{}", createdAt: now))
        try await fixture.state.insertRefreshToken(
            RefreshTokenRecord(
                id: "rt_fam_reuse", tokenHash: try RefreshTokenService.hash(stolen), familyID: "fam_reuse", sessionID: login.sessionID,
                userID: try await Self.userID(fixture), tenantID: "default", createdAt: now, expiresAt: now + 3600))
        let form = [("Content-Type", "application/x-www-form-urlencoded")]
        let refresh = { (token: String) in
            try await fixture.send(.POST, "/api/auth/oauth/token", headers: form, body: "grant_type=refresh_token&client_id=agent&refresh_token=" + token)
        }
        let thief = try await refresh(stolen)
        #expect(thief.status == 200, "\(thief.raw)")
        let thiefToken = try #require(thief["access_token"])
        let thiefRefresh = try #require(thief["refresh_token"])
        fixture.remember(thiefToken)
        fixture.remember(thiefRefresh)
        try await expectEnded(fixture, thiefToken, "refresh token reused") {
            let victim = try await refresh(stolen)
            #expect(victim.status == 400 && victim.error == "invalid_grant", "\(victim.raw)")
        }
        let again = try await refresh(thiefRefresh)
        #expect(again.status == 400 && again.error == "invalid_grant", "\(again.raw)")
    }
}
