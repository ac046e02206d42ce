import AsyncHTTPClient
import ConfigurationReading
import EnvoyAuthProtos
import ExtAuthz
import Foundation
import Gateway
import GRPCCore
import GRPCNIOTransportHTTP2
import GRPCProtobuf
import JOSE
import NIOCore
import NIOPosix
import NIOSSL
import PortcullisTestSupport
import Testing
import TrafficCop
import X509

/// `ext_authz.tls` (issue 67): both listeners speak TLS, and only a caller whose certificate the
/// client CA signed and whose names include one of `caller_names` is answered.
@Suite("ext_authz with mutual TLS: callers named by their certificates", .enabled(if: OpenSSLTool.enabled))
struct ExtAuthzMutualTLSTests {
    /// A mesh's CA, the listeners' certificate it signed (for 127.0.0.1), callers' certificates it
    /// signed, and one made by another CA: all by the openssl command line tool, P-256.
    struct Mesh {
        let directory: String
        static let envoy = "spiffe://mesh.test/ns/istio-system/sa/istio-ingressgateway"

        init() throws {
            directory = NSTemporaryDirectory() + "portcullis-mesh-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            // No configuration file's extensions: each certificate carries exactly those given here.
            try Data("[req]\ndistinguished_name=dn\n[dn]\n".utf8).write(to: URL(fileURLWithPath: directory + "/req.cnf"))
            try makeCA("ca")
            try makeCA("stranger-ca")
            try makeLeaf("listener", signedBy: "ca", names: "IP:127.0.0.1,DNS:localhost")
            try makeLeaf("envoy", signedBy: "ca", names: "URI:" + Self.envoy)
            try makeLeaf("dns-envoy", signedBy: "ca", names: "DNS:Envoy.Mesh.Test")
            try makeLeaf("workload", signedBy: "ca", names: "URI:spiffe://mesh.test/ns/shop/sa/checkout")
            try makeLeaf("impostor", signedBy: "stranger-ca", names: "URI:" + Self.envoy)
            try makeLeaf("common-name-only", signedBy: "ca", names: nil, commonName: "envoy.mesh.test")
            try makeLeaf("uri-spelled-as-dns", signedBy: "ca", names: "URI:envoy.mesh.test")
        }

        func path(_ name: String) -> String { directory + "/" + name }

        private func makeCA(_ name: String) throws {
            try OpenSSLTool.run(
                [
                    "req", "-config", "req.cnf", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=\(name)",
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign", "-keyout", name + ".key", "-out", name + ".pem",
                ], in: directory)
        }

        private func makeLeaf(_ name: String, signedBy ca: String, names: String?, commonName: String? = nil) throws {
            var arguments = [
                "req", "-config", "req.cnf", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                "-subj", "/CN=\(commonName ?? name)", "-CA", ca + ".pem", "-CAkey", ca + ".key",
                "-addext", "basicConstraints=critical,CA:FALSE", "-addext", "extendedKeyUsage=clientAuth,serverAuth", "-keyout", name + ".key", "-out", name + ".pem",
            ]
            if let names { arguments += ["-addext", "subjectAltName=" + names] }
            try OpenSSLTool.run(arguments, in: directory)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path(name + ".key"))
        }

        /// `ext_authz.tls` with the listener's certificate and this CA, admitting `names`.
        func tls(_ names: [String]) throws -> ExtAuthzTLS {
            ExtAuthzTLS(
                certificatePath: path("listener.pem"), privateKeyPath: path("listener.key"), clientCAPath: path("ca.pem"),
                callerNames: try ExtAuthzCallerNames(reading: names, key: "ext_authz.tls.caller_names"))
        }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// A gateway with both listeners under `tls`, `callers` by address when given.
    static func gateway(_ provider: FakeProvider, tls: ExtAuthzTLS, callers: [String]? = nil) async throws -> GatewayFixture {
        try await TrustedIssuerTests.gateway([provider], configure: { configuration in
            configuration.routes = ExtAuthzHTTPTests.routes
            var extAuthz = ExtAuthzConfiguration()
            extAuthz.grpcPort = 0
            extAuthz.httpPort = 0
            extAuthz.tls = tls
            extAuthz.callers = callers.map { $0.compactMap(IPNetwork.init) } ?? ExtAuthzConfiguration.anyAddress
            configuration.extAuthz = extAuthz
        })
    }

    /// Asks the gRPC listener as the caller `identity` (a certificate and key in `mesh`; `nil`: none).
    static func check(port: Int, mesh: Mesh, as identity: String?, _ request: Envoy_Service_Auth_V3_CheckRequest) async throws -> Envoy_Service_Auth_V3_CheckResponse {
        let security: HTTP2ClientTransport.Posix.TransportSecurity
        let trust = TLSConfig.TrustRootsSource.certificates([.file(path: mesh.path("ca.pem"), format: .pem)])
        if let identity {
            security = .mTLS(certificateChain: [.file(path: mesh.path(identity + ".pem"), format: .pem)], privateKey: .file(path: mesh.path(identity + ".key"), format: .pem)) {
                $0.trustRoots = trust
            }
        } else {
            security = .tls { $0.trustRoots = trust }
        }
        return try await withGRPCClient(transport: try .http2NIOPosix(target: .ipv4(address: "127.0.0.1", port: port), transportSecurity: security)) { client in
            try await client.unary(
                request: ClientRequest(message: request), descriptor: MethodDescriptor(fullyQualifiedService: "envoy.service.auth.v3.Authorization", method: "Check"),
                serializer: ProtobufSerializer<Envoy_Service_Auth_V3_CheckRequest>(), deserializer: ProtobufDeserializer<Envoy_Service_Auth_V3_CheckResponse>(),
                options: .defaults
            ) { response in try response.message }
        }
    }

    /// Asks the HTTP listener as `identity` for `path`; the status, or the error of a connection
    /// refused or closed.
    static func checkHTTP(port: Int, mesh: Mesh, as identity: String?, _ path: String, bearer: String? = nil) async -> Result<Int, any Error> {
        var tls = TLSConfiguration.makeClientConfiguration()
        do {
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(mesh.path("ca.pem")))
            if let identity {
                tls.certificateChain = try NIOSSLCertificate.fromPEMFile(mesh.path(identity + ".pem")).map { .certificate($0) }
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: mesh.path(identity + ".key"), format: .pem))
            }
        } catch {
            return .failure(error)
        }
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls, redirectConfiguration: .disallow))
        var request = HTTPClientRequest(url: "https://127.0.0.1:\(port)/ext-authz\(path)")
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer " + bearer) }
        let result: Result<Int, any Error>
        do {
            let response = try await client.execute(request, timeout: .seconds(10))
            _ = try await response.body.collect(upTo: 1 << 20)
            result = .success(Int(response.status.code))
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        return result
    }

    @Test("over gRPC: a caller whose certificate the client CA signed and names a listed SPIFFE ID is answered (allowed and denied as without TLS); a certificate the CA signed naming another workload is denied 403 ext_authz_caller_refused (status 7, not an RPC error); another CA's certificate with the listed name, no certificate, and plaintext never reach a decision")
    func grpcCallersByCertificate() async throws {
        let mesh = try Mesh()
        defer { mesh.remove() }
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let fixture = try await Self.gateway(provider, tls: try mesh.tls([Mesh.envoy, "envoy.mesh.test"]))
        let port = try #require(fixture.extAuthzGRPCPort)
        let token = try provider.token(claims: [:])
        fixture.remember(token)
        let allowed = ExtAuthzGRPCTests.read(
            try await Self.check(port: port, mesh: mesh, as: "envoy", ExtAuthzGRPCTests.request("GET", "/api/plain/x", headers: [("authorization", "Bearer " + token)])))
        #expect(allowed.status == 200 && allowed.fields["x-auth-request-user"]?.isEmpty == false, "\(allowed)")
        allowed.fields["x-portcullis-assertion"].map(fixture.remember)
        let missing = ExtAuthzGRPCTests.read(try await Self.check(port: port, mesh: mesh, as: "envoy", ExtAuthzGRPCTests.request("GET", "/api/plain/x")))
        #expect(missing.status == 401 && missing.error == "token_missing", "\(missing)")
        // A DNS name in any case.
        let dns = ExtAuthzGRPCTests.read(try await Self.check(port: port, mesh: mesh, as: "dns-envoy", ExtAuthzGRPCTests.request("GET", "/public/status")))
        #expect(dns.status == 200, "\(dns)")

        for (identity, why) in [("workload", "a workload the CA signed, named in no caller_names"), ("common-name-only", "the listed name as the subject's common name only")] {
            let response = try await Self.check(port: port, mesh: mesh, as: identity, ExtAuthzGRPCTests.request("GET", "/api/plain/x", headers: [("authorization", "Bearer " + token)]))
            let refused = ExtAuthzGRPCTests.read(response)
            #expect(response.status.code == 7 && refused.status == 403 && refused.error == "ext_authz_caller_refused" && refused.fields["x-auth-request-user"] == nil, "\(why): \(refused)")
        }
        let logged = await fixture.log.lines(containing: "refused a check: its certificate names none of ext_authz.tls.caller_names", "spiffe://mesh.test/ns/shop/sa/checkout", within: 5)
        #expect(!logged.isEmpty, "a refusal is logged with the names the certificate carries")

        for (identity, why) in [("impostor", "another CA's certificate with the listed name"), (nil, "no certificate") as (String?, String)] {
            do {
                let response = try await Self.check(port: port, mesh: mesh, as: identity, ExtAuthzGRPCTests.request("GET", "/public/status"))
                Issue.record("\(why): answered \(ExtAuthzGRPCTests.read(response))")
            } catch let error as RPCError {
                #expect(error.code == .unavailable, "\(why): \(error)")
            }
        }
        do {
            let response = try await ExtAuthzGRPCTests.check(port: port, ExtAuthzGRPCTests.request("GET", "/public/status"))
            Issue.record("plaintext: answered \(ExtAuthzGRPCTests.read(response))")
        } catch let error as RPCError {
            #expect(error.code == .unavailable, "plaintext: \(error)")
        }
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("over HTTP: the listed caller's check is answered; a certificate the CA signed naming another workload is closed on after the handshake; another CA's certificate and no certificate fail the handshake; a connection that never finishes its handshake is closed")
    func httpCallersByCertificate() async throws {
        let mesh = try Mesh()
        defer { mesh.remove() }
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let fixture = try await Self.gateway(provider, tls: try mesh.tls([Mesh.envoy]))
        let port = try #require(fixture.extAuthzHTTPPort)
        let token = try provider.token(claims: [:])
        fixture.remember(token)
        let allowed = await Self.checkHTTP(port: port, mesh: mesh, as: "envoy", "/api/plain/x", bearer: token)
        #expect((try? allowed.get()) == 200, "\(allowed)")
        let missing = await Self.checkHTTP(port: port, mesh: mesh, as: "envoy", "/api/plain/x")
        #expect((try? missing.get()) == 401, "\(missing)")
        for (identity, why) in [("workload", "another workload"), ("dns-envoy", "a name not listed"), ("impostor", "another CA"), (nil, "no certificate") as (String?, String)] {
            let answer = await Self.checkHTTP(port: port, mesh: mesh, as: identity, "/public/status")
            #expect((try? answer.get()) == nil, "\(why): \(answer)")
        }
        #expect(!(await fixture.log.lines(containing: "refused a connection: its certificate names none of ext_authz.tls.caller_names", "spiffe://mesh.test/ns/shop/sa/checkout", within: 5)).isEmpty)

        // A peer that connects and never says a word is closed once the handshake's time is up.
        let started = ContinuousClock.now
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get()
        let bound = Duration.milliseconds(Int64(TimeBounds.seconds(30) * 1000))
        let closed: Bool = await withTaskGroup(of: Bool.self) { group in
            group.addTask { (try? await channel.closeFuture.get()) != nil }
            group.addTask {
                try? await Task.sleep(for: bound)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !closed { try? await channel.close() }
        #expect(closed, "closed after \(ContinuousClock.now - started)")
        #expect(ContinuousClock.now - started >= .seconds(9), "not before the handshake's time: \(ContinuousClock.now - started)")
        try await fixture.stop()
        try await provider.stop()
    }

    @Test("a certificate is admitted only within its dates, checked at each call (a resumed TLS session skips the handshake's check); a listed DNS name is matched by a DNS name only, never by a URI spelled the same; the common name is never read")
    func datesAndKindsOfNames() throws {
        let mesh = try Mesh()
        defer { mesh.remove() }
        func certificate(_ name: String) throws -> Certificate {
            try Certificate(pemEncoded: String(decoding: try Data(contentsOf: URL(fileURLWithPath: mesh.path(name + ".pem"))), as: UTF8.self))
        }
        var configuration = ExtAuthzConfiguration()
        configuration.tls = try mesh.tls([Mesh.envoy, "envoy.mesh.test"])
        let envoy = try certificate("envoy")
        #expect(configuration.admits(certificate: envoy))
        #expect(!configuration.admits(certificate: envoy, at: envoy.notValidAfter), "expired")
        #expect(!configuration.admits(certificate: envoy, at: envoy.notValidAfter.addingTimeInterval(86_400)), "expired a day ago")
        #expect(!configuration.admits(certificate: envoy, at: envoy.notValidBefore.addingTimeInterval(-1)), "not yet valid")
        #expect(configuration.admits(certificate: try certificate("dns-envoy")), "a DNS name in another case")
        #expect(!configuration.admits(certificate: try certificate("uri-spelled-as-dns")), "a URI is never taken for the DNS name it spells")
        #expect(!configuration.admits(certificate: try certificate("common-name-only")), "the common name is never read")
        #expect(!configuration.admits(certificate: nil), "no certificate under tls")
        configuration.tls = nil
        #expect(configuration.admits(certificate: nil), "without tls, callers are named by address alone")
    }

    @Test("\"*\" admits any certificate the client CA signed, and an address outside ext_authz.callers is refused whatever its certificate")
    func anySignedAndAddresses() async throws {
        let mesh = try Mesh()
        defer { mesh.remove() }
        let provider = try await FakeProvider.start(keys: [try JWSKey.generate(algorithm: .es256, kid: "ec-1")])
        let any = try await Self.gateway(provider, tls: try mesh.tls(["*"]))
        let anyPort = try #require(any.extAuthzGRPCPort)
        let workload = ExtAuthzGRPCTests.read(try await Self.check(port: anyPort, mesh: mesh, as: "workload", ExtAuthzGRPCTests.request("GET", "/public/status")))
        #expect(workload.status == 200, "\(workload)")
        try await any.stop()

        let elsewhere = try await Self.gateway(provider, tls: try mesh.tls([Mesh.envoy]), callers: ["10.9.9.9"])
        let port = try #require(elsewhere.extAuthzGRPCPort)
        let refused = ExtAuthzGRPCTests.read(try await Self.check(port: port, mesh: mesh, as: "envoy", ExtAuthzGRPCTests.request("GET", "/public/status")))
        #expect(refused.status == 403 && refused.error == "ext_authz_caller_refused", "\(refused)")
        try await elsewhere.stop()
        try await provider.stop()
    }
}
