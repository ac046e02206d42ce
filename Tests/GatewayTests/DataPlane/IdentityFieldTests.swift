import DataPlane
import EdgeHTTP
import Foundation
import Gateway
import HTTPTypes
import JOSE
import Testing
import TrafficCop

/// The person's name, not only an opaque id, in what the app gets (issue 54): `identity_headers`
/// `username`, `subject`, `name` and `claims`, beside the stable `user`.
@Suite("Identity fields: the user's names and chosen claims for the app")
struct IdentityFieldTests {
    @Test("a name sent as a field holds no format character (a bidi override or isolate, a zero-width joiner) nor control: left out, never sent as it would show; other UTF-8 passes")
    func namesWithoutFormatCharacters() {
        for bad in ["adm\u{202E}nimda", "\u{2066}root\u{2069}", "ann\u{200D}lee", "x\u{FEFF}", "a\u{85}b", "a\u{7F}"] {
            #expect(!IdentityFieldValues.isFieldText(bad), "\(bad.unicodeScalars.map { String($0.value, radix: 16) })")
        }
        for good in ["Ann Lée", "李雷", "ann.lee", "Zoë O'Neil"] {
            #expect(IdentityFieldValues.isFieldText(good), "\(good)")
        }
    }

    @Test("username, subject, name and claims are read from identity_headers; a bad claim path, an empty claims map or a field another key names is refused naming the key")
    func readFromTheConfiguration() async throws {
        let read = try await HostRouteTests.configuration(
            """
              routes:
                - prefix: /app
                  upstream: http://127.0.0.1:3000
                  identity_headers:
                    user: X-WEBAUTH-USER
                    username: X-WEBAUTH-NAME
                    subject: X-Subject
                    name: X-Full-Name
                    claims: {department: X-Department, realm_access.roles: X-Roles}
            """)
        let names = try #require(read.routes[0].identityFields)
        #expect(names.user == "X-WEBAUTH-USER" && names.username == "X-WEBAUTH-NAME" && names.subject == "X-Subject" && names.name == "X-Full-Name")
        #expect(names.claims == [.init(path: ["department"], field: "X-Department"), .init(path: ["realm_access", "roles"], field: "X-Roles")])
        #expect(Set(names.names.map(HeaderScreen.folded)) == ["x-webauth-user", "x-webauth-name", "x-subject", "x-full-name", "x-department", "x-roles"], "every name is stripped from clients")
        let refused: [(String, String)] = [
            ("identity_headers: {claims: {department: X-User}, user: x_user}", "gateway.routes[0].identity_headers.claims.department"),
            ("identity_headers: {claims: {'a..b': X-A}}", "gateway.routes[0].identity_headers.claims.a..b"),
            ("identity_headers: {claims: {}}", "gateway.routes[0].identity_headers.claims"),
            ("identity_headers: {claims: {department: Authorization}}", "gateway.routes[0].identity_headers.claims.department"),
            ("identity_headers: {name: 'X Name'}", "gateway.routes[0].identity_headers.name"),
        ]
        for (fields, key) in refused {
            let error = try await HostRouteTests.refusal("  routes:\n    - {prefix: /app, upstream: 'http://127.0.0.1:3000', \(fields)}\n")
            #expect(error?.key == key, "\(fields): \(error?.message ?? "accepted")")
        }
    }

    @Test("a claim's value as field text: strings, whole numbers without a fraction, booleans, arrays joined with a comma; maps, control bytes, padding spaces and more than 512 bytes are left out; UTF-8 names go as they are")
    func claimText() {
        let claims: JSONObject = [
            "department": "Sales", "level": 3, "ratio": 0.5, "admin": true, "roles": ["a", "b,c", 7, ["x"]], "org": ["unit": "ops"], "bad": "a\r\nX-Injected: 1",
            "padded": " x", "long": .string(String(repeating: "x", count: 513)), "named": "José Ñúñez", "empty": "", "c1": "a\u{9B}31m", "del": "a\u{7F}",
        ]
        func text(_ path: String) -> String? { IdentityFieldValues.claimText(claims, path: path.split(separator: ".").map(String.init)) }
        #expect(text("department") == "Sales" && text("level") == "3" && text("ratio") == "0.5" && text("admin") == "true")
        #expect(text("roles") == "a,7", "an element holding the separator, or not a scalar, is left out")
        #expect(text("org.unit") == "ops" && text("org") == nil && text("absent") == nil)
        #expect(text("bad") == nil && text("padded") == nil && text("long") == nil && text("empty") == nil)
        #expect(text("c1") == nil && text("del") == nil, "a C1 control (a terminal's CSI) or DEL is no text")
        #expect(text("named") == "José Ñúñez")
    }

    @Test("the gateway's own accounts: their access tokens (from login and from refresh) name the account, so a route's username field carries it on a Bearer request too")
    func ownAccountsUsername() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await GatewayFixture {
            var route = ProxyRoute(prefix: "/app", upstream: "http://127.0.0.1:\(upstream.port)")
            route.identityFields = IdentityFieldNames(user: "X-WEBAUTH-USER", username: "X-WEBAUTH-NAME", subject: "X-Subject")
            $0.routes = [route]
        }
        try await fixture.addUser("alice")
        let login = try await fixture.login("alice")
        let answer = try await fixture.send(.GET, "/app/x", bearer: login.accessToken)
        #expect(answer.receivedHeaders["x-webauth-name"] == ["alice"], "\(answer.receivedHeaders)")
        #expect(answer.receivedHeaders["x-subject"] == answer.receivedHeaders["x-webauth-user"], "the gateway's own accounts: sub is the user id")
        let refreshed = try await fixture.send(.POST, "/api/auth/refresh", body: #"{"refresh_token":"\#(login.refreshToken)"}"#)
        let token = try #require(refreshed.json["access_token"]?.stringValue, "\(refreshed.raw)")
        fixture.remember(token)
        let again = try await fixture.send(.GET, "/app/x", bearer: token)
        #expect(again.receivedHeaders["x-webauth-name"] == ["alice"], "after a refresh: \(again.receivedHeaders)")
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("through the gateway: the upstream gets the user id, the provider's preferred_username, sub and name, and the chosen claims; a client's copies never pass; forward-auth answers them too")
    func servedToTheUpstream() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let upstream = try await RecordingUpstream.start()
        let fixture = try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            var route = ProxyRoute(prefix: "/app", upstream: "http://127.0.0.1:\(upstream.port)")
            route.identityFields = IdentityFieldNames(
                user: "X-WEBAUTH-USER", username: "X-WEBAUTH-NAME", subject: "X-Subject", name: "X-Full-Name",
                claims: [.init(path: ["department"], field: "X-Department"), .init(path: ["realm_access", "roles"], field: "X-Roles")])
            configuration.routes = [route]
            configuration.trustedProxies = [IPNetwork("127.0.0.1")].compactMap { $0 }
        })
        let token = try provider.token(claims: [
            "preferred_username": "ann.lee", "name": "Ann Lée", "department": "Finance", "realm_access": ["roles": ["viewer", "editor"]],
        ])
        let spoofed = [("X-WEBAUTH-NAME", "admin"), ("x_full_name", "Admin"), ("X-Department", "Board")]
        let answer = try await fixture.send(.GET, "/app/page", bearer: token, headers: spoofed)
        #expect(answer.status == 200, "\(answer.raw)")
        let received = answer.receivedHeaders
        #expect(received["x-webauth-user"]?.first?.hasPrefix("ext_") == true, "user stays the stable id")
        #expect(received["x-webauth-name"] == ["ann.lee"] && received["x-subject"] == ["user-1"])
        #expect(received["x-full-name"] == ["Ann Lée"], "\(received)")
        #expect(received["x-department"] == ["Finance"] && received["x-roles"] == ["viewer,editor"])
        #expect(received["x_full_name"] == nil)
        // A token without those claims: the fields are not sent, and the client's copies are still stripped.
        let bare = try await fixture.send(.GET, "/app/page", bearer: try provider.token(claims: [:]), headers: spoofed)
        #expect(bare.status == 200 && bare.receivedHeaders["x-webauth-name"] == nil && bare.receivedHeaders["x-department"] == nil, "\(bare.receivedHeaders)")
        // Forward-auth: oauth2-proxy's X-Auth-Request-Preferred-Username, and the route's own fields.
        let decided = try await fixture.send(.GET, "/api/auth/verify", bearer: token, headers: [("X-Original-URI", "/app/page")])
        #expect(decided.status == 200, "\(decided.raw)")
        #expect(decided.headers["X-Auth-Request-Preferred-Username"].first == "ann.lee" && decided.headers["X-Department"].first == "Finance")
        #expect(decided.headers["X-Subject"].first == "user-1" && decided.headers["X-Roles"].first == "viewer,editor")
        try await fixture.stop()
        try await upstream.stop()
        try await provider.stop()
    }
}
