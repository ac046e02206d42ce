import Foundation
import PortcullisTestSupport
import Testing

/// Connected accounts across two gateways on one PostgreSQL: what one instance connects, the other
/// sends; one refresh for both; a disconnect on one ends use on both.
@Suite("Connected accounts across instances on PostgreSQL", .serialized, .enabled(if: TestPostgres.enabled, "PostgreSQL is not installed (apt-get install postgresql)"))
struct ConnectedAccountsScaleOutTests {
    @Test(
        "an account connected through gateway A (its callback taken by B) is sent by both; ten requests across A and B that need its refresh make one refresh at the service; a disconnect on A ends a request under way on B within a second, and both refuse the next"
    )
    func acrossInstances() async throws {
        let service = try await FakeOAuthService.start()
        let secret = try TrustedIssuerSecretTests.secretFile(Array("service-secret-of-portcullis\n".utf8), mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        let cluster = try await ScaleOut(configuration: """
            connections:
              - name: github
                authorization_endpoint: \(service.base)/login/oauth/authorize
                token_endpoint: \(service.base)/login/oauth/access_token
                revocation_endpoint: \(service.base)/login/oauth/revoke
                client_id: portcullis-connect
                client_secret_file: \(secret)
                scopes: [repo]
            gateway:
              public_url: http://127.0.0.1
              routes:
                - {prefix: /gh, upstream: "\(service.base)/api", upstream_credential: {connection: github}}
            """)
        defer { cluster.stop() }
        let form = [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded")]
        let signedIn = try await Answer.request(
            .POST, cluster.a + "/.portcullis/sign_in", headers: form, body: "username=alice&password=correct+horse+battery&rd=%2F", followRedirects: false)
        var jar = CookieJar()
        jar.take(signedIn)
        // Issued to live 2 s, so that a second later both instances need its refresh.
        service.books.withLock { $0.tokenLifetime = 2 }
        let page = try await Answer.request(.GET, cluster.a + "/.portcullis/connect/github", headers: [jar.header], followRedirects: false)
        let nonce = try #require(page.raw.firstMatch(of: /name="nonce" value="([^"]+)"/)?.1, "\(page.raw)")
        let pressed = try await Answer.request(
            .POST, cluster.a + "/.portcullis/connect/github", headers: form + [jar.header], body: "nonce=\(nonce)", followRedirects: false)
        let back = try await ConnectedAccountsTests.serviceSendsBack(try #require(pressed.headers.first(name: "location"), "\(pressed.raw)"))
        let completed = try await Answer.request(.GET, cluster.b + back, headers: [jar.header], followRedirects: false)
        #expect(completed.status == 303, "the callback on B completes the flow A started: \(completed.raw)")
        service.books.withLock { $0.tokenLifetime = 28_800 }
        let login = try await cluster.login(cluster.b, "alice")
        let token = try #require(login["access_token"], "\(login.raw)")

        try await Task.sleep(for: .milliseconds(1_100))
        let answers = try await withThrowingTaskGroup(of: Answer.self) { group in
            for index in 0..<10 {
                let base = index.isMultiple(of: 2) ? cluster.a : cluster.b
                group.addTask { try await Answer.request(.GET, base + "/gh/user", bearer: token) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.status == 200 && $0.json["login"] == "octocat" }, "\(answers.map(\.raw))")
        #expect(service.books.withLock { $0.refreshRequests } == 1, "one refresh for both instances")

        let slow = Task { try await Answer.request(.GET, cluster.b + "/gh/slow", bearer: token) }
        try await Task.sleep(for: .milliseconds(300))
        let agents = try await Answer.request(.GET, cluster.a + "/.portcullis/agents", headers: [jar.header], followRedirects: false)
        let agentsNonce = try #require(agents.raw.firstMatch(of: /name="nonce" value="([^"]+)"/)?.1, "\(agents.raw)")
        let done = try await Answer.request(
            .POST, cluster.a + "/.portcullis/connect/github/disconnect", headers: form + [jar.header], body: "nonce=\(agentsNonce)", followRedirects: false)
        // Measured from the page's answer: the account is forgotten before it, and the answer also waits for
        // the service's revocation endpoint, which is the service's time, not the feed's.
        let answered = ContinuousClock.now
        #expect(done.status == 303, "\(done.raw)")
        let cut = try await slow.value
        let after = ScaleOutTests.seconds(since: answered)
        #expect(cut.status == 403 && cut.json["error"] == "access_ended", "\(cut.raw)")
        #expect(after < TimeBounds.seconds(1), "the request under way on B ended \(after) s after the disconnect on A answered")
        for base in [cluster.a, cluster.b] {
            let next = try await Answer.request(.GET, base + "/gh/user", bearer: token)
            #expect(next.status == 403 && next.json["error"] == "connection_required", "\(base): \(next.raw)")
        }
        let issued = service.books.withLock { Array($0.accessTokens.keys) + Array($0.refreshTokens.keys) + $0.revoked.map(\.token) }
        cluster.stop(secrets: issued + [token, jar["portcullis"] ?? token])
        try await service.stop()
    }
}
