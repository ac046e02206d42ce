import Foundation
import Testing

/// Found by schemathesis: a known path asked with another method said 404, and a session
/// body with `"metadata": null` was accepted although the document says an object.
@Suite("The gateway's answers to the wrong method and to null metadata")
struct MethodNotAllowedTests {
    @Test("a known path with a method it does not answer is 405 with Allow listing what it does; an unknown path stays 404")
    func methodNotAllowed() async throws {
        let fixture = try await GatewayFixture()
        let trace = try await fixture.send(.RAW(value: "TRACE"), "/readyz")
        #expect(trace.status == 405 && trace["error"] == "method_not_allowed")
        // A GET route answers HEAD too (RFC 9110 §9.3.2).
        #expect(trace.headers.first(name: "Allow") == "GET, HEAD")
        let delete = try await fixture.send(.DELETE, "/api/auth/login")
        #expect(delete.status == 405 && delete.headers.first(name: "Allow") == "POST")
        // The literal route wins over /api/session/:id, as in the router: create answers POST only.
        let get = try await fixture.send(.GET, "/api/session/create")
        #expect(get.status == 405 && get.headers.first(name: "Allow") == "POST", "\(get.status) \(get.headers.first(name: "Allow") ?? "-")")
        let session = try await fixture.send(.DELETE, "/api/session/ses_AAAAAAAAAAAAAAAAAAAAAA")
        #expect(session.status == 405 && session.headers.first(name: "Allow") == "GET, HEAD")
        let unknown = try await fixture.send(.GET, "/api/nothing-here")
        #expect(unknown.status == 404 && unknown["error"] == "not_found")
        try await fixture.stop()
    }

    @Test("metadata, when present, must be a JSON object: null is 400 invalid_request, absent is none")
    func nullMetadata() async throws {
        let fixture = try await GatewayFixture()
        let null = try await fixture.send(.POST, "/api/session/create-anonymous", body: #"{"metadata":null}"#)
        #expect(null.status == 400 && null["error"] == "invalid_request")
        #expect(try await fixture.send(.POST, "/api/session/create-anonymous", body: "{}").status == 201)
        #expect(try await fixture.send(.POST, "/api/session/create-anonymous", body: #"{"metadata":{"a":1}}"#).status == 201)
        try await fixture.stop()
    }
}
