import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JOSE
import RuntimeAPI
import Runtime
import StateSurface
import Testing

@Suite("Runtime HTTP API over a real socket")
struct RuntimeHTTPTests {
    @Test("every route refuses a missing, expired, forged, wrong-audience or access-token assertion with 401")
    func assertionsAreRequired() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        let forger = try JWSKey.generate(algorithm: .es256, kid: "gw1")  // same kid, different key
        let accessToken = try AccessTokenIssuer(keys: fixture.keys, issuer: fixture.configuration.assertionIssuer, audience: "runtime")
            .issue(subject: "alice", tenantID: "acme", clientID: "web").token
        let cases: [(String, HTTPFields, String)] = [
            ("missing", [:], "assertion_missing"),
            ("expired", [RuntimeFixture.assertionHeader: try fixture.assertion(RuntimeFixture.alice, clock: FixedClock(Date().timeIntervalSince1970 - 600))], "assertion_invalid"),
            ("forged", [RuntimeFixture.assertionHeader: try fixture.assertion(RuntimeFixture.alice, key: forger)], "assertion_invalid"),
            ("wrong audience", [RuntimeFixture.assertionHeader: try fixture.assertion(RuntimeFixture.alice, audience: "billing")], "assertion_invalid"),
            ("an access token", [RuntimeFixture.assertionHeader: accessToken], "assertion_invalid"),
            ("garbage", [RuntimeFixture.assertionHeader: "not-a-jwt"], "assertion_invalid"),
        ]
        let routes: [(HTTPRequest.Method, String)] = [
            (.post, "/runtime/v1/sessions"), (.get, "/runtime/v1/sessions/ses_AAAAAAAAAAAAAAAAAAAAAA"),
            (.post, "/runtime/v1/sessions/ses_AAAAAAAAAAAAAAAAAAAAAA/upgrade"), (.post, "/runtime/v1/sessions/ses_AAAAAAAAAAAAAAAAAAAAAA/revoke"),
            (.post, "/runtime/v1/intents"), (.get, "/runtime/v1/executions/exe_x"), (.get, "/runtime/v1/agent-link"),
        ]
        try await fixture.application().test(.live) { client in
            for (name, headers, code) in cases {
                for (method, uri) in routes {
                    let (status, body) = try await client.call(method, uri, headers: headers)
                    #expect(status == .unauthorized, "\(name) \(method) \(uri)")
                    #expect(body["error"]?.stringValue == code, "\(name) \(method) \(uri)")
                }
            }
        }
    }

    @Test("sessions: create anonymous, read, upgrade in place, refuse other users, conflict, revoke")
    func sessionLifecycle() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let anonymous = try fixture.headers(RuntimeFixture.anonymous)
            let (created, session) = try await client.call(.post, "/runtime/v1/sessions", headers: anonymous, json: #"{"metadata":{"lang":"en"}}"#)
            #expect(created == .created)
            #expect(session["state"] == "anonymous")
            let id = try #require(session["session_id"]?.stringValue)
            #expect(SessionID.isWellFormed(id))
            #expect(try await client.call(.get, "/runtime/v1/sessions/\(id)", headers: anonymous).0 == .ok)

            let alice = try fixture.headers(RuntimeFixture.alice)
            let (upgraded, owned) = try await client.call(.post, "/runtime/v1/sessions/\(id)/upgrade", headers: alice)
            #expect(upgraded == .ok)
            #expect(owned["session_id"]?.stringValue == id)
            #expect(owned["state"] == "authenticated")
            #expect(owned["user_id"] == "alice")
            #expect(owned["metadata"] == ["lang": "en"])

            #expect(try await client.call(.get, "/runtime/v1/sessions/\(id)", headers: alice).0 == .ok)
            let (bobStatus, bobBody) = try await client.call(.get, "/runtime/v1/sessions/\(id)", headers: try fixture.headers(RuntimeFixture.bob))
            #expect(bobStatus == .forbidden)
            #expect(bobBody["error"] == "session_forbidden")
            #expect(try await client.call(.get, "/runtime/v1/sessions/\(id)", headers: try fixture.headers(RuntimeFixture.aliceElsewhere)).1["error"] == "session_forbidden")
            #expect(try await client.call(.get, "/runtime/v1/sessions/\(id)", headers: anonymous).0 == .forbidden)
            let (conflict, conflictBody) = try await client.call(.post, "/runtime/v1/sessions/\(id)/upgrade", headers: try fixture.headers(RuntimeFixture.bob))
            #expect(conflict == .conflict)
            #expect(conflictBody["error"] == "session_conflict")
            #expect(try await client.call(.post, "/runtime/v1/sessions/\(id)/upgrade", headers: anonymous).1["error"] == "session_anonymous")

            let (revoked, revokedBody) = try await client.call(.post, "/runtime/v1/sessions/\(id)/revoke", headers: alice)
            #expect(revoked == .ok)
            #expect(revokedBody["state"] == "revoked")
            #expect(try await client.call(.get, "/runtime/v1/sessions/\(id)", headers: alice).1["error"] == "session_not_found")
        }
    }

    @Test("a signed-in caller creates a session it owns; malformed and unknown ids get 400 and 404")
    func ownedSessionsAndBadIDs() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let alice = try fixture.headers(RuntimeFixture.alice)
            let (status, session) = try await client.call(.post, "/runtime/v1/sessions", headers: alice)
            #expect(status == .created)
            #expect(session["state"] == "authenticated")
            #expect(session["tenant_id"] == "acme")
            let (malformed, malformedBody) = try await client.call(.get, "/runtime/v1/sessions/not-a-session", headers: alice)
            #expect(malformed == .badRequest)
            #expect(malformedBody["error"] == "session_malformed")
            let token = try AccessTokenIssuer(keys: fixture.keys, issuer: "i", audience: "a").issue(subject: "alice", tenantID: "acme", clientID: "web").token
            let (confused, confusedBody) = try await client.call(.get, "/runtime/v1/sessions/\(token)", headers: alice)
            #expect(confused == .badRequest)
            #expect(confusedBody["message"]?.stringValue?.contains("access token was sent where a session_id is expected") == true)
            #expect(confusedBody["message"]?.stringValue?.contains(token) == false)
            let (unknown, unknownBody) = try await client.call(.get, "/runtime/v1/sessions/\(try SessionID.generate())", headers: alice)
            #expect(unknown == .notFound)
            #expect(unknownBody["error"] == "session_not_found")
            let (bad, badBody) = try await client.call(.post, "/runtime/v1/sessions", headers: alice, json: #"{"metadata":1}"#)
            #expect(bad == .badRequest)
            #expect(badBody["error"] == "invalid_request")
            #expect(try await client.call(.post, "/runtime/v1/sessions", headers: alice, json: #"{"a":1,"a":2}"#).1["error"] == "invalid_request")
            let big = "{\"metadata\":{\"x\":\"" + String(repeating: "a", count: 20_000) + "\"}}"
            #expect(try await client.call(.post, "/runtime/v1/sessions", headers: alice, json: big).0 == .contentTooLarge)
        }
    }

    @Test("intents: the anonymous contract, results, failures, unknown intents and reading executions")
    func intents() async throws {
        let fixture = try RuntimeFixture()
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let anonymous = try fixture.headers(RuntimeFixture.anonymous)
            let id = try await client.createSession(headers: anonymous)
            let (echoStatus, echo) = try await client.call(.post, "/runtime/v1/intents", headers: anonymous, json: #"{"session_id":"\#(id)","intent_type":"echo","payload":{"hello":"world"}}"#)
            #expect(echoStatus == .ok)
            #expect(echo["status"] == "completed")
            #expect(echo["result"] == ["hello": "world"])
            let (refused, refusedBody) = try await client.call(.post, "/runtime/v1/intents", headers: anonymous, json: #"{"session_id":"\#(id)","intent_type":"session.describe"}"#)
            #expect(refused == .forbidden)
            #expect(refusedBody["error"] == "session_anonymous")

            let alice = try fixture.headers(RuntimeFixture.alice)
            _ = try await client.call(.post, "/runtime/v1/sessions/\(id)/upgrade", headers: alice)
            let (_, described) = try await client.call(.post, "/runtime/v1/intents", headers: alice, json: #"{"session_id":"\#(id)","intent_type":"session.describe"}"#)
            #expect(described["result"]?.objectValue?["user_id"] == "alice")
            let (_, set) = try await client.call(.post, "/runtime/v1/intents", headers: alice, json: #"{"session_id":"\#(id)","intent_type":"session.set_metadata","payload":{"theme":"dark"}}"#)
            #expect(set["result"]?.objectValue?["metadata"] == ["theme": "dark"])
            let (_, failed) = try await client.call(.post, "/runtime/v1/intents", headers: alice, json: #"{"session_id":"\#(id)","intent_type":"session.set_metadata","payload":[1]}"#)
            #expect(failed["status"] == "failed")
            #expect(failed["error"]?.objectValue?["error"] == "invalid_payload")
            let (unknown, unknownBody) = try await client.call(.post, "/runtime/v1/intents", headers: alice, json: #"{"session_id":"\#(id)","intent_type":"rm.rf"}"#)
            #expect(unknown == .notFound)
            #expect(unknownBody["error"] == "intent_unknown")
            #expect(try await client.call(.post, "/runtime/v1/intents", headers: try fixture.headers(RuntimeFixture.bob), json: #"{"session_id":"\#(id)","intent_type":"echo"}"#).0 == .forbidden)

            let executionID = try #require(set["execution_id"]?.stringValue)
            let (read, readBody) = try await client.call(.get, "/runtime/v1/executions/\(executionID)", headers: alice)
            #expect(read == .ok)
            #expect(readBody["status"] == "completed")
            #expect(try await client.call(.get, "/runtime/v1/executions/\(executionID)", headers: try fixture.headers(RuntimeFixture.bob)).0 == .forbidden)
            #expect(try await client.call(.get, "/runtime/v1/executions/exe_nothing", headers: alice).1["error"] == "execution_not_found")
        }
    }

    @Test("the same idempotency key runs the handler once and returns the first result, also when sent concurrently")
    func idempotency() async throws {
        let counter = Counter()
        var registry = IntentRegistry.builtIn
        registry.register("count", ClosureIntent { _, _ in
            counter.increment()
            try await Task.sleep(for: .milliseconds(50))
            return .number(Double(counter.count))
        })
        let fixture = try RuntimeFixture(registry: registry)
        defer { fixture.remove() }
        try await fixture.application().test(.live) { client in
            let alice = try fixture.headers(RuntimeFixture.alice)
            let id = try await client.createSession(headers: alice)
            let body = #"{"session_id":"\#(id)","intent_type":"count","idempotency_key":"k-1"}"#
            let (_, first) = try await client.call(.post, "/runtime/v1/intents", headers: alice, json: body)
            let (_, second) = try await client.call(.post, "/runtime/v1/intents", headers: alice, json: body)
            #expect(counter.count == 1)
            #expect(second["execution_id"] == first["execution_id"])
            #expect(second["result"] == first["result"])
            #expect(second["replayed"] == true)

            let concurrent = #"{"session_id":"\#(id)","intent_type":"count","idempotency_key":"k-2"}"#
            async let a = client.call(.post, "/runtime/v1/intents", headers: alice, json: concurrent)
            async let b = client.call(.post, "/runtime/v1/intents", headers: alice, json: concurrent)
            let (ra, rb) = try await (a, b)
            #expect(counter.count == 2)
            #expect(ra.1["execution_id"] == rb.1["execution_id"])
            #expect(try await client.call(.post, "/runtime/v1/intents", headers: alice, json: #"{"session_id":"\#(id)","intent_type":"count"}"#).0 == .ok)
            #expect(counter.count == 3)
        }
    }
}
