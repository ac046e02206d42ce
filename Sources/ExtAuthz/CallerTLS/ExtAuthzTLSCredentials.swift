import ConfigurationReading
import EdgeHTTP
import Foundation
import NIOSSL

/// The files `ext_authz.tls` names, read once at start-up: a file that cannot be used stops start
/// with its key named, before anything listens.
package struct ExtAuthzTLSCredentials: Sendable {
    let chain: [NIOSSLCertificate]
    let privateKey: NIOSSLPrivateKey
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
            privateKey = try NIOSSLPrivateKey(bytes: [UInt8](pem), format: .pem)
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
    var grpcServerConfiguration: TLSConfiguration {
        var configuration = httpServerConfiguration
        configuration.applicationProtocols = ["h2"]
        return configuration
    }
}
