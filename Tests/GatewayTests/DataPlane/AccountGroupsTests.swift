import DataPlane
import Foundation
import Gateway
import JOSE
import SecurityGuard
import Testing
import TrafficCop

/// Groups of the gateway's own accounts (issue 65): `users add --group`, `users groups`, carried in
/// `groups` as a provider's are, so a route's `{claim: groups, contains: admins}` reads both alike.
@Suite("Account groups: the gateway's own accounts carry groups a rule can read")
struct AccountGroupsTests {
    static let adminsOnly = RoutePolicy(anyOf: [RoutePolicy.ClaimRule(path: "groups", contains: "admins")].compactMap { $0 })

    /// The `groups` claim of a token's payload (read, not verified: the gateway verified it).
    static func groups(of token: String) throws -> [String] {
        let payload = try #require(token.split(separator: ".").dropFirst().first.flatMap { Base64URL.decode(String($0)) })
        let claims = try StrictJSONReader().parseObject(payload)
        guard case .array(let values)? = claims["groups"] else { return [] }
        return values.compactMap(\.stringValue)
    }

    @Test("an account's groups are in its login token and browser session; an admins-only route admits the admin and refuses the other; a group added reaches the next refresh; a group taken away signs the account out everywhere, and its next token lacks it; the access lines name the caller admitted, refused by the policy and refused as revoked, never one whose token did not verify")
    func groupsReachTokensAndRules() async throws {
        let upstream = try await RecordingUpstream.start()
        var admin = ProxyRoute(prefix: "/admin", upstream: "http://127.0.0.1:\(upstream.port)", policy: Self.adminsOnly)
        admin.identityFields = IdentityFieldNames(user: "X-Remote-User", groups: "X-Remote-Groups")
        let browser = BrowserSessionTests.browserRoute("/console", "http://127.0.0.1:\(upstream.port)", policy: Self.adminsOnly)
        let fixture = try await GatewayFixture { $0.routes = [admin, browser] }
        let accounts = AccountService(users: fixture.state, hasher: GatewayFixture.fastHashing)
        fixture.remember("correct horse battery")
        _ = try await accounts.addUser(username: "alice", tenantID: "default", password: "correct horse battery", groups: ["admins", "staff", "admins"])
        try await fixture.addUser("bob")
        #expect(try await fixture.state.user(tenantID: "default", username: "alice")?.groups == ["admins", "staff"], "sorted, once each")

        let alice = try await fixture.login("alice")
        #expect(try Self.groups(of: alice.accessToken) == ["admins", "staff"])
        let passed = try await Answer.request(.GET, fixture.baseURL + "/admin/x", bearer: alice.accessToken)
        #expect(passed.status == 200 && passed.receivedHeaders["x-remote-groups"] == ["admins,staff"], "\(passed.raw)")
        // Its access line names her: the id, and the username (logging.access_user_name's default).
        let line = await fixture.log.lines(containing: #""path":"/admin/x""#, #""user_name":"alice""#)
        #expect(line.count == 1 && line[0].contains(#""user_id":"usr_"#), "\(fixture.log.text.suffix(600))")
        let bob = try await fixture.login("bob")
        #expect(try Self.groups(of: bob.accessToken).isEmpty)
        #expect(try await Answer.request(.GET, fixture.baseURL + "/admin/x", bearer: bob.accessToken).status == 403)
        // A caller refused after their token verified is named in the line of the refusal, too.
        let refusedLine = await fixture.log.lines(containing: #""path":"/admin/x""#, #""status":403"#, #""user_name":"bob""#)
        #expect(refusedLine.count == 1 && refusedLine[0].contains(#""user_id":"usr_"#), "\(fixture.log.text.suffix(600))")
        // A token whose signature does not check names nobody: its claims are unproven.
        var forged = Array(alice.accessToken)
        forged[forged.count - 2] = forged[forged.count - 2] == "A" ? "B" : "A"
        #expect(try await Answer.request(.GET, fixture.baseURL + "/admin/forged", bearer: String(forged)).status == 401)
        let forgedLine = await fixture.log.lines(containing: #""path":"/admin/forged""#)
        #expect(forgedLine.count == 1 && !forgedLine[0].contains("user_id") && !forgedLine[0].contains("user_name"), "\(forgedLine)")

        // The browser's sign-in with the account form carries them too.
        let signedIn = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/sign_in", headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded")],
            body: "username=alice&password=correct+horse+battery&rd=%2Fconsole%2F", followRedirects: false)
        var jar = CookieJar()
        jar.take(signedIn)
        fixture.remember(try #require(jar["portcullis"]))
        let page = try await BrowserSessionTests.get(fixture, "/console/", jar)
        #expect(page.status == 200 && page.receivedHeaders["x-remote-groups"] == ["admins,staff"], "\(page.raw)")
        // Signed in by cookie and refused by the policy: named too.
        let bobSignedIn = try await Answer.request(
            .POST, fixture.baseURL + "/.portcullis/sign_in", headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded")],
            body: "username=bob&password=correct+horse+battery&rd=%2Fconsole%2F", followRedirects: false)
        var bobsJar = CookieJar()
        bobsJar.take(bobSignedIn)
        fixture.remember(try #require(bobsJar["portcullis"], "\(bobSignedIn.raw)"))
        #expect(try await BrowserSessionTests.get(fixture, "/console/bob", bobsJar).status == 403)
        let cookieRefused = await fixture.log.lines(containing: #""path":"/console/bob""#, #""status":403"#, #""user_name":"bob""#)
        #expect(cookieRefused.count == 1, "\(fixture.log.text.suffix(600))")

        // Added: no sign-out; the next refresh's token carries it.
        let added = try #require(try await accounts.setGroups(username: "bob", tenantID: "default", adding: ["admins"], removing: []))
        #expect(added.user.groups == ["admins"] && !added.signedOut)
        #expect(try await Answer.request(.GET, fixture.baseURL + "/admin/x", bearer: bob.accessToken).status == 403, "the token in hand was issued without it")
        let refreshed = try await fixture.refresh(bob.refreshToken)
        let bobsNext = try #require(refreshed["access_token"])
        #expect(try Self.groups(of: bobsNext) == ["admins"])
        #expect(try await Answer.request(.GET, fixture.baseURL + "/admin/x", bearer: bobsNext).status == 200)

        // Without a provider, the sign-out page's button returns where it was asked to.
        let offer = try await BrowserSessionTests.get(fixture, "/.portcullis/sign_out?rd=%2Fconsole%2F", jar, headers: BrowserSessionTests.navigation)
        #expect(offer.status == 200 && offer.raw.contains("action=\"/.portcullis/sign_out?rd=%2Fconsole%2F\""), "\(offer.raw)")

        // Taken away (the real command, beside the running gateway): every token and session of
        // alice's ends at once, her browser's and her refresh token with them.
        let command = try await runPortcullis(["users", "groups", "alice", "--remove", "admins", "--database", fixture.state.path])
        #expect(command.status == 0 && command.output.contains("signed out everywhere"), "\(command.output)")
        let removed = try #require(try await fixture.state.user(tenantID: "default", username: "alice"))
        #expect(removed.groups == ["staff"])
        let browserAfter = try await Answer.eventually(within: 3, { try await BrowserSessionTests.get(fixture, "/console/", jar) }) { $0.status != 200 }
        #expect(browserAfter.status != 200, "the browser session carrying admins ended: \(browserAfter.status)")
        let cutOff = try await Answer.eventually(within: 5, { try await Answer.request(.GET, fixture.baseURL + "/admin/x", bearer: alice.accessToken) }) {
            $0.status == 401
        }
        #expect(cutOff.status == 401, "\(cutOff.raw)")
        // The revoked token's refusal names her: a leaver's agent retrying is seen as theirs.
        let revokedLine = await fixture.log.lines(containing: #""path":"/admin/x""#, #""status":401"#, #""user_name":"alice""#)
        #expect(revokedLine.count == 1 && revokedLine[0].contains(removed.id), "\(fixture.log.text.suffix(600))")
        #expect(try await fixture.refresh(alice.refreshToken).status == 401)
        // A token minted in the cut-off's second is refused as well (iat has whole seconds): the next second's login.
        try await Task.sleep(for: .milliseconds(1100))
        let again = try await fixture.login("alice")
        #expect(try Self.groups(of: again.accessToken) == ["staff"])
        #expect(try await Answer.request(.GET, fixture.baseURL + "/admin/x", bearer: again.accessToken).status == 403)
        #expect(try await fixture.state.accountCutoffs(since: 0).first { $0.userID == removed.id }?.cause == .groupsChanged, "read back as what it was")
        // A bad name changes nothing.
        await #expect(throws: AccountError.self) { _ = try await accounts.setGroups(username: "alice", tenantID: "default", adding: ["a,b"], removing: []) }
        await #expect(throws: AccountError.self) { _ = try await accounts.setGroups(username: "alice", tenantID: "default", adding: ["has space"], removing: []) }
        #expect(try await fixture.state.user(tenantID: "default", username: "alice")?.groups == ["staff"])
        try await fixture.stop()
        try await upstream.stop()
    }
}
