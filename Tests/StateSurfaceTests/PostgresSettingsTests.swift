import StateSurface
import Testing

@Suite("PostgreSQL settings: TLS defaults by the host's spelling")
struct PostgresSettingsTests {
    @Test(
        "only localhost, an IPv4 literal in 127.0.0.0/8 and ::1 are loopback and default to plain TCP",
        arguments: ["localhost", "LOCALHOST", "127.0.0.1", "127.8.9.10", "[::1]", "[::ffff:127.0.0.1]"])
    func loopback(_ host: String) throws {
        #expect(try PostgresSettings(url: "postgres://u:p@\(host):5432/db").tls == .disable, "\(host)")
    }

    @Test(
        "a DNS name that merely starts with 127. (or any other host) is verified with TLS by default",
        arguments: ["127.db.example.com", "127.0.0.1.nip.example", "128.0.0.1", "db.internal", "[::2]", "[::ffff:10.0.0.1]", "localhost.example.com"])
    func notLoopback(_ host: String) throws {
        #expect(try PostgresSettings(url: "postgres://u:p@\(host):5432/db").tls == .verifyFull, "\(host)")
    }
}
