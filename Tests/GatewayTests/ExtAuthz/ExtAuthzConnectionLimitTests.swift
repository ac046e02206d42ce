import ExtAuthz
import Foundation
import Gateway
import JOSE
import PortcullisTestSupport
import Testing

/// Each ext_authz listener holds at most `limits.max_connections` open connections, as the public
/// listener does: a connection beyond is closed before a byte of it is read, and the slot comes
/// back when a connection closes. Without it, anyone who can reach the port (the callers rule is
/// checked per request) could hold descriptors until the process has none.
@Suite("ext_authz's listeners: at most limits.max_connections open at once")
struct ExtAuthzConnectionLimitTests {
    @Test("a connection beyond limits.max_connections is closed at once on either ext_authz listener, and a slot given back serves again")
    func connectionsBeyondTheLimitAreClosed() async throws {
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let fixture = try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            configuration.routes = ExtAuthzHTTPTests.routes
            configuration.limits.maximumConnections = 2
            var extAuthz = ExtAuthzConfiguration()
            extAuthz.httpPort = 0
            extAuthz.grpcPort = 0
            configuration.extAuthz = extAuthz
        })
        for port in [try #require(fixture.extAuthzHTTPPort), try #require(fixture.extAuthzGRPCPort)] {
            let held = [try RawConnection(port: port), try RawConnection(port: port)]
            // Both held connections are served: neither is closed.
            try await Task.sleep(for: .milliseconds(200))
            #expect(held.allSatisfy { !$0.isClosedByPeer }, "port \(port)")
            let beyond = try RawConnection(port: port)
            #expect(beyond.isReadable(within: 5_000) && beyond.readAll().isEmpty, "the third connection to \(port) is closed, nothing written")
            beyond.close()
            held[0].close()
            // Its slot comes back once the gateway has seen the close.
            try await Task.sleep(for: .milliseconds(300))
            let again = try RawConnection(port: port)
            // (The gRPC listener writes its SETTINGS at once: served, not closed.)
            try await Task.sleep(for: .milliseconds(500))
            #expect(!again.isClosedByPeer, "a connection after one closed is served on \(port)")
            again.close()
            held[1].close()
            try await Task.sleep(for: .milliseconds(300))
        }
        // And the HTTP listener answers a check on a slot given back.
        let answer = try await ExtAuthzHTTPTests.check(fixture, .GET, "/api/plain/x")
        #expect(answer.status == 401)
    }
}
