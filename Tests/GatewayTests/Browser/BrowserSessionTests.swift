import DataPlane
import Foundation
import Gateway
import HTTPTypes
import JOSE
import NIOHTTP1
import PortcullisTestSupport
import ProviderLogin
import Runtime
import SecurityGuard
import StateSurface
import Testing
import TrafficCop

/// A browser's cookie jar, as much of one as these tests need: `Set-Cookie` taken in, `Cookie` sent back.
struct CookieJar {
    private(set) var cookies: [(name: String, value: String)] = []
    /// Every `Set-Cookie` of the last answer, in order.
    private(set) var lastSet: [String] = []

    mutating func take(_ answer: Answer) {
        lastSet = answer.headers["Set-Cookie"]
        for line in lastSet {
            let pair = line.split(separator: ";").first.map(String.init) ?? ""
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let name = String(pair[..<equals])
            let value = String(pair[pair.index(after: equals)...])
            cookies.removeAll { $0.name == name }
            if !line.contains("Max-Age=0") { cookies.append((name, value)) }
        }
    }

    subscript(name: String) -> String? { cookies.first { $0.name == name }?.value }

    var header: (String, String) { ("Cookie", cookies.map { $0.name + "=" + $0.value }.joined(separator: "; ")) }
}

/// Browser sessions (issue 44): `auth: browser` routes, the sign-in by redirect through a provider
/// or the account form, the session cookie, cross-site refusals, policies, sign-out and the
/// provider's back-channel logout, through the real gateway, the fake provider and a recording upstream.
@Suite("Browser sessions: the cookie, the sign-in by redirect, sign-out")
struct BrowserSessionTests {
    static let navigation: [(String, String)] = [("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"), ("Sec-Fetch-Mode", "navigate")]

    /// A gateway whose provider `acme` users sign in through, with an `auth: browser` route at `/app` to `upstream`.
    static func withBrowserGateway(
        routes: @escaping (String) -> [ProxyRoute] = { [Self.browserRoute("/app", $0)] },
        provider configureProvider: (FakeProvider) -> Void = { _ in },
        configure: @escaping (inout GatewayConfiguration) -> Void = { _ in },
        _ body: (FakeProvider, GatewayFixture, RecordingUpstream.Targets) async throws -> Void
    ) async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        configureProvider(provider)
        let targets = RecordingUpstream.Targets()
        let upstream = try await RecordingUpstream.start(recording: targets)
        let secret = try ProviderLoginTests.clientSecret()
        defer { try? FileManager.default.removeItem(atPath: secret) }
        var entry = provider.trust()
        entry.login = ProviderLoginTests.login("acme", secretFile: secret, displayName: "Acme SSO")
        let fixture = try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            configuration.routes = routes("http://127.0.0.1:\(upstream.port)")
            configuration.rateLimits[.loginPerClient] = RateLimit(perMinute: 6_000, burst: 200)
            configure(&configuration)
        }, entries: [entry])
        try await body(provider, fixture, targets)
        try await fixture.stop()
        try await upstream.stop()
        try await provider.stop()
    }

    static func browserRoute(_ prefix: String, _ upstream: String, policy: RoutePolicy? = nil) -> ProxyRoute {
        var route = ProxyRoute(prefix: prefix, upstream: upstream, policy: policy)
        route.acceptsSessionCookie = true
        route.identityFields = IdentityFieldNames(user: "X-Remote-User", email: "X-Remote-Email", groups: "X-Remote-Groups")
        return route
    }

    static func get(_ fixture: GatewayFixture, _ path: String, _ jar: CookieJar, headers: [(String, String)] = []) async throws -> Answer {
        try await Answer.request(.GET, fixture.baseURL + path, headers: headers + (jar.cookies.isEmpty ? [] : [jar.header]), followRedirects: false)
    }

    /// The path and query of an absolute URL (the fixture's public URL names another port than it listens on).
    static func pathOf(_ url: String) -> String {
        guard let components = URLComponents(string: url) else { return url }
        return components.percentEncodedPath + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    /// A whole sign-in in `jar`'s browser, from `/.portcullis/sign_in?rd=rd`: the answer of the callback.
    static func signIn(_ fixture: GatewayFixture, _ provider: FakeProvider, _ jar: inout CookieJar, rd: String = "/app/after") async throws -> Answer {
        let start = try await get(fixture, "/.portcullis/sign_in?rd=" + FormEncoding.encode(rd), jar, headers: navigation)
        guard start.status == 302, let authorization = start.headers["Location"].first else { throw FixtureError("sign_in answered \(start.status): \(start.raw)") }
        jar.take(start)
        let callback = try await ProviderSignInTests.approve(provider, .init(session: "", authorizationURL: authorization))
        let back = try await get(fixture, pathOf(callback), jar, headers: navigation)
        jar.take(back)
        return back
    }

    @Test("a navigation to an auth: browser route without a session is a 302 to the public host's /.portcullis/sign_in with rd = the page asked for (no access_token); an app's own fetch gets 401 JSON, never HTML; nothing reaches the upstream")
    func navigationIsSentToSignIn() async throws {
        try await Self.withBrowserGateway { _, fixture, targets in
            let jar = CookieJar()
            let page = try await Self.get(fixture, "/app/dashboards/1?tab=2&access_token=x", jar, headers: Self.navigation + [("Host", "127.0.0.1:\(fixture.gatewayPort)")])
            #expect(page.status == 302, "\(page.raw)")
            let location = try #require(page.headers["Location"].first)
            #expect(location.hasPrefix("http://127.0.0.1:8080/.portcullis/sign_in?rd="), "\(location)")
            #expect(ProviderLoginTests.query(location)["rd"] == "http://127.0.0.1:\(fixture.gatewayPort)/app/dashboards/1?tab=2")
            #expect(page.headers["Cache-Control"].first == "no-store")
            // rd in the spelling sign-in takes back: the host without its trailing dot; without the query, or the
            // site's root, when the address holds what sign-in refuses (never a link to a sign-in that cannot return).
            let port = fixture.gatewayPort
            for (target, host, expected) in [
                ("/app/search?q=a%20b", "127.0.0.1.:\(port)", "http://127.0.0.1:\(port)/app/search"),
                ("/app/caf%C3%A9", "127.0.0.1:\(port)", "http://127.0.0.1:\(port)/"),
                ("/app/x?" + String(repeating: "a", count: 2_100), "127.0.0.1:\(port)", "http://127.0.0.1:\(port)/app/x"),
            ] {
                let answer = try await Self.get(fixture, target, jar, headers: Self.navigation + [("Host", host)])
                let rd = answer.headers["Location"].first.flatMap { ProviderLoginTests.query($0)["rd"] }
                #expect(rd == expected, "\(target) on \(host): \(rd ?? answer.raw)")
                let signIn = try await Self.get(fixture, "/.portcullis/sign_in?rd=" + FormEncoding.encode(rd ?? ""), jar, headers: Self.navigation)
                #expect(signIn.status == 302, "sign-in takes \(rd ?? "") back: \(signIn.raw)")
            }
            // An older browser without Sec-Fetch-*: Accept preferring HTML makes it a navigation.
            let old = try await Self.get(fixture, "/app/x", jar, headers: [("Accept", "text/html")])
            #expect(old.status == 302)
            for headers in [[("Accept", "application/json")], [("Accept", "text/html"), ("Sec-Fetch-Mode", "cors")], [("Accept", "text/html;q=0")], []] {
                let fetch = try await Self.get(fixture, "/app/api/data", jar, headers: headers)
                #expect(fetch.status == 401 && fetch.error == "token_missing", "\(headers): \(fetch.raw)")
                #expect(fetch.headers["Content-Type"].first?.hasPrefix("application/json") == true)
            }
            let post = try await Answer.request(.POST, fixture.baseURL + "/app/x", headers: Self.navigation, body: "{}", followRedirects: false)
            #expect(post.status == 401, "a POST is never redirected")
            #expect(targets.all.isEmpty, "\(targets.all)")
        }
    }

    @Test("the provider sign-in end to end: a flow cookie and a 302 to the provider; the callback in the same browser sets the session cookie (HttpOnly, SameSite=Lax, Path=/, no session id, no token) and 302s to rd; the cookie reaches the route as the user, with the identity fields and an assertion naming the session, the gateway's cookies stripped and the app's kept")
    func providerSignInEndToEnd() async throws {
        try await Self.withBrowserGateway(provider: { $0.flow.withLock { $0.idTokenClaims = ["email": "ann@example.com", "email_verified": true, "groups": ["staff", "grafana-users"]] } }) {
            provider, fixture, targets in
            var jar = CookieJar()
            let start = try await Self.get(fixture, "/.portcullis/sign_in?rd=%2Fapp%2Fafter", jar, headers: Self.navigation)
            #expect(start.status == 302, "\(start.raw)")
            let flowCookies = start.headers["Set-Cookie"]
            #expect(flowCookies.count == 1 && flowCookies[0].hasPrefix("portcullis-flow-") && flowCookies[0].contains("HttpOnly")
                && flowCookies[0].contains("SameSite=Lax") && flowCookies[0].contains("Max-Age=600"), "\(flowCookies)")
            jar.take(start)
            let back = try await Self.get(
                fixture, Self.pathOf(try await ProviderSignInTests.approve(provider, .init(session: "", authorizationURL: start.headers["Location"].first ?? ""))),
                jar, headers: Self.navigation)
            #expect(back.status == 302, "\(back.raw)")
            #expect(back.headers["Location"].first == "/app/after")
            jar.take(back)
            let set = try #require(back.headers["Set-Cookie"].first { $0.hasPrefix("portcullis=") })
            #expect(set.contains("HttpOnly") && set.contains("SameSite=Lax") && set.contains("Path=/") && !set.contains("Secure"), "plain http on loopback: \(set)")
            #expect(back.headers["Set-Cookie"].contains { $0.hasPrefix("portcullis-flow-") && $0.contains("Max-Age=0") }, "the flow cookie is cleared")
            let value = try #require(jar["portcullis"])
            fixture.remember(value)
            #expect(value.utf8.count == 43 && !value.hasPrefix("ses_") && !value.contains("."))

            let page = try await Self.get(fixture, "/app/after", jar, headers: Self.navigation + [("Cookie", "theme=dark; portcullis-other=x")])
            #expect(page.status == 200, "\(page.raw)")
            let received = page.receivedHeaders
            #expect(received["x-remote-user"]?.first?.hasPrefix("ext_") == true)
            #expect(received["x-remote-email"] == ["ann@example.com"])
            #expect(received["x-remote-groups"] == ["staff,grafana-users"])
            let cookies = received["cookie"] ?? []
            #expect(cookies.allSatisfy { !$0.contains("portcullis") } && cookies.contains("theme=dark"), "\(cookies)")
            let assertion = try #require(received["x-portcullis-assertion"]?.first)
            fixture.remember(assertion)
            let claims = try ProviderSignInTests.claims(assertion)
            #expect(claims["session_id"]?.stringValue?.hasPrefix("ses_") == true && claims["idp_sub"] == "user-1", "\(claims)")
            #expect(targets.all == ["GET /after"])
            #expect(page.headers["Vary"].contains { $0.lowercased().contains("cookie") }, "an answer made for a cookie's user varies by Cookie: \(page.headers)")

            let info = try await Self.get(fixture, "/.portcullis/userinfo", jar)
            #expect(info.status == 200 && info["email"] == "ann@example.com" && info.json["groups"] == ["staff", "grafana-users"], "\(info.raw)")
            #expect(info["user"]?.hasPrefix("ext_") == true && info.headers["Cache-Control"].first == "no-store")
            let nobody = try await Self.get(fixture, "/.portcullis/userinfo", CookieJar())
            #expect(nobody.status == 401 && nobody.error == "not_signed_in")
            // Kept in the store by its hash only.
            let stored = try await fixture.state.browserSession(cookieHash: try BrowserSessionBook.hash(value))
            #expect(stored?.userID.hasPrefix("ext_") == true && stored?.claims.contains(value) == false)
        }
    }

    @Test("the callback completes only in the browser that started the flow: without its flow cookie (login CSRF, another browser) or with another flow's secret it is a page refusing the sign-in, and no session cookie is set")
    func flowBoundToItsBrowser() async throws {
        try await Self.withBrowserGateway { provider, fixture, _ in
            var starter = CookieJar()
            let start = try await Self.get(fixture, "/.portcullis/sign_in?rd=/app/x", starter, headers: Self.navigation)
            starter.take(start)
            let callback = Self.pathOf(try await ProviderSignInTests.approve(provider, .init(session: "", authorizationURL: start.headers["Location"].first ?? "")))
            // The attacker's callback URL opened in the victim's browser, which holds no flow cookie.
            let elsewhere = try await Self.get(fixture, callback, CookieJar(), headers: Self.navigation)
            #expect(elsewhere.status == 400 && elsewhere.headers["X-Portcullis-Error"].first == "flow_cookie_missing", "\(elsewhere.raw)")
            #expect(elsewhere.headers["Content-Type"].first?.hasPrefix("text/html") == true)
            #expect(!elsewhere.headers["Set-Cookie"].contains { $0.hasPrefix("portcullis=") })
            // The flow is spent by that attempt: the starter's own browser must start again.
            let again = try await Self.get(fixture, callback, starter, headers: Self.navigation)
            #expect(again.status == 400, "\(again.raw)")

            // A flow cookie of the right name with another secret.
            var forger = CookieJar()
            let second = try await Self.get(fixture, "/.portcullis/sign_in?rd=/app/x", forger, headers: Self.navigation)
            forger.take(second)
            let name = try #require(forger.cookies.first?.name)
            let wrong = try await Self.get(
                fixture, Self.pathOf(try await ProviderSignInTests.approve(provider, .init(session: "", authorizationURL: second.headers["Location"].first ?? ""))),
                CookieJar(), headers: Self.navigation + [("Cookie", name + "=" + Base64URL.encode(try SecureRandom.bytes(32)))])
            #expect(wrong.status == 400 && wrong.headers["X-Portcullis-Error"].first == "flow_cookie_mismatch", "\(wrong.raw)")
            #expect(!wrong.headers["Set-Cookie"].contains { $0.hasPrefix("portcullis=") })
        }
    }

    @Test("several tabs sign in at once, each flow with a cookie of its own; past five flow cookies a new sign-in clears them (never a header that grows until 431)")
    func severalTabs() async throws {
        try await Self.withBrowserGateway { provider, fixture, _ in
            var jar = CookieJar()
            var starts: [Answer] = []
            for tab in 0..<2 {
                let start = try await Self.get(fixture, "/.portcullis/sign_in?rd=/app/tab\(tab)", jar, headers: Self.navigation)
                jar.take(start)
                starts.append(start)
            }
            #expect(jar.cookies.count == 2)
            // The second tab finishes first, then the first: both sign in.
            for (index, start) in starts.enumerated().reversed() {
                let back = try await Self.get(
                    fixture, Self.pathOf(try await ProviderSignInTests.approve(provider, .init(session: "", authorizationURL: start.headers["Location"].first ?? ""))),
                    jar, headers: Self.navigation)
                #expect(back.status == 302 && back.headers["Location"].first == "/app/tab\(index)", "\(back.raw)")
                jar.take(back)
            }
            var many = CookieJar()
            for _ in 0..<BrowserSessionRoutesLimits.maximumFlowCookies {
                many.take(try await Self.get(fixture, "/.portcullis/sign_in?rd=/app/x", many, headers: Self.navigation))
            }
            #expect(many.cookies.count == BrowserSessionRoutesLimits.maximumFlowCookies)
            let past = try await Self.get(fixture, "/.portcullis/sign_in?rd=/app/x", many, headers: Self.navigation)
            many.take(past)
            #expect(past.headers["Set-Cookie"].filter { $0.contains("Max-Age=0") }.count == BrowserSessionRoutesLimits.maximumFlowCookies)
            #expect(many.cookies.count == 1)
        }
    }

    @Test("a cookie that is not the gateway's is refused naming the mix-up: a session_id (session_id_as_cookie), a JWT (token_as_cookie), anything else (session_cookie_invalid); the cookie twice is 400; a navigation with any cookie it cannot read is sent to sign in, the cookie cleared")
    func cookieConfusions() async throws {
        try await Self.withBrowserGateway { _, fixture, targets in
            let jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"
            let cases: [(String, Int, String)] = [
                ("portcullis=ses_AAAAAAAAAAAAAAAAAAAAAA", 401, "session_id_as_cookie"), ("portcullis=\(jwt)", 401, "token_as_cookie"),
                ("portcullis=short", 401, "session_cookie_invalid"), ("portcullis=\(String(repeating: "A", count: 43)); portcullis=\(String(repeating: "B", count: 43))", 400, "session_cookie_ambiguous"),
            ]
            for (cookie, status, error) in cases {
                let answer = try await Self.get(fixture, "/app/x", CookieJar(), headers: [("Cookie", cookie)])
                #expect(answer.status == status && answer.error == error, "\(cookie): \(answer.raw)")
            }
            let unknown = try await Self.get(fixture, "/app/x", CookieJar(), headers: Self.navigation + [("Cookie", "portcullis=" + Base64URL.encode(try SecureRandom.bytes(32)))])
            #expect(unknown.status == 302, "\(unknown.raw)")
            #expect(unknown.headers["Set-Cookie"].contains { $0.hasPrefix("portcullis=;") && $0.contains("Max-Age=0") }, "the unreadable cookie is cleared")
            let twice = "portcullis=\(String(repeating: "A", count: 43)); portcullis=\(String(repeating: "B", count: 43))"
            let ambiguous = try await Self.get(fixture, "/app/x", CookieJar(), headers: Self.navigation + [("Cookie", twice)])
            #expect(ambiguous.status == 400 && ambiguous.headers["Content-Type"].first?.hasPrefix("text/html") == true, "a page for a person: \(ambiguous.raw)")
            #expect(ambiguous.headers["X-Portcullis-Error"].first == "session_cookie_ambiguous" && ambiguous.headers["Set-Cookie"].contains { $0.contains("Max-Age=0") })
            // A navigation carrying any cookie the gateway cannot read is sent to sign in, never stuck on 401 JSON.
            for cookie in ["portcullis=short", "portcullis=ses_AAAAAAAAAAAAAAAAAAAAAA", "portcullis=\(jwt)"] {
                let navigation = try await Self.get(fixture, "/app/x", CookieJar(), headers: Self.navigation + [("Cookie", cookie)])
                #expect(navigation.status == 302 && navigation.headers["Location"].first?.contains("/.portcullis/sign_in?rd=") == true, "\(cookie): \(navigation.raw)")
                #expect(navigation.headers["Set-Cookie"].contains { $0.hasPrefix("portcullis=;") && $0.contains("Max-Age=0") }, "\(cookie): cleared")
            }
            #expect(targets.all.isEmpty)
        }
    }

    @Test("with the cookie, a POST, PUT, PATCH or DELETE from another origin (or with neither Origin nor Sec-Fetch-Site: same-origin) is 403 csrf_refused and never reaches the upstream; the app's own origin passes; a Bearer request is unchanged")
    func crossSiteRequests() async throws {
        try await Self.withBrowserGateway { provider, fixture, targets in
            var jar = CookieJar()
            _ = try await Self.signIn(fixture, provider, &jar)
            let own = "http://127.0.0.1:\(fixture.gatewayPort)"
            for method in [HTTPMethod.POST, .PUT, .PATCH, .DELETE] {
                for headers in [[("Origin", "https://evil.example")], [("Origin", "null")], [], [("Sec-Fetch-Site", "cross-site")], [("Sec-Fetch-Site", "same-site")]] {
                    let answer = try await Answer.request(method, fixture.baseURL + "/app/x", headers: headers + [jar.header], body: "{}", followRedirects: false)
                    #expect(answer.status == 403 && answer.error == "csrf_refused", "\(method) \(headers): \(answer.raw)")
                }
            }
            #expect(targets.all.isEmpty, "\(targets.all)")
            let sameOrigin = try await Answer.request(.POST, fixture.baseURL + "/app/x", headers: [("Origin", own), jar.header], body: "{}", followRedirects: false)
            #expect(sameOrigin.status == 200, "\(sameOrigin.raw)")
            let fetchSite = try await Answer.request(.DELETE, fixture.baseURL + "/app/x", headers: [("Sec-Fetch-Site", "same-origin"), jar.header], followRedirects: false)
            #expect(fetchSite.status == 200, "\(fetchSite.raw)")
            try await fixture.addUser("bob")
            let bob = try await fixture.login("bob")
            let bearer = try await Answer.request(
                .POST, fixture.baseURL + "/app/x", bearer: bob.accessToken, headers: [("Origin", "https://evil.example")], body: "{}", followRedirects: false)
            #expect(bearer.status == 200, "Bearer requests carry no ambient credential: \(bearer.raw)")
        }
    }

    @Test("WebDAV methods a route lists (PROPFIND, MKCOL) are forwarded with the cookie from the app's own origin, refused csrf_refused from another, 405 where not listed; Basic credentials beside the cookie are left to the cookie and never forwarded, and are 401 on a Bearer route")
    func webDAVMethods() async throws {
        let routes = { (upstream: String) -> [ProxyRoute] in
            var dav = Self.browserRoute("/dav", upstream)
            dav.methods = [.get, .head, HTTPRequest.Method("PROPFIND")!, HTTPRequest.Method("MKCOL")!]
            var bearer = ProxyRoute(prefix: "/api/dav", upstream: upstream)
            bearer.methods = dav.methods
            return [dav, bearer, Self.browserRoute("/app", upstream)]
        }
        try await Self.withBrowserGateway(routes: routes) { provider, fixture, targets in
            var jar = CookieJar()
            _ = try await Self.signIn(fixture, provider, &jar)
            let own = "http://127.0.0.1:\(fixture.gatewayPort)"
            let propfind = HTTPMethod(rawValue: "PROPFIND")
            for headers in [[("Origin", "https://evil.example")], [("Origin", "null")], [], [("Sec-Fetch-Site", "same-site")]] {
                let answer = try await Answer.request(propfind, fixture.baseURL + "/dav/ann/", headers: headers + [jar.header], followRedirects: false)
                #expect(answer.status == 403 && answer.error == "csrf_refused", "PROPFIND \(headers): \(answer.raw)")
            }
            #expect(targets.all.isEmpty, "\(targets.all)")
            let basic = ("Authorization", "Basic " + Data("ann:whatever".utf8).base64EncodedString())
            for method in [propfind, HTTPMethod(rawValue: "MKCOL")] {
                let answer = try await Answer.request(method, fixture.baseURL + "/dav/ann/x/", headers: [("Origin", own), basic, jar.header], followRedirects: false)
                #expect(answer.status == 200 && answer.json["method"] == .string(method.rawValue), "\(method) from the app's own origin, Basic beside the cookie: \(answer.raw)")
                #expect(answer.receivedHeaders["authorization"] == nil && answer.receivedHeaders["x-remote-user"]?.first?.hasPrefix("ext_") == true, "\(answer.receivedHeaders)")
            }
            #expect(targets.all.count == 2, "both reached the upstream: \(targets.all)")
            let unlisted = try await Answer.request(HTTPMethod(rawValue: "MKCOL"), fixture.baseURL + "/app/x/", headers: [("Origin", own), jar.header], followRedirects: false)
            #expect(unlisted.status == 405 && unlisted.headers["Allow"].first?.contains("MKCOL") == false, "\(unlisted.raw)")
            let basicOnBearerRoute = try await Answer.request(propfind, fixture.baseURL + "/api/dav/x", headers: [basic], followRedirects: false)
            #expect(basicOnBearerRoute.status == 401, "\(basicOnBearerRoute.raw)")
            let basicWithoutCookie = try await Answer.request(propfind, fixture.baseURL + "/dav/x", headers: [basic], followRedirects: false)
            #expect(basicWithoutCookie.status == 401 && targets.all.count == 2, "no cookie, no token: \(basicWithoutCookie.raw)")
        }
    }

    @Test("with emails_verified on the provider's entry, a browser sign-in's address without email_verified is an identity field (userinfo, the route's field); an explicit email_verified false still is not")
    func emailsVerifiedProviderInTheBrowser() async throws {
        let routes = { (upstream: String) -> [ProxyRoute] in
            var route = Self.browserRoute("/app", upstream)
            route.identityFields = IdentityFieldNames(user: "X-Remote-User", email: "X-Remote-Email")
            return [route]
        }
        for (claims, shown) in [(["email": "ann@example.com"] as JSONObject, true), (["email": "ann@example.com", "email_verified": false], false)] {
            try await Self.withBrowserGateway(
                routes: routes, provider: { $0.flow.withLock { $0.idTokenClaims = claims } },
                configure: { $0.trust.issuers[0].emailsVerified = true }
            ) { provider, fixture, _ in
                var jar = CookieJar()
                _ = try await Self.signIn(fixture, provider, &jar)
                let info = try await Self.get(fixture, "/.portcullis/userinfo", jar)
                #expect(info["email"] == (shown ? "ann@example.com" : ""), "\(claims): \(info.raw)")
                let page = try await Self.get(fixture, "/app/home", jar)
                #expect(page.receivedHeaders["x-remote-email"] == (shown ? ["ann@example.com"] : nil), "\(claims): \(page.receivedHeaders)")
            }
        }
    }

    @Test("a browser's provider sign-in records the user (issuer, subject, the ID token's email, username and name) for users list and find; userinfo names them, and the route's username field carries the provider's name")
    func providerUserRecorded() async throws {
        let routes = { (upstream: String) -> [ProxyRoute] in
            var route = Self.browserRoute("/app", upstream)
            route.identityFields = IdentityFieldNames(user: "X-Remote-User", username: "X-Remote-Name", name: "X-Remote-Full-Name")
            return [route]
        }
        let names: JSONObject = ["email": "Ann@Example.com", "preferred_username": "ann.lee", "name": "Ann Lée"]
        try await Self.withBrowserGateway(routes: routes, provider: { $0.flow.withLock { $0.idTokenClaims = names } }) { provider, fixture, _ in
            var jar = CookieJar()
            _ = try await Self.signIn(fixture, provider, &jar)
            let recorded = try await fixture.state.providerUsers()
            #expect(recorded.count == 1, "\(recorded)")
            let user = try #require(recorded.first)
            #expect(user.userID.hasPrefix("ext_") && user.issuer == provider.issuer && user.subject == "user-1" && user.tenantID == "acme")
            #expect(user.email == "Ann@Example.com" && user.username == "ann.lee" && user.name == "Ann Lée")
            #expect(try await fixture.state.providerUsers(matching: "ann@example.com").map(\.userID) == [user.userID])
            let info = try await Self.get(fixture, "/.portcullis/userinfo", jar)
            #expect(info.json["preferred_username"] == "ann.lee" && info.json["name"] == "Ann Lée" && info.json["sub"] == "user-1", "\(info.raw)")
            #expect(info["email"] == "", "the provider did not say it verified the address: it is no identity field (\(info.raw))")
            #expect(info.json["expires_at"]?.numberValue.map { $0 == $0.rounded() } == true, "whole seconds: \(info.raw)")
            let page = try await Self.get(fixture, "/app/home", jar)
            #expect(page.receivedHeaders["x-remote-name"] == ["ann.lee"] && page.receivedHeaders["x-remote-full-name"] == ["Ann Lée"], "\(page.receivedHeaders)")
            #expect(page.receivedHeaders["x-remote-user"] == [user.userID])
        }
    }

    @Test("a navigation on a host sign-in would not return to is sent to sign in with rd=/, and the log says why and how to fix it, once per origin")
    func unreturnableOriginIsSaid() async throws {
        try await Self.withBrowserGateway { _, fixture, _ in
            for _ in 0..<3 {
                let answer = try await Self.get(fixture, "/app/page", CookieJar(), headers: Self.navigation + [("Host", "intranet.example.net")])
                #expect(answer.status == 302 && answer.headers["Location"].first?.hasSuffix("/.portcullis/sign_in?rd=%2F") == true, "\(answer.raw)")
            }
            let lines = await fixture.log.lines(containing: "sign-in will return to /", "login_return_origins")
            #expect(lines.count == 1 && lines[0].contains("http://intranet.example.net"), "\(lines)")
            let returnable = try await Self.get(fixture, "/app/page", CookieJar(), headers: Self.navigation)
            #expect(returnable.headers["Location"].first?.contains("rd=http") == true, "the public host's own page is returned to: \(returnable.raw)")
        }
    }

    @Test("a signed-in user outside the route's policy gets a 403 page for a navigation (with a link to the sign-out page, back to the page refused) and 403 JSON for a fetch, never a redirect to sign in (no loop)")
    func policyRefusalIsAPage() async throws {
        let policy = RoutePolicy(anyOf: [RoutePolicy.ClaimRule(path: "groups", contains: "admins")].compactMap { $0 })
        try await Self.withBrowserGateway(routes: { [Self.browserRoute("/app", $0, policy: policy)] }) { provider, fixture, targets in
            var jar = CookieJar()
            _ = try await Self.signIn(fixture, provider, &jar)
            let page = try await Self.get(fixture, "/app/x", jar, headers: Self.navigation)
            #expect(page.status == 403 && page.headers["Content-Type"].first?.hasPrefix("text/html") == true, "\(page.raw)")
            #expect(page.headers["Location"].isEmpty && page.raw.contains("Not allowed"))
            #expect(page.raw.contains("<a href=\"/.portcullis/sign_out?rd=%2Fapp%2Fx\">Sign out</a>"), "\(page.raw)")
            // Back to the page refused, without a credential-looking parameter of its query.
            let withToken = try await Self.get(fixture, "/app/x?access_token=abc123&y=1", jar, headers: Self.navigation)
            #expect(withToken.status == 403 && withToken.raw.contains("sign_out?rd=%2Fapp%2Fx%3Fy%3D1\""), "\(withToken.raw)")
            #expect(!withToken.raw.contains("abc123"))
            let fetch = try await Self.get(fixture, "/app/x", jar, headers: [("Accept", "application/json")])
            #expect(fetch.status == 403 && fetch.error == "insufficient_scope", "\(fetch.raw)")
            #expect(targets.all.isEmpty)
        }
    }

    @Test("sign-out: a cross-site POST is refused and a GET is the page offering it, signing nobody out (an rd elsewhere is a 400 page); a same-origin POST (an app's, on its route host) ends the session everywhere, clears the cookie and 303s to the provider's end-session URL; the old cookie then sends a navigation to sign in")
    func signOut() async throws {
        let routes: (String) -> [ProxyRoute] = { upstream in
            var wiki = Self.browserRoute("/", upstream)
            wiki.host = RouteHost(configured: "wiki.127.0.0.1.nip.test")
            return [Self.browserRoute("/app", upstream), wiki]
        }
        try await Self.withBrowserGateway(routes: routes) { provider, fixture, _ in
            var jar = CookieJar()
            _ = try await Self.signIn(fixture, provider, &jar)
            let cookie = jar.header
            let crossSite = try await Answer.request(.POST, fixture.baseURL + "/.portcullis/sign_out", headers: [("Origin", "https://evil.example"), cookie], followRedirects: false)
            #expect(crossSite.status == 403 && crossSite.error == "csrf_refused", "\(crossSite.raw)")
            // A GET is the page that offers the sign-out, never a sign-out: the button posts, with the
            // page's form-action naming the provider's end-session origin its redirect reaches.
            let viaGet = try await Self.get(fixture, "/.portcullis/sign_out?rd=%2Fapp%2Fbye", jar, headers: Self.navigation)
            #expect(viaGet.status == 200 && viaGet.raw.contains("Sign out?") && viaGet.raw.contains("ends this browser&#39;s session everywhere"), "\(viaGet.raw)")
            // With a provider's session the button returns to {public_url}/, the post-logout URI its provider has registered, not rd.
            #expect(viaGet.raw.contains("action=\"/.portcullis/sign_out?rd=%2F\""), "\(viaGet.raw)")
            let policy = viaGet.headers["Content-Security-Policy"].first ?? ""
            #expect(policy.contains("form-action 'self' " + (ReturnTarget.origin(of: provider.issuer) ?? "?")) && policy.contains("frame-ancestors 'none'"), "\(policy)")
            #expect(viaGet.headers["Set-Cookie"].isEmpty)
            #expect(try await Self.get(fixture, "/app/x", jar).status == 200, "still signed in")
            let elsewhere = try await Self.get(fixture, "/.portcullis/sign_out?rd=" + FormEncoding.encode("https://evil.example/"), jar, headers: Self.navigation)
            #expect(elsewhere.status == 400 && elsewhere.headers["X-Portcullis-Error"].first == "redirect_invalid", "\(elsewhere.raw)")
            // From an app on a route host: its own origin may sign its user out.
            let out = try await Answer.request(
                .POST, fixture.baseURL + "/.portcullis/sign_out?rd=%2Fapp%2Fbye",
                headers: [("Host", "wiki.127.0.0.1.nip.test:\(fixture.gatewayPort)"), ("Origin", "http://wiki.127.0.0.1.nip.test:\(fixture.gatewayPort)"), cookie],
                followRedirects: false)
            #expect(out.status == 303, "\(out.raw)")
            let location = try #require(out.headers["Location"].first)
            #expect(location.hasPrefix(provider.issuer) && ProviderLoginTests.query(location)["post_logout_redirect_uri"] == "http://127.0.0.1:8080/app/bye", "\(location)")
            #expect(ProviderLoginTests.query(location)["id_token_hint"] != nil)
            #expect(out.headers["Set-Cookie"].contains { $0.hasPrefix("portcullis=;") && $0.contains("Max-Age=0") })
            let after = try await Self.get(fixture, "/app/x", jar, headers: Self.navigation)
            #expect(after.status == 302 && after.headers["Location"].first?.contains("/.portcullis/sign_in") == true, "\(after.raw)")
        }
    }

    @Test("the provider's back-channel logout ends the cookie session: the next navigation is sent to sign in, the next fetch is 401")
    func backChannelLogoutEndsCookieSessions() async throws {
        try await Self.withBrowserGateway { provider, fixture, _ in
            var jar = CookieJar()
            _ = try await Self.signIn(fixture, provider, &jar)
            #expect(try await Self.get(fixture, "/app/x", jar).status == 200)
            let logout = try await ProviderSignInTests.backChannel(fixture, try provider.logoutToken(sid: "sid-1", sub: nil))
            #expect(logout.status == 200, "\(logout.raw)")
            let navigation = try await Self.get(fixture, "/app/x", jar, headers: Self.navigation)
            #expect(navigation.status == 302, "\(navigation.raw)")
            let fetch = try await Self.get(fixture, "/app/x", jar)
            #expect(fetch.status == 401, "\(fetch.raw)")
        }
    }

    @Test("a session in use is re-checked at the provider with its refresh token: accepted, it goes on with the rotated token kept; refused (the user disabled there), it ends on the next pass and the next navigation is sent to sign in")
    func providerRecheck() async throws {
        try await Self.withBrowserGateway { provider, fixture, _ in
            var jar = CookieJar()
            _ = try await Self.signIn(fixture, provider, &jar)
            #expect(try await Self.get(fixture, "/app/x", jar).status == 200)
            let state = fixture.state
            let session = try #require(try await state.providerSessions(issuer: provider.issuer, providerSessionID: "sid-1", subject: nil).first)
            let now = fixture.server.clock.now()
            #expect(try await state.providerRechecksDue(now: now, interval: 900, limit: 10).isEmpty, "the sign-in scheduled its first re-check a recheck_minutes later")
            let sweepers = try fixture.server.makeServices().compactMap { $0 as? Sweeper }
            let recheck = try #require(sweepers.first { $0.what == "browser sessions re-checked at their provider" }, "the gateway runs the re-checks")

            try await state.scheduleProviderRecheck(sessionID: session.sessionID, at: now - 1)
            let before = provider.flow.withLock { $0.refreshRequests }
            #expect(try await recheck.sweepOnce() == 0, "the provider accepted: nothing ended")
            #expect(provider.flow.withLock { $0.refreshRequests } == before + 1)
            let rotated = try await state.providerSession(sessionID: session.sessionID)?.identity.sealedRefreshToken
            #expect(rotated != nil && rotated != session.identity.sealedRefreshToken, "the rotated refresh token is kept")
            #expect(try await recheck.sweepOnce() == 0)
            #expect(provider.flow.withLock { $0.refreshRequests } == before + 1, "not due again before recheck_minutes")
            #expect(try await Self.get(fixture, "/app/x", jar).status == 200)

            provider.revokeRefreshTokens(of: "user-1")
            try await state.scheduleProviderRecheck(sessionID: session.sessionID, at: now - 1)
            #expect(try await recheck.sweepOnce() == 1, "the provider refused: the session ended")
            let navigation = try await Self.get(fixture, "/app/x", jar, headers: Self.navigation)
            #expect(navigation.status == 302, "\(navigation.raw)")
            #expect(try await Self.get(fixture, "/app/x", jar).status == 401)
            #expect(try await state.providerSession(sessionID: session.sessionID) == nil, "its provider tokens are gone")
        }
    }

    @Test("a cookie this instance has not met costs a store read, bounded per client (rate_limits.session_cookie_lookup_per_client): past the burst, unknown cookies get 429 with Retry-After on a route and at userinfo; a cookie met before is answered from memory and never limited")
    func unknownCookieLookupsAreRateLimited() async throws {
        try await Self.withBrowserGateway(configure: { $0.rateLimits[.sessionCookieLookupPerClient] = RateLimit(perMinute: 1, burst: 3) }) {
            provider, fixture, targets in
            var jar = CookieJar()
            _ = try await Self.signIn(fixture, provider, &jar)
            func unknown() throws -> (String, String) { ("Cookie", "portcullis=" + Base64URL.encode(try SecureRandom.bytes(32))) }
            for _ in 0..<3 {
                #expect(try await Self.get(fixture, "/app/x", CookieJar(), headers: [try unknown()]).status == 401, "within the burst: looked for, not found")
            }
            let limited = try await Self.get(fixture, "/app/x", CookieJar(), headers: [try unknown()])
            #expect(limited.status == 429 && limited.error == "rate_limited", "\(limited.raw)")
            #expect(limited.headers["Retry-After"].first.flatMap { Int($0) }.map { $0 >= 1 } == true)
            let userinfo = try await Self.get(fixture, "/.portcullis/userinfo", CookieJar(), headers: [try unknown()])
            #expect(userinfo.status == 429, "\(userinfo.raw)")
            for _ in 0..<5 { #expect(try await Self.get(fixture, "/app/x", jar).status == 200, "the signed-in cookie is met already") }
            #expect(targets.all.count == 5, "only the signed-in requests reached the upstream: \(targets.all)")
        }
    }

    @Test("a WebSocket with the session cookie from the app's own origin is tunnelled to the route's upstream as the user; from another origin (or none) it is 403 csrf_refused and never reaches the upstream; on the agent socket's path the cookie is no credential (401)")
    func webSocketWithCookie() async throws {
        let handshakes = WebSocketEchoUpstream.Handshakes()
        let upstream = try await WebSocketEchoUpstream.start(recording: handshakes)
        try await Self.withBrowserGateway(routes: { _ in [Self.browserRoute("/app", "http://127.0.0.1:\(upstream.port)")] }) { provider, fixture, _ in
            var jar = CookieJar()
            _ = try await Self.signIn(fixture, provider, &jar)
            let (port, cookie) = (fixture.gatewayPort, jar.header)
            for origin in [["Origin": "https://evil.example"], ["Origin": "null"], [:]] {
                let refused = try await onOwnThread { try RawUpgrade.send(port: port, target: "/app/socket", headers: [cookie] + origin.map { ($0.key, $0.value) }) }
                #expect(refused.status == 403 && refused.error == "csrf_refused", "\(origin): \(refused.head)")
            }
            #expect(handshakes.all.isEmpty, "no cross-site handshake reached the upstream")
            // The browser's own handshake: Origin is the app's page (a client library would add an Origin of its own).
            let echoed = try await onOwnThread { () throws -> String? in
                let socket = try RawWebSocket(port: port, target: "/app/socket", headers: [cookie, ("Origin", "http://127.0.0.1:\(port)")])
                guard socket.status == 101 else { return "status \(socket.status): \(socket.head)" }
                try socket.sendText("hello")
                return try socket.readFrame().map { String(decoding: $0.payload, as: UTF8.self) }
            }
            #expect(echoed == "hello")
            let handshake = try #require(handshakes.all.first)
            #expect(handshake["x-remote-user"]?.hasPrefix("ext_") == true, "the upstream got the user in the route's identity field")
            #expect(!(handshake["cookie"] ?? "").contains("portcullis"), "never the gateway's cookie")
            let agent = try await onOwnThread { try RawUpgrade.send(port: port, target: "/api/runtime/agent", headers: [cookie]) }
            #expect(agent.status == 401, "\(agent.head)")
        }
        try await upstream.stop()
    }

    @Test("the provider's back-channel logout closes the session's open WebSocket tunnels with 1008 and the reason, between two frames")
    func logoutClosesTunnels() async throws {
        let handshakes = WebSocketEchoUpstream.Handshakes()
        let upstream = try await WebSocketEchoUpstream.start(recording: handshakes)
        try await Self.withBrowserGateway(routes: { _ in [Self.browserRoute("/app", "http://127.0.0.1:\(upstream.port)")] }) { provider, fixture, _ in
            var jar = CookieJar()
            _ = try await Self.signIn(fixture, provider, &jar)
            let port = fixture.gatewayPort
            let cookie = jar.header
            let socket = try await onOwnThread { try RawWebSocket(port: port, target: "/app/socket", headers: [cookie, ("Origin", "http://127.0.0.1:\(port)")]) }
            #expect(socket.status == 101, "\(socket.head)")
            let before = try await onOwnThread { () throws -> [UInt8]? in
                try socket.sendText("before")
                return try socket.readFrame()?.payload
            }
            #expect(before == Array("before".utf8))
            let logout = try await ProviderSignInTests.backChannel(fixture, try provider.logoutToken(sid: "sid-1", sub: nil))
            #expect(logout.status == 200, "\(logout.raw)")
            let close = try await onOwnThread { try socket.readFrame() }
            #expect(close?.opcode == 0x8, "a close frame, not a cut connection")
            if let payload = close?.payload, payload.count >= 2 {
                #expect(Int(payload[0]) << 8 | Int(payload[1]) == 1008)
                // Whichever tells this instance first: the logout's own end, or the access-change feed.
                let reason = String(decoding: payload.dropFirst(2), as: UTF8.self)
                #expect(["signed out at the provider", "session ended"].contains(reason), "\(reason)")
            }
            #expect(try await onOwnThread { try socket.readFrame() } == nil, "then the connection closes")
        }
        try await upstream.stop()
    }

    @Test("forward-auth takes the session cookie on an auth: browser route: 200 with the identity (and the route's identity fields); without a session a navigation is 401 naming the sign-in page in X-Portcullis-Sign-In for nginx and a 302 for Caddy, a fetch 401; a cross-site POST with the cookie is 403")
    func forwardAuthWithCookie() async throws {
        for family in ForwardAuthHeaderFamily.allCases {
            let fixture = try await GatewayFixture { configuration in
                configuration.routes = [Self.browserRoute("/app", "http://127.0.0.1:9")]
                configuration.trustedProxies = [IPNetwork("127.0.0.1")].compactMap { $0 }
                configuration.forwardAuthHeaders = family
            }
            try await fixture.addUser("alice")
            let signedIn = try await Answer.request(
                .POST, fixture.baseURL + "/.portcullis/sign_in", headers: [("Sec-Fetch-Site", "same-origin"), ("Content-Type", "application/x-www-form-urlencoded")],
                body: "username=alice&password=correct+horse+battery&rd=%2Fapp%2F", followRedirects: false)
            var jar = CookieJar()
            jar.take(signedIn)
            let value = try #require(jar["portcullis"])
            fixture.remember(value)
            let (uri, host) = family == .nginx ? ("X-Original-URI", "X-Original-Host") : ("X-Forwarded-Uri", "X-Forwarded-Host")
            func verify(_ headers: [(String, String)]) async throws -> Answer {
                try await Answer.request(.GET, fixture.baseURL + "/api/auth/verify", headers: headers, followRedirects: false)
            }
            let ok = try await verify([(uri, "/app/page"), (host, "app.example.test"), ("Cookie", "__Host-portcullis=junk; " + jar.header.1 + "; portcullis-flow-x=f; lang=en")])
            #expect(ok.status == 200 && ok.headers["X-Remote-User"].first?.hasPrefix("usr_") == true, "\(family): \(ok.raw)")
            #expect(ok.headers["X-Portcullis-App-Cookie"].first == "lang=en", "the browser's cookies without the gateway's, for the proxy to send the app: \(ok.headers)")
            let twice = try await verify([(uri, "/app/page"), (host, "app.example.test"), ("Cookie", jar.header.1 + "; " + jar.header.1)])
            #expect(twice.status == 400 && twice.error == "session_cookie_ambiguous", "\(family): \(twice.raw)")
            #expect(ok.headers["X-Auth-Request-User"].first == ok.headers["X-Remote-User"].first)
            fixture.remember(ok.headers["X-Portcullis-Assertion"].first ?? "")
            // The proxy's host is not one sign-in returns to (not the public host, a route's or a listed origin): the public host's root.
            let unlisted = try await verify([(uri, "/app/page?x=1"), (host, "app.example.test")] + Self.navigation)
            let signInAt = (family == .nginx ? unlisted.headers["X-Portcullis-Sign-In"] : unlisted.headers["Location"]).first
            #expect(signInAt == "http://127.0.0.1:8080/.portcullis/sign_in?rd=%2F", "\(unlisted.headers)")
            let navigation = try await verify([(uri, "/app/page?x=1"), (host, "127.0.0.1:8080")] + Self.navigation)
            let expected = "http://127.0.0.1:8080/.portcullis/sign_in?rd=" + FormEncoding.encode("http://127.0.0.1:8080/app/page?x=1")
            if family == .nginx {
                #expect(navigation.status == 401 && navigation.headers["X-Portcullis-Sign-In"].first == expected, "\(navigation.headers)")
            } else {
                #expect(navigation.status == 302 && navigation.headers["Location"].first == expected, "\(navigation.headers)")
            }
            let fetch = try await verify([(uri, "/app/data"), (host, "app.example.test"), ("Accept", "application/json")])
            #expect(fetch.status == 401 && fetch.headers["X-Portcullis-Sign-In"].isEmpty && fetch.headers["Location"].isEmpty)
            let method = family == .nginx ? "X-Original-Method" : "X-Forwarded-Method"
            let crossSite = try await verify([(uri, "/app/form"), (method, "POST"), (host, "app.example.test"), ("Origin", "https://evil.example"), jar.header])
            #expect(crossSite.status == 403 && crossSite.error == "csrf_refused", "\(family): \(crossSite.raw)")
            // Each of these decided on the event loop answers as Hummingbird's route (the same request made not plain by Content-Length: 0).
            let cases: [[(String, String)]] = [
                [(uri, "/app/page"), (host, "app.example.test"), ("Cookie", jar.header.1 + "; lang=en")],
                [(uri, "/app/page"), (host, "app.example.test"), ("Cookie", jar.header.1 + "; " + jar.header.1)],
                [(uri, "/app/page?x=1"), (host, "127.0.0.1:8080")] + Self.navigation,
                [(uri, "/app/data"), (host, "app.example.test"), ("Accept", "application/json"), ("Cookie", "portcullis=not-one-of-ours")],
                [(uri, "/app/form"), (method, "POST"), (host, "app.example.test"), ("Origin", "https://evil.example"), jar.header],
            ]
            let volatile: Set<String> = ["x-request-id", "x-portcullis-assertion", "date", "content-length"]
            for fields in cases {
                // Twice on one connection: both answered by the front (one connection's request ids), not by the route.
                let onLoop = try await ForwardAuthTests.rawAnswers(
                    port: fixture.gatewayPort, [ForwardAuthTests.verifyRequest(bearer: nil, fields), ForwardAuthTests.verifyRequest(bearer: nil, fields)], methods: ["GET", "GET"])
                #expect(ForwardAuthTests.answeredOnTheLoop(onLoop), "\(family) \(fields.map(\.0)): \(onLoop.map { $0.field("x-request-id") ?? "" })")
                let onRoute = try await ForwardAuthTests.rawAnswers(
                    port: fixture.gatewayPort, [ForwardAuthTests.verifyRequest(bearer: nil, fields, extra: "Content-Length: 0\r\n")], methods: ["GET"])
                let loopFields = onLoop.first?.fields.filter { !volatile.contains($0.name) }.map { "\($0.name): \($0.value)" }.sorted()
                let routeFields = onRoute.first?.fields.filter { !volatile.contains($0.name) }.map { "\($0.name): \($0.value)" }.sorted()
                #expect(onLoop.first?.status != nil && onLoop.first?.status == onRoute.first?.status && onLoop.first?.body == onRoute.first?.body, "\(family) \(fields.map(\.0))")
                #expect(loopFields == routeFields, "\(family): \(loopFields ?? []) and \(routeFields ?? [])")
            }
            try await fixture.stop()
        }
    }

    @Test("sign_in's rd is checked before any flow starts: another site, a scheme-relative or backslash spelling, userinfo, a non-route host are a 400 page; a path or a route host passes")
    func returnAddressChecked() async throws {
        try await Self.withBrowserGateway { _, fixture, _ in
            for rd in ["//evil.com", "/\\evil.com", "https://evil.com/", "https://127.0.0.1:8080@evil.com/", "http:www.evil.com", "/%09/evil.com", "javascript:alert(1)"] {
                let answer = try await Self.get(fixture, "/.portcullis/sign_in?rd=" + FormEncoding.encode(rd), CookieJar(), headers: Self.navigation)
                #expect(answer.status == 400 && answer.headers["X-Portcullis-Error"].first == "redirect_invalid", "\(rd): \(answer.status)")
                #expect(answer.headers["Set-Cookie"].isEmpty && answer.headers["Location"].isEmpty)
            }
            for rd in ["/app/x?y=1", "http://127.0.0.1:8080/app/x"] {
                let answer = try await Self.get(fixture, "/.portcullis/sign_in?rd=" + FormEncoding.encode(rd), CookieJar(), headers: Self.navigation)
                #expect(answer.status == 302, "\(rd): \(answer.raw)")
            }
        }
    }

    @Test("without a provider the sign-in page is the gateway's own account form: a wrong password is the form again (401) and counts as a failed login, the right one 303s to rd with the session cookie; a cross-site post is refused (a browser's form on a page), Origin: null passes only with Sec-Fetch-Site: same-origin")
    func accountForm() async throws {
        let targets = RecordingUpstream.Targets()
        let upstream = try await RecordingUpstream.start(recording: targets)
        let fixture = try await GatewayFixture { $0.routes = [Self.browserRoute("/app", "http://127.0.0.1:\(upstream.port)")] }
        try await fixture.addUser("alice")
        let form = try await Self.get(fixture, "/.portcullis/sign_in?rd=%2Fapp%2Fhome", CookieJar(), headers: Self.navigation)
        #expect(form.status == 200 && form.raw.contains("<form method=\"post\" action=\"/.portcullis/sign_in\">") && form.raw.contains("value=\"/app/home\""))
        #expect(form.headers["Content-Security-Policy"].first?.contains("frame-ancestors 'none'") == true)
        let own = [("Origin", "http://127.0.0.1:8080"), ("Content-Type", "application/x-www-form-urlencoded")]
        func post(_ body: String, _ headers: [(String, String)]) async throws -> Answer {
            try await Answer.request(.POST, fixture.baseURL + "/.portcullis/sign_in", headers: headers, body: body, followRedirects: false)
        }
        let wrong = try await post("username=alice&password=nope&rd=%2Fapp%2Fhome", own)
        #expect(wrong.status == 401 && wrong.raw.contains("role=\"alert\"") && wrong.headers["Set-Cookie"].isEmpty, "\(wrong.raw)")
        let crossSite = try await post("username=alice&password=correct+horse+battery&rd=%2Fapp%2Fhome", [("Origin", "https://evil.example"), own[1]])
        #expect(crossSite.status == 403 && crossSite.error == "csrf_refused")
        // As a browser sends another site's form: a page a person reads, never JSON; never signed in.
        let formFromElsewhere = [("Origin", "https://evil.example"), ("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "navigate"), own[1]]
        let refusalPage = try await post("username=alice&password=correct+horse+battery&rd=%2Fapp%2Fhome", formFromElsewhere)
        #expect(
            refusalPage.status == 403 && refusalPage.headers["Content-Type"].first?.hasPrefix("text/html") == true && refusalPage.raw.contains("csrf_refused"),
            "\(refusalPage.raw)")
        #expect(refusalPage.headers["X-Portcullis-Error"].first == "csrf_refused" && refusalPage.headers["Set-Cookie"].isEmpty)
        // Origin: null (a form posted from a page under Referrer-Policy: no-referrer) passes only with Sec-Fetch-Site: same-origin.
        for fetchSite in ["cross-site", "same-site", "none"] {
            let refused = try await post("username=alice&password=correct+horse+battery", [("Origin", "null"), ("Sec-Fetch-Site", fetchSite), own[1]])
            #expect(refused.status == 403 && refused.error == "csrf_refused", "Origin: null, Sec-Fetch-Site: \(fetchSite)")
        }
        let nullOrigin = try await post("username=alice&password=correct+horse+battery&rd=%2Fapp%2Fhome", [("Origin", "null"), ("Sec-Fetch-Site", "same-origin"), own[1]])
        #expect(nullOrigin.status == 303, "\(nullOrigin.raw)")
        #expect(form.headers["Referrer-Policy"].first == "same-origin", "under same-origin a browser's form carries its Origin")
        let right = try await post("username=alice&password=correct+horse+battery&rd=%2Fapp%2Fhome", own)
        #expect(right.status == 303 && right.headers["Location"].first == "/app/home", "\(right.raw)")
        var jar = CookieJar()
        jar.take(right)
        let value = try #require(jar["portcullis"])
        fixture.remember(value)
        let page = try await Self.get(fixture, "/app/home", jar)
        #expect(page.status == 200 && page.receivedHeaders["x-remote-user"]?.first?.hasPrefix("usr_") == true, "\(page.raw)")
        try await fixture.stop()
        try await upstream.stop()
    }
}

@Suite("Browser sessions: what an upstream may not do")
struct BrowserSessionUpstreamTests {
    @Test("an upstream's Set-Cookie for any of the gateway's cookie names (the session's in every deployment's spelling, a flow's) never reaches the browser; the app's own cookies do")
    func upstreamCannotSetGatewayCookies() async throws {
        let body = "ok"
        let answer = "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nSet-Cookie: app=1; Path=/\r\nSet-Cookie: __Host-portcullis=planted; Path=/; Secure\r\n"
            + "Set-Cookie: __Secure-portcullis=planted; Domain=example.com\r\nSet-Cookie: portcullis=planted\r\nSet-Cookie: PORTCULLIS-flow-abc=planted\r\n"
            + "Set-Cookie:  __host-portcullis-flow-x=planted\r\nSet-Cookie: portcullisx=kept\r\n\r\n" + body
        let upstream = try ScriptedUpstream(answers: ["/x": .init(answer)])
        let fixture = try await GatewayFixture { $0.routes = [ProxyRoute(prefix: "/app", upstream: "http://127.0.0.1:\(upstream.port)")] }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let got = try await fixture.send(.GET, "/app/x", bearer: login.accessToken)
        #expect(got.status == 200, "\(got.raw)")
        #expect(got.headers["Set-Cookie"] == ["app=1; Path=/", "portcullisx=kept"], "\(got.headers["Set-Cookie"])")
        try await fixture.stop()
        upstream.stop()
    }
}

/// The limits of `/.portcullis/sign_in` the tests check against.
enum BrowserSessionRoutesLimits {
    static let maximumFlowCookies = 5
}

@Suite("Browser session records: idle and absolute limits")
struct BrowserSessionBookTests {
    /// A cookie value of the right form, the same for a given name.
    static func value(_ name: String) -> String {
        Base64URL.encode(Array(name.utf8.prefix(32)) + Array(repeating: 0, count: 32 - min(32, name.utf8.count)))
    }

    static func record(_ name: String, createdAt: Double, expiresAt: Double) throws -> BrowserSessionRecord {
        BrowserSessionRecord(
            cookieHash: try BrowserSessionBook.hash(value(name)), sessionID: "ses_AAAAAAAAAAAAAAAAAAAAAA", userID: "usr_1", tenantID: "default", issuer: nil,
            subject: nil, provider: nil, claims: "{}", createdAt: createdAt, lastSeenAt: createdAt, expiresAt: expiresAt)
    }

    @Test("a session ends after idle_minutes without a request and at max_hours whatever its use, in memory and in the store; use within the idle limit keeps it, a use seen in memory is written to the store, and another instance's use (in the store) counts")
    func lifetimes() async throws {
        let directory = NSTemporaryDirectory() + "portcullis-browser-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try SQLiteStateSurface(path: directory + "/state.sqlite", busyTimeout: 5)
        let book = BrowserSessionBook(store: store, idleSeconds: 600, maximumSeconds: 3_600)
        let other = BrowserSessionBook(store: store, idleSeconds: 600, maximumSeconds: 3_600)
        let (idle, used, shared, swept) = (Self.value("idle"), Self.value("used"), Self.value("shared"), Self.value("swept"))
        try await book.insert(try Self.record("idle", createdAt: 1_000, expiresAt: 4_600), cookieValue: idle, claims: [:])
        try await book.insert(try Self.record("used", createdAt: 1_000, expiresAt: 4_600), cookieValue: used, claims: [:])
        for now in stride(from: 1_300.0, through: 4_500, by: 300) {
            guard case .live = book.lookup(cookieValue: used, now: now) else { Issue.record("used at \(now) but ended"); break }
        }
        if case .live = book.lookup(cookieValue: used, now: 4_700) { Issue.record("alive past max_hours") }
        #expect(try await book.load(cookieValue: used, now: 4_700) == nil)
        #expect(try await store.browserSession(cookieHash: try BrowserSessionBook.hash(used)) == nil, "an ended record is deleted")
        // Idle here for 700 s: memory does not decide alone; the store (no other use) ends it.
        guard case .unknown = book.lookup(cookieValue: idle, now: 1_700) else { Issue.record("idle beyond the limit answered from memory"); return }
        #expect(try await book.load(cookieValue: idle, now: 1_700) == nil)
        // Used on another instance: that use is in the store, so this one keeps it.
        try await book.insert(try Self.record("shared", createdAt: 2_000, expiresAt: 5_600), cookieValue: shared, claims: [:])
        _ = try await other.load(cookieValue: shared, now: 2_500)
        guard case .unknown = book.lookup(cookieValue: shared, now: 2_700) else { Issue.record("idle here answered from memory"); return }
        #expect(try await book.load(cookieValue: shared, now: 2_700) != nil)
        // A lookup in memory writes the last-seen time to the store when it is due, whoever looked it up
        // (a proxied request, forward-auth, the gateway's pages): other instances see the use.
        let renewed = Self.value("renewed")
        try await book.insert(try Self.record("renewed", createdAt: 1_000, expiresAt: 4_600), cookieValue: renewed, claims: [:])
        guard case .live = book.lookup(cookieValue: renewed, now: 1_100) else { Issue.record("renewed: not live at 1100"); return }
        var written = try await store.browserSession(cookieHash: try BrowserSessionBook.hash(renewed))?.lastSeenAt
        for _ in 0..<50 where written != 1_100 {
            try await Task.sleep(for: .milliseconds(40))
            written = try await store.browserSession(cookieHash: try BrowserSessionBook.hash(renewed))?.lastSeenAt
        }
        #expect(written == 1_100, "the lookup's use reached the store: \(String(describing: written))")
        try await book.insert(try Self.record("swept", createdAt: 3_000, expiresAt: 6_600), cookieValue: swept, claims: [:])
        #expect(try await book.sweep(now: 3_700) >= 1)
        #expect(try await store.browserSession(cookieHash: try BrowserSessionBook.hash(swept)) == nil)
        // A value of another form is never looked for in the store.
        #expect(try await book.load(cookieValue: "ses_AAAAAAAAAAAAAAAAAAAAAA", now: 3_700) == nil)
        await store.shutdown()
    }
}

@Suite("The session cookie: names, reading it from Cookie, keeping it from upstreams")
struct SessionCookieTests {
    @Test("its name follows the transport: __Host-portcullis on https, __Secure-portcullis with Domain under cookie_domain, portcullis on plain http (never Secure there, never a Domain)")
    func names() {
        let host = SessionCookie(secure: true, domain: nil)
        #expect(host.name == "__Host-portcullis" && host.setting("v", maxAge: 60) == "__Host-portcullis=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure")
        let domain = SessionCookie(secure: true, domain: "example.com")
        #expect(domain.setting("v", maxAge: 60) == "__Secure-portcullis=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Domain=example.com; Secure")
        #expect(domain.settingFlow("f1", value: "s", maxAge: 600) == "__Host-portcullis-flow-f1=s; Path=/; Max-Age=600; HttpOnly; SameSite=Lax; Secure", "a flow's cookie is host-only")
        let plain = SessionCookie(secure: false, domain: "example.com")
        #expect(plain.name == "portcullis" && plain.clearing == "portcullis=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax")
    }

    @Test("the session cookie is read by its exact name among other cookies, spaces and tabs around pairs; a name that only begins or ends like it is another cookie; twice is ambiguous")
    func reading() {
        let cookie = SessionCookie(secure: true, domain: nil)
        let cases: [([String], SessionCookie.Found)] = [
            (["__Host-portcullis=abc"], .one("abc")), (["a=1; __Host-portcullis=abc; b=2"], .one("abc")), (["a=1;\t__Host-portcullis=abc \t"], .one("abc")),
            (["a=1", "__Host-portcullis=abc"], .one("abc")), (["__Host-portcullisx=abc; x__Host-portcullis=abc; __host-portcullis=abc"], .none),
            (["__Host-portcullis-flow-1=abc"], .none), (["__Host-portcullis"], .none), (["__Host-portcullis="], .one("")), ([], .none),
            (["__Host-portcullis=a; __Host-portcullis=b"], .several), (["__Host-portcullis=a", "__Host-portcullis=a"], .several),
        ]
        for (values, expected) in cases {
            #expect(cookie.sessionValue(in: values) == expected, "\(values)")
        }
    }

    @Test("an upstream's Set-Cookie sets one of the gateway's cookies as a browser reads it: spaces or tabs around the name, a nameless cookie whose value begins with the name; the app's own do not")
    func settingGatewayCookies() {
        let cases: [(String, Bool)] = [
            ("__Host-portcullis=x; Path=/", true), ("__Host-portcullis =x", true), ("\t portcullis\t=x", true), ("=portcullis=x", true), ("= __Secure-portcullis=x", true),
            ("portcullis", true), ("PORTCULLIS-flow-1=x", true), ("app=1; Path=/portcullis", false), ("portcullisx=1", false), ("=app=1", false), ("app=portcullis", false),
        ]
        for (value, expected) in cases {
            #expect(SessionCookie.setsGatewayCookie(Array(value.utf8)) == expected, "\(value)")
        }
    }

    @Test("the gateway's cookies, in every deployment's spelling and any letter case, are removed from what an upstream gets; the app's own pass in order; nothing left, no field")
    func stripping() {
        let cases: [(String, String?)] = [
            ("theme=dark", "theme=dark"), ("theme=dark; portcullis=s; lang=en", "theme=dark; lang=en"), ("__Host-portcullis=s", nil),
            ("__Secure-portcullis=s; a=1", "a=1"), ("a=1; PORTCULLIS=s; __host-portcullis-flow-x=f", "a=1"), ("portcullisx=1; myportcullis=2", "portcullisx=1; myportcullis=2"),
            ("a=portcullis", "a=portcullis"),
        ]
        for (value, expected) in cases {
            #expect(SessionCookie.withoutGatewayCookies(value) == expected, "\(value)")
        }
    }
}
