import ConfigurationReading
import DataPlane
import Foundation
import Gateway
import JOSE
import Testing
import TrafficCop
import TrustedIssuers

/// Who may reach what (issue 38): a route's methods, `auth: none` and `require`, read from
/// the configuration and enforced on the data plane from the verified token's claims.
@Suite("Route policies: who may reach which upstream")
struct RoutePolicyTests {
    static func load(_ yaml: String) async throws -> ConfigurationValues {
        let directory = NSTemporaryDirectory() + "portcullis-routes-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try yaml.write(toFile: directory + "/routes.yaml", atomically: true, encoding: .utf8)
        return try await ConfigurationValues.load(path: directory + "/routes.yaml", environment: false)
    }

    static func routes(_ entries: String, trust: String = "") async throws -> [ProxyRoute] {
        try GatewayConfiguration(reading: try await load("gateway:\n  port: 9999\n  routes:\n" + entries + trust)).routes
    }

    static let keycloak = "trust:\n  issuers:\n    - issuer: https://keycloak.example.com/realms/acme\n      audiences: [portcullis-api]\n      tenant: acme\n"

    @Test("routes read as maps beside the short form: methods (GET brings HEAD), auth none, and require compiled into a policy")
    func routesRead() async throws {
        let routes = try await Self.routes(
            """
                - /api/plain=http://127.0.0.1:9000
                - prefix: /api/billing
                  upstream: https://billing.internal:8443
                  methods: [get, POST]
                  require:
                    scopes: [billing:read]
                    any_of:
                      - claim: realm_access.roles
                        contains: billing-admin
                      - {claim: groups, contains: finance}
                    tenants: [acme]
                    issuers: [local, https://keycloak.example.com/realms/acme]
                    session: live
                - prefix: /public/status
                  upstream: http://status.internal:8080
                  auth: none

            """, trust: Self.keycloak)
        #expect(routes.count == 3)
        #expect(routes[0] == ProxyRoute(prefix: "/api/plain", upstream: "http://127.0.0.1:9000"))
        #expect(routes[1].methods == [.get, .post, .head])
        let policy = try #require(routes[1].policy)
        #expect(policy.scopes == ["billing:read"] && policy.anyOf.map(\.claim) == ["realm_access.roles", "groups"])
        #expect(policy.tenants == ["acme"] && policy.issuers == ["local", "https://keycloak.example.com/realms/acme"] && policy.requiresLiveSession)
        #expect(routes[2].requiresToken == false && routes[2].policy == nil)
    }

    @Test("a route mistake stops start naming the route and the key: an unknown key, a bad claim path, an empty rule, an unknown method, another auth, require with auth none, a prefix another route has")
    func routeMistakes() async throws {
        let cases: [(String, String)] = [
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, colour: red}\n", "gateway.routes[0].colour"),
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {any_of: [{claim: 'roles..x', contains: a}]}}\n", "gateway.routes[0].require.any_of[0].claim"),
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {any_of: []}}\n", "gateway.routes[0].require.any_of"),
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {}}\n", "gateway.routes[0].require"),
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {scopes: []}}\n", "gateway.routes[0].require.scopes"),
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {any_of: [{claim: groups}]}}\n", "gateway.routes[0].require.any_of[0].contains"),
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {session: maybe}}\n", "gateway.routes[0].require.session"),
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {roles: [x]}}\n", "gateway.routes[0].require.roles"),
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, methods: [TRACE]}\n", "gateway.routes[0].methods"),
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, auth: basic}\n", "gateway.routes[0].auth"),
            ("    - {prefix: /a, upstream: http://127.0.0.1:1, auth: none, require: {scopes: [x]}}\n", "gateway.routes[0].require"),
            ("    - {upstream: http://127.0.0.1:1}\n", "gateway.routes[0].prefix"),
            ("    - {prefix: /a/../b, upstream: http://127.0.0.1:1}\n", "gateway.routes[0].prefix"),
            ("    - /api/x=http://127.0.0.1:1\n    - {prefix: /api/x/, upstream: http://127.0.0.1:2}\n", "gateway.routes[1]"),
            ("    - {prefix: /api/x, upstream: http://127.0.0.1:1}\n    - /api/x=http://127.0.0.1:2\n", "gateway.routes[1]"),
        ]
        for (yaml, key) in cases {
            let error = await #expect(throws: ConfigurationError.self, "\(key)") {
                _ = try await Self.routes(yaml)
            }
            #expect(error?.message.contains(key) == true, "\(key): \(error?.message ?? "no error")")
        }
        // Prefixes that only share characters, not a path segment, do not overlap.
        #expect(try await Self.routes("    - /api/x=http://127.0.0.1:1\n    - /api/xy=http://127.0.0.1:2\n").count == 2)
    }

    @Test("a route may list WebDAV's and CalDAV's methods (any case, as HTTP/1.1's parser knows them); CONNECT, TRACE and a token the parser does not know are refused naming the method")
    func extensionMethods() async throws {
        let routes = try await Self.routes("    - {prefix: /dav, upstream: http://127.0.0.1:1, methods: [get, PROPFIND, proppatch, REPORT, MKCOL, MKCALENDAR, COPY, MOVE, LOCK, UNLOCK]}\n")
        #expect(routes[0].methods?.map(\.rawValue) == ["GET", "PROPFIND", "PROPPATCH", "REPORT", "MKCOL", "MKCALENDAR", "COPY", "MOVE", "LOCK", "UNLOCK", "HEAD"])
        for (method, says) in [("CONNECT", "tunnel"), ("trace", "echoes"), ("FROBNICATE", "known: GET"), ("PROP FIND", "known: GET")] {
            do {
                _ = try await Self.routes("    - {prefix: /dav, upstream: http://127.0.0.1:1, methods: [GET, '\(method)']}\n")
                Issue.record("\(method) was accepted")
            } catch let error as ConfigurationError {
                #expect(error.message.contains("gateway.routes[0].methods") && error.message.contains(method) && error.message.contains(says), "\(error.message)")
            }
        }
    }

    @Test("a claim rule on a boolean or a number holds for the value YAML writes (email_verified: true, level: 2), and not for another; a string claim still compares as text")
    func claimRulesOnScalars() async throws {
        let verified = try #require(RoutePolicy.ClaimRule(path: "email_verified", contains: "true"))
        #expect(verified.holds(in: ["email_verified": true]) && !verified.holds(in: ["email_verified": false]))
        #expect(verified.holds(in: ["email_verified": "true"]) && !verified.holds(in: ["email_verified": "True"]) && !verified.holds(in: [:]))
        let unverified = try #require(RoutePolicy.ClaimRule(path: "email_verified", contains: "false"))
        #expect(unverified.holds(in: ["email_verified": false]) && !unverified.holds(in: ["email_verified": true]))
        #expect(try #require(RoutePolicy.ClaimRule(path: "email_verified", contains: "yes")).holds(in: ["email_verified": true]) == false, "a boolean only for true or false")
        #expect(try #require(RoutePolicy.ClaimRule(path: "email_verified", contains: "True")).holds(in: ["email_verified": true]), "YAML 1.2's True is true")
        let level = try #require(RoutePolicy.ClaimRule(path: "acr.level", contains: "2"))
        #expect(level.holds(in: ["acr": ["level": 2]]) && level.holds(in: ["acr": ["level": 2.0]]) && !level.holds(in: ["acr": ["level": 3]]))
        #expect(level.holds(in: ["acr": ["level": [1, 2]]]), "a number among an array's elements")
        #expect(!level.holds(in: ["acr": ["level": ["x": 2]]]), "a map is no scalar")
        // Read from YAML as the guides write it (an unquoted true), it holds for the boolean claim.
        let routes = try await Self.routes("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {any_of: [{claim: email_verified, contains: true}]}}\n")
        #expect(routes[0].policy?.refusal(claims: ["email_verified": true], tenantID: "t", issuer: nil, hasSession: false) == nil)
        #expect(routes[0].policy?.refusal(claims: ["email_verified": false], tenantID: "t", issuer: nil, hasSession: false)?.requirement == "any_of")
    }

    @Test("email_domains admits a verified email under a listed domain only: exact domain (any case), *. for subdomains, * for any; unverified, absent, look-alike or subdomain-of-exact addresses are refused")
    func emailDomains() async throws {
        let domains = try #require(EmailDomains(["Example.com", "*.corp.example"]))
        func admits(_ email: JSONValue?, verified: JSONValue? = true) -> Bool {
            var claims: JSONObject = [:]
            claims["email"] = email
            claims["email_verified"] = verified
            return domains.admits(claims)
        }
        #expect(admits("ann@example.com") && admits("Ann@EXAMPLE.COM") && admits("ann@eu.corp.example"))
        #expect(admits("ann@example.com", verified: "true"), "Cognito's string true")
        #expect(!admits("ann@example.com", verified: false) && !admits("ann@example.com", verified: nil) && !admits("ann@example.com", verified: "yes"))
        #expect(!admits("ann@sub.example.com") && !admits("ann@evilexample.com") && !admits("ann@example.com.evil.test") && !admits("ann@corp.example"))
        #expect(!admits("@example.com") && !admits("example.com") && !admits(nil) && !admits(1) && !admits("ann@example.com "))
        #expect(!admits("evil@attacker.test@example.com ") && admits("\"odd@name\"@example.com"), "the address is read at its last @")
        let kelvin = try #require(EmailDomains(["kelvin.example"]))
        #expect(!kelvin.admits(["email": "ann@\u{212A}elvin.example", "email_verified": true]) && kelvin.admits(["email": "ann@Kelvin.example", "email_verified": true]),
                "no Unicode folding into a listed domain (U+212A KELVIN SIGN is not k)")
        #expect(EmailDomains(["\u{212A}.example"]) == nil)
        #expect(try #require(EmailDomains(["*"])).admits(["email": "x@anything.test", "email_verified": true]))
        #expect(EmailDomains([]) == nil && EmailDomains(["example.com/x"]) == nil && EmailDomains(["@example.com"]) == nil && EmailDomains(["*example.com"]) == nil)
        let routes = try await Self.routes("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {email_domains: [example.com]}}\n")
        let refusal = routes[0].policy?.refusal(claims: ["email": "ann@other.test", "email_verified": true], tenantID: "t", issuer: nil, hasSession: false)
        #expect(refusal?.requirement == "email_domains" && refusal?.message.contains("example.com") == true)
        #expect(routes[0].policy?.refusal(claims: ["email": "ann@example.com", "email_verified": true], tenantID: "t", issuer: nil, hasSession: false) == nil)
    }

    @Test("config refuses a rule that could never match, naming it: require.issuers naming an issuer that is not trusted (nor local), require.tenants none of whose tenants the listed issuers' users can be in, and email_domains that are no domains")
    func rulesThatNeverMatch() async throws {
        do {
            _ = try await Self.routes("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {issuers: [https://keycloak.example.com/realms/acm]}}\n", trust: Self.keycloak)
            Issue.record("an untrusted issuer was accepted")
        } catch let error as ConfigurationError {
            #expect(error.description.contains("gateway.routes[0].require.issuers") && error.description.contains("https://keycloak.example.com/realms/acm"))
        }
        do {
            _ = try await Self.routes("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {email_domains: [\"@example.com\"]}}\n")
            Issue.record("a bad email domain was accepted")
        } catch let error as ConfigurationError {
            #expect(error.description.contains("gateway.routes[0].require.email_domains"))
        }
        _ = try await Self.routes("    - {prefix: /a, upstream: http://127.0.0.1:1, require: {issuers: [local, https://keycloak.example.com/realms/acme]}}\n", trust: Self.keycloak)
        // The issuer's users are all in acme: a route asking for another tenant of them could never admit one.
        do {
            _ = try await Self.routes(
                "    - {prefix: /a, upstream: http://127.0.0.1:1, require: {issuers: [https://keycloak.example.com/realms/acme], tenants: [globex]}}\n", trust: Self.keycloak)
            Issue.record("a tenant the issuer's users can never be in was accepted")
        } catch let error as ConfigurationError {
            #expect(error.description.contains("gateway.routes[0].require.tenants") && error.description.contains("globex") && error.description.contains("acme"), "\(error)")
        }
        // Its own tenant, or local beside it (local accounts may be in any tenant), is a rule that can match.
        _ = try await Self.routes(
            "    - {prefix: /a, upstream: http://127.0.0.1:1, require: {issuers: [https://keycloak.example.com/realms/acme], tenants: [acme, globex]}}\n", trust: Self.keycloak)
        _ = try await Self.routes(
            "    - {prefix: /a, upstream: http://127.0.0.1:1, require: {issuers: [local, https://keycloak.example.com/realms/acme], tenants: [globex]}}\n", trust: Self.keycloak)
    }

    @Test("a claim rule holds for an array holding the value or a string equal to it or listing it; an absent path or another type fails, never matches")
    func claimRules() throws {
        let rule = try #require(RoutePolicy.ClaimRule(path: "realm_access.roles", contains: "admin"))
        #expect(rule.holds(in: ["realm_access": ["roles": ["user", "admin"]]]))
        #expect(!rule.holds(in: ["realm_access": ["roles": ["user"]]]))
        #expect(!rule.holds(in: ["realm_access": ["roles": ["admins"]]]), "no substring match")
        #expect(!rule.holds(in: ["realm_access": "admin"]), "a string where a map is needed")
        #expect(!rule.holds(in: ["realm_access": ["roles": 1]]) && !rule.holds(in: ["realm_access": ["roles": [["admin"]]]]))
        #expect(!rule.holds(in: [:]) && !rule.holds(in: ["realm_access.roles": ["admin"]]), "a dotted name is a path, not a key")
        let groups = try #require(RoutePolicy.ClaimRule(path: "groups", contains: "finance"))
        #expect(groups.holds(in: ["groups": "finance"]) && groups.holds(in: ["groups": "ops finance"]) && !groups.holds(in: ["groups": "financeops"]))
        #expect(RoutePolicy.ClaimRule(path: "", contains: "x") == nil && RoutePolicy.ClaimRule(path: "a.", contains: "x") == nil)
        #expect(RoutePolicy.ClaimRule(path: Array(repeating: "a", count: 9).joined(separator: "."), contains: "x") == nil)
    }

    @Test("through the real gateway: a policy of scopes, a claim rule, a tenant and an issuer admits a provider token that holds them all, and refuses each that misses one with 403 insufficient_scope naming the requirement (scope= for scopes; a claim rule's claims and values only in the log, under the request id), never reaching the upstream; methods outside the list are 405 with Allow")
    func policyOnTheDataPlane() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let targets = RecordingUpstream.Targets()
        let upstream = try await RecordingUpstream.start(recording: targets)
        var policy = RoutePolicy(scopes: ["billing:read"], tenants: ["acme"], issuers: [provider.issuer])
        policy.anyOf = [try #require(RoutePolicy.ClaimRule(path: "realm_access.roles", contains: "billing-admin")),
                        try #require(RoutePolicy.ClaimRule(path: "groups", contains: "finance"))]
        let fixture = try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            configuration.routes = [
                ProxyRoute(prefix: "/api/billing", upstream: "http://127.0.0.1:\(upstream.port)", methods: [.get, .head, .post], policy: policy),
                ProxyRoute(prefix: "/api/local", upstream: "http://127.0.0.1:\(upstream.port)", policy: RoutePolicy(issuers: ["local"])),
            ]
        })
        try await fixture.addUser("alice", tenant: "acme")
        let local = try await fixture.login("alice", tenant: "acme")
        let allowed = try provider.token(claims: ["scope": "openid billing:read", "realm_access": ["roles": ["billing-admin"]]])
        let ok = try await fixture.send(.GET, "/api/billing/invoices", bearer: allowed)
        #expect(ok.status == 200, "\(ok.raw)")
        #expect(ok.receivedHeaders["x-portcullis-assertion"]?.count == 1 && ok.receivedHeaders["authorization"] == nil)
        let byGroup = try provider.token(claims: ["scope": "billing:read", "groups": ["finance"]])
        #expect(try await fixture.send(.POST, "/api/billing/x", bearer: byGroup, body: "{}").status == 200, "any_of: the second rule")
        let before = targets.all.count
        let refusals: [(String, String, String)] = [
            ("scopes", try provider.token(claims: ["scope": "openid", "groups": ["finance"]]), "scopes"),
            ("no scope claim", try provider.token(claims: ["groups": ["finance"]]), "scopes"),
            ("any_of", try provider.token(claims: ["scope": "billing:read", "groups": ["ops"], "realm_access": ["roles": 1]]), "any_of"),
            ("any_of, the claims absent", try provider.token(claims: ["scope": "billing:read"]), "any_of"),
            ("local issuer", local.accessToken, "scopes"),
        ]
        for (name, token, requirement) in refusals {
            let answer = try await fixture.send(.GET, "/api/billing/invoices", bearer: token)
            #expect(answer.status == 403 && answer.error == "insufficient_scope" && answer.json["reason"] == .string(requirement), "\(name): \(answer.raw)")
            let challenge = answer.headers["WWW-Authenticate"].first ?? ""
            #expect(challenge.contains("error=\"insufficient_scope\""), "\(name): \(challenge)")
            #expect(challenge.contains("scope=\"billing:read\"") == (requirement == "scopes"), "\(name): \(challenge)")
            #expect(!answer.raw.contains("ops") && !answer.raw.contains("openid"), "\(name): the caller's claims are never echoed")
            if requirement == "any_of" {
                // Nor the rule's: what would pass is the operator's to read, under the answer's request id.
                #expect(!answer.raw.contains("finance") && !answer.raw.contains("billing-admin") && !answer.raw.contains("groups"), "\(name): \(answer.raw)")
                let requestID = try #require(answer.headers["X-Request-Id"].first)
                let why = await fixture.log.lines(containing: "route refused", requestID)
                #expect(why.first?.contains("groups containing finance") == true, "\(name): \(why)")
            }
        }
        #expect(targets.all.count == before, "no refused request reached the upstream")
        // A scope claim of another type is the token's fault (the access-token rules): 401, not 403.
        let array = try await fixture.send(.GET, "/api/billing/x", bearer: try provider.token(claims: ["scope": ["billing:read"], "groups": ["finance"]]))
        #expect(array.status == 401)
        let put = try await fixture.send(.PUT, "/api/billing/x", bearer: allowed, body: "{}")
        #expect(put.status == 405 && put.headers["Allow"].first == "GET, HEAD, POST", "\(put.headers)")
        // HEAD comes with GET: forwarded (the recording upstream's router has no HEAD route and answers 404 itself).
        let head = try await fixture.send(.HEAD, "/api/billing/x", bearer: allowed)
        #expect(head.status == 404 && head.headers["Allow"].isEmpty, "\(head.status)")
        // issuers: [local] admits the gateway's own accounts and refuses a provider's users.
        #expect(try await fixture.send(.GET, "/api/local/x", bearer: local.accessToken).status == 200)
        let foreign = try await fixture.send(.GET, "/api/local/x", bearer: allowed)
        #expect(foreign.status == 403 && foreign.json["reason"] == "issuers")
        try await fixture.stop()
        try await upstream.stop()
        try await provider.stop()
    }

    @Test("session: live needs X-Session-Id naming a live session the caller owns; tenants refuses another tenant's token")
    func sessionAndTenant() async throws {
        let upstream = try await RecordingUpstream.start()
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [
                ProxyRoute(prefix: "/api/live", upstream: "http://127.0.0.1:\(upstream.port)", policy: RoutePolicy(requiresLiveSession: true)),
                ProxyRoute(prefix: "/api/acme", upstream: "http://127.0.0.1:\(upstream.port)", policy: RoutePolicy(tenants: ["acme"])),
            ]
        }
        try await fixture.addUser("alice")
        try await fixture.addUser("bob")
        let alice = try await fixture.login("alice")
        let bob = try await fixture.login("bob")
        let without = try await fixture.send(.GET, "/api/live/x", bearer: alice.accessToken)
        #expect(without.status == 403 && without.json["reason"] == "session", "\(without.raw)")
        #expect(try await fixture.send(.GET, "/api/live/x", bearer: alice.accessToken, headers: [("X-Session-Id", alice.sessionID)]).status == 200)
        let others = try await fixture.send(.GET, "/api/live/x", bearer: bob.accessToken, headers: [("X-Session-Id", alice.sessionID)])
        #expect(others.status == 403 && others.error == "session_forbidden")
        _ = try await fixture.post("/api/auth/logout", bearer: alice.accessToken, ["session_id": .string(alice.sessionID)])
        let ended = try await fixture.send(.GET, "/api/live/x", bearer: bob.accessToken, headers: [("X-Session-Id", bob.sessionID)])
        #expect(ended.status == 200, "bob's own live session")
        let tenant = try await fixture.send(.GET, "/api/acme/x", bearer: bob.accessToken)
        #expect(tenant.status == 403 && tenant.json["reason"] == "tenants")
        try await fixture.stop()
        try await upstream.stop()
    }

    @Test("auth: none forwards a request without a token with an anonymous assertion; a token that is sent is still checked (a bad one is 401) and never reaches the upstream")
    func authNone() async throws {
        let targets = RecordingUpstream.Targets()
        let upstream = try await RecordingUpstream.start(recording: targets)
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [ProxyRoute(prefix: "/public/status", upstream: "http://127.0.0.1:\(upstream.port)", requiresToken: false)]
        }
        try await fixture.addUser("alice")
        let alice = try await fixture.login("alice")
        let anonymous = try await fixture.send(.GET, "/public/status/now")
        #expect(anonymous.status == 200, "\(anonymous.raw)")
        let assertion = try #require(anonymous.receivedHeaders["x-portcullis-assertion"]?.first)
        let claims = try StrictJSONReader().parseObject(try JWSCompact.parse(assertion).payload)
        #expect(claims["sub"] == nil && claims["tenant_id"] == nil, "an anonymous assertion names no user")
        let signedIn = try await fixture.send(.GET, "/public/status/now", bearer: alice.accessToken, headers: [("X-Session-Id", alice.sessionID)])
        #expect(signedIn.status == 200 && signedIn.receivedHeaders["authorization"] == nil && signedIn.receivedHeaders["x-session-id"] == nil)
        let bad = try await fixture.send(.GET, "/public/status/now", bearer: "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
        #expect(bad.status == 401, "a token that is sent is checked")
        fixture.remember(assertion)
        try await fixture.stop()
        try await upstream.stop()
    }
}
