import Foundation
import Logging
import PortcullisTestSupport
import RuntimeAPI
import StateSurface
import Testing

/// TLS to the database, against a PostgreSQL server with `ssl=on` and a certificate from a
/// CA the test makes with openssl.
@Suite("TLS to PostgreSQL", .serialized, .enabled(if: TestPostgres.enabled, "PostgreSQL is not installed (apt-get install postgresql)"))
struct PostgresTLSTests {
    /// A CA and a server certificate for 127.0.0.1 (and a second, unrelated CA), as PEM files in `directory`.
    static func certificates(in directory: String) throws -> (certificate: String, key: String) {
        func openssl(_ arguments: [String]) throws { try OpenSSLTool.run(arguments, in: directory) }
        for ca in ["ca", "other-ca"] {
            try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "\(ca).key", "-out", "\(ca).crt",
                         "-days", "2", "-subj", "/CN=portcullis test \(ca)"])
        }
        try openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"])
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: directory + "/san.ext", atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext"])
        return (try String(contentsOfFile: directory + "/server.crt", encoding: .utf8), try String(contentsOfFile: directory + "/server.key", encoding: .utf8))
    }

    static func open(_ url: String, tls: PostgresSettings.TLSMode, caFile: String?) async throws -> any StateStore {
        var settings = try PostgresSettings(url: url)
        settings.tls = tls
        settings.caFile = caFile
        settings.connectTimeout = 20  // generous: sanitized builds under a parallel suite are slow (a TLS handshake included; 20 s was once too little)
        var storage = StorageConfiguration()
        storage.postgres = settings
        var logger = Logger(label: "test.tls")
        logger.logLevel = .critical
        return try await StateStores.open(storage, logger: logger)
    }

    @Test("verify-full connects to a server whose certificate the configured CA signed, and refuses one signed by another CA, naming the database")
    func verifyFull() async throws {
        let directory = NSTemporaryDirectory() + "portcullis-pgtls-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try TestPostgres(tls: try Self.certificates(in: directory))
        defer { server.stop() }
        let url = try await server.createDatabase()

        let verified = try await Self.open(url, tls: .verifyFull, caFile: directory + "/ca.crt")
        let session = SessionRecord(id: try SessionID.generate(), state: .anonymous, createdAt: 1, lastSeenAt: 1, expiresAt: 4_000_000_000)
        try await verified.insertSession(session, maximumLiveForOwner: nil)
        #expect(try await verified.session(id: session.id) == session)
        let signals = WakeCount(try #require(verified.accessChangeSignals()))
        #expect(await signals.reach(1, within: 10), "the change listener connects with the same TLS settings")
        let encrypted = try server.psql(
            "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'portcullis-listen'")
        #expect(encrypted == "t", "the LISTEN connection is encrypted: \(encrypted)")
        await verified.shutdown()

        let required = try await Self.open(url, tls: .require, caFile: nil)
        #expect(try await required.session(id: session.id) != nil, "require: encrypted without checking the certificate")
        await required.shutdown()

        await #expect {
            _ = try await Self.open(url, tls: .verifyFull, caFile: directory + "/other-ca.crt")
        } throws: { error in
            let message = (error as? StateSurfaceError)?.message ?? ""
            return message.contains("postgresql://127.0.0.1:\(server.port)/")
        }
    }
}
