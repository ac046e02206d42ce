import ConfigurationReading
import EdgeHTTP
import Foundation
import GRPCNIOTransportHTTP2
import NIOSSL

/// The files `ext_authz.tls` names, read once at start-up: a file that cannot be used stops start
/// with its key named, before anything listens.
package struct ExtAuthzTLSCredentials: Sendable {
    let chain: [NIOSSLCertificate]
    let privateKey: NIOSSLPrivateKey
    /// The key file's PEM, as grpc-swift's transport takes a key it did not read itself.
    let privateKeyPEM: [UInt8]
    let clientCA: [NIOSSLCertificate]

    /// - Throws: `GatewayStartupError` naming the key of a file that cannot be read or parsed, or
    ///   of a private key other users can read.
    package init(loading tls: ExtAuthzTLS) throws(GatewayStartupError) {
        do {
            chain = try NIOSSLCertificate.fromPEMFile(tls.certificatePath)
        } catch {
            throw GatewayStartupError("ext_authz.tls.certificate_path: cannot read a PEM certificate chain from \(tls.certificatePath)")
        }
        if let mode = OwnerOnlyFile.modeOthersCanRead(tls.privateKeyPath) {
            throw GatewayStartupError("ext_authz.tls.private_key_path: \(tls.privateKeyPath) can be read by other users (mode \(mode)); run chmod 600 \(tls.privateKeyPath)")
        }
        do {
            guard let pem = FileManager.default.contents(atPath: tls.privateKeyPath) else { throw GatewayStartupError("unreadable") }
            privateKeyPEM = [UInt8](pem)
            privateKey = try NIOSSLPrivateKey(bytes: privateKeyPEM, format: .pem)
        } catch {
            throw GatewayStartupError("ext_authz.tls.private_key_path: cannot read a PEM private key from \(tls.privateKeyPath)")
        }
        let clientCA = (try? NIOSSLCertificate.fromPEMFile(tls.clientCAPath)) ?? []
        guard !chain.isEmpty, !clientCA.isEmpty else {
            throw GatewayStartupError(
                chain.isEmpty
                    ? "ext_authz.tls.certificate_path: \(tls.certificatePath) holds no PEM certificate"
                    : "ext_authz.tls.client_ca_path: cannot read PEM certificates from \(tls.clientCAPath) (the CA that signs the Envoys' certificates)")
        }
        self.clientCA = clientCA
    }

    /// The HTTP listener's TLS: this chain, and a client certificate required, verified against
    /// the client CA alone (not the system's roots). No hostname check: a caller is named by
    /// `caller_names` instead.
    var httpServerConfiguration: TLSConfiguration {
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
        configuration.certificateVerification = .noHostnameVerification
        configuration.trustRoots = .certificates(clientCA)
        configuration.minimumTLSVersion = .tlsv12
        configuration.applicationProtocols = ["http/1.1"]
        return configuration
    }

    /// The gRPC listener's: the same, with `h2` offered.
    func grpcTransportSecurity() throws -> HTTP2ServerTransport.Posix.TransportSecurity {
        let chain = try self.chain.map { TLSConfig.CertificateSource.bytes(try $0.toDERBytes(), format: .der) }
        let roots = try clientCA.map { TLSConfig.CertificateSource.bytes(try $0.toDERBytes(), format: .der) }
        return .mTLS(certificateChain: chain, privateKey: .bytes(privateKeyPEM, format: .pem)) { tls in
            tls.trustRoots = .certificates(roots)
            tls.clientCertificateVerification = .noHostnameVerification
        }
    }
}
