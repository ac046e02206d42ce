import ConfigurationReading

/// `ext_authz.tls`: both listeners speak TLS, and a caller must present a certificate that
/// `client_ca_path` signed and that names one of `caller_names` (mutual TLS).
///
/// In a cluster an Envoy's address changes with its pod; its certificate (a SPIFFE ID, a DNS
/// name) is what says which Envoy it is. A CA alone would admit every workload the mesh's CA
/// signed, so the names are required: `"*"` admits any certificate the CA signed, by choice.
public struct ExtAuthzTLS: Sendable, Equatable {
    /// `ext_authz.tls.certificate_path`: the listeners' PEM certificate chain.
    public var certificatePath: String
    /// `ext_authz.tls.private_key_path`: its PEM private key (mode 0600 or stricter).
    public var privateKeyPath: String
    /// `ext_authz.tls.client_ca_path`: the PEM certificates a caller's chain must lead to (and no others).
    public var clientCAPath: String
    /// `ext_authz.tls.caller_names`: who may ask, by the names in its certificate.
    public var callerNames: ExtAuthzCallerNames

    public init(certificatePath: String, privateKeyPath: String, clientCAPath: String, callerNames: ExtAuthzCallerNames) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
        self.clientCAPath = clientCAPath
        self.callerNames = callerNames
    }

    static let keys = ["certificate_path", "private_key_path", "client_ca_path", "caller_names"].map { "ext_authz.tls." + $0 }

    /// Reads `ext_authz.tls.*`; `nil` when none is set.
    ///
    /// - Throws: `ConfigurationError` naming a missing key when only some are set, or a name that
    ///   cannot be one in a certificate.
    init?(reading values: ConfigurationValues) throws(ConfigurationError) {
        let certificate = try values.string(Self.keys[0])
        let key = try values.string(Self.keys[1])
        let clientCA = try values.string(Self.keys[2])
        let names = try values.strings(Self.keys[3])
        guard certificate != nil || key != nil || clientCA != nil || names != nil else { return nil }
        guard let certificate, let key, let clientCA, let names else {
            let present = [certificate != nil, key != nil, clientCA != nil, names != nil]
            let missing = zip(Self.keys, present).first { !$0.1 }?.0 ?? Self.keys[3]
            throw ConfigurationError(
                key: missing,
                "is required with the other ext_authz.tls keys: the listeners' certificate and key, the CA that signs the Envoys' certificates, and the names in them that may ask")
        }
        self.init(certificatePath: certificate, privateKeyPath: key, clientCAPath: clientCA, callerNames: try ExtAuthzCallerNames(reading: names, key: Self.keys[3]))
    }
}
