import AsyncHTTPClient
import DataPlane
import EdgeHTTP
import Foundation
import Gateway
import NIOCore
import NIOSSL
import PortcullisTestSupport
import Testing

@Suite("HTTPS on the public listener")
struct TLSTests {
    /// A self-signed P-256 certificate for 127.0.0.1, made by the openssl command line tool.
    static func makeCertificate(in directory: String) throws -> TLSFiles {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try OpenSSLTool.run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", directory + "/tls.key", "-out", directory + "/tls.pem",
        ])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory + "/tls.key")
        return TLSFiles(certificatePath: directory + "/tls.pem", privateKeyPath: directory + "/tls.key")
    }

    @Test("a TLS private key other users can read (mode 0644, 0640, 0604) stops start naming the key and the chmod; mode 0600 and 0400 are used", arguments: [0o644, 0o640, 0o604, 0o600, 0o400])
    func privateKeyMode(mode: Int) throws {
        let certificates = NSTemporaryDirectory() + "portcullis-tls-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: certificates) }
        let files = try Self.makeCertificate(in: certificates)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: files.privateKeyPath)
        do {
            _ = try GatewayServer.tlsConfiguration(files)
            #expect(mode & 0o077 == 0, "mode \(String(mode, radix: 8)) was used")
        } catch let error as GatewayStartupError {
            #expect(mode & 0o077 != 0, "\(error.message)")
            #expect(error.message.hasPrefix("gateway.tls.private_key_path: "))
            #expect(error.message.contains("chmod 600 \(files.privateKeyPath)"))
        }
    }

    @Test("with gateway.tls set, the gateway speaks HTTPS with that certificate, and a client trusting it gets answers")
    func https() async throws {
        let certificates = NSTemporaryDirectory() + "portcullis-tls-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: certificates) }
        let files = try Self.makeCertificate(in: certificates)
        let fixture = try await GatewayFixture { $0.tls = files }

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(files.certificatePath))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        do {
            let response = try await client.execute(HTTPClientRequest(url: "https://127.0.0.1:\(fixture.gatewayPort)/healthz"), timeout: .seconds(10))
            #expect(response.status == .ok)
            var create = HTTPClientRequest(url: "https://127.0.0.1:\(fixture.gatewayPort)/api/session/create-anonymous")
            create.method = .POST
            #expect(try await client.execute(create, timeout: .seconds(10)).status == .created)
        } catch {
            Issue.record("HTTPS request failed: \(error)")
        }
        try await client.shutdown()
        // Plain HTTP to the TLS port gets no HTTP answer.
        await #expect(throws: (any Error).self) { _ = try await fixture.send(.GET, "/healthz") }
        try await fixture.stop()
    }
}
