import Foundation
import Gateway
import JOSE
import Testing

@Suite("Logs, request ids and metrics")
struct ObservabilityTests {
    @Test("every answer carries X-Request-Id; the JSON log has one line per request with that id, the route and the status")
    func requestLog() async throws {
        let fixture = try await GatewayFixture()
        let answer = try await fixture.send(.GET, "/api/session/ses_AAAAAAAAAAAAAAAAAAAAAA?access_token=should-not-be-logged")
        #expect(answer.status == 404)
        let requestID = try #require(answer.headers.first(name: "X-Request-Id"))
        let other = try await fixture.send(.GET, "/healthz")
        #expect(other.headers.first(name: "X-Request-Id") != requestID)
        try await fixture.stop()

        let lines = fixture.log.text.split(separator: "\n").map(String.init)
        let objects = lines.compactMap { try? StrictJSONReader().parseObject(Array($0.utf8)) }
        #expect(objects.count == lines.count, "every log line is a JSON object")
        let line = try #require(objects.first { $0["request_id"]?.stringValue == requestID && $0["message"] == "request" })
        #expect(line["route"] == "/api/session/{id}")
        #expect(line["status"] == .number(404), "numbers as numbers")
        #expect(line["duration_ms"]?.numberValue != nil, "\(line)")
        #expect(line["path"] == "/api/session/ses_AAAAAAAAAAAAAAAAAAAAAA")
        #expect(!fixture.log.text.contains("should-not-be-logged"))
    }

    @Test("/metrics on the admin listener: requests by route and status, latency histogram, token rejections, rate-limit hits, login failures")
    func metrics() async throws {
        let fixture = try await GatewayFixture { $0.rateLimits.loginPerUsername = .init(perMinute: 1, burst: 1) }
        _ = try await fixture.post("/api/session/create-anonymous")
        _ = try await fixture.post("/api/session/create", bearer: "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
        _ = try await fixture.loginAnswer("nobody", password: "whatever1")
        _ = try await fixture.loginAnswer("nobody", password: "whatever2")
        let metrics = try await fixture.send(.GET, "/metrics", port: fixture.adminPort)
        #expect(metrics.status == 200)
        let text = metrics.raw
        #expect(text.contains(#"portcullis_http_requests_total{route="/api/session/create-anonymous",method="POST",status="201"} 1"#))
        #expect(text.contains(#"portcullis_http_request_duration_seconds_bucket{route="/api/session/create-anonymous",method="POST""#))
        #expect(text.contains(#"portcullis_token_rejections_total{reason="unsupported_algorithm"} 1"#))
        #expect(text.contains(#"portcullis_rate_limited_total{rule="login_per_username"} 1"#))
        #expect(text.contains("portcullis_login_failures_total 1"))
        // Not on the public listener.
        #expect(try await fixture.send(.GET, "/metrics").status == 404)
        try await fixture.stop()
    }
}
