import ConfigurationReading
import X509

/// `ext_authz.tls.caller_names`: the certificate names that may ask, matched against a caller's
/// subject alternative names (a URI such as a SPIFFE ID exactly, a DNS name in any case); never
/// the subject's common name, which no current client verifies either.
public enum ExtAuthzCallerNames: Sendable, Equatable {
    /// `"*"`: any certificate the client CA signed.
    case anySigned
    /// These names: URIs (a name with `://`) matched against URI names only, exactly; DNS names
    /// (lower-cased) against DNS names only, so one kind never stands for the other.
    case listed(uris: Set<String>, dnsNames: Set<String>)

    /// Reads the list at `key`.
    ///
    /// - Throws: `ConfigurationError` for an empty list, `"*"` beside names, or a name with a
    ///   space, a control character or a wildcard (matched as written, so a `*.` would admit nobody).
    public init(reading names: [String], key: String) throws(ConfigurationError) {
        guard !names.isEmpty else {
            throw ConfigurationError(key: key, "must list the names in the Envoys' certificates (a SPIFFE ID such as spiffe://cluster.local/ns/istio-system/sa/istio-ingressgateway, or a DNS name), or \"*\" for any certificate the CA signed")
        }
        if names.contains("*") {
            guard names.count == 1 else { throw ConfigurationError(key: key, "lists \"*\" (any certificate the CA signed) beside names; list one or the other") }
            self = .anySigned
            return
        }
        var (uris, dnsNames) = (Set<String>(), Set<String>())
        for name in names {
            guard !name.isEmpty, name.utf8.count <= 2048, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }), !name.contains("*") else {
                throw ConfigurationError(key: key, "must list names as a certificate carries them, without spaces or wildcards (\"*\" alone admits any certificate the CA signed), not \"\(name.prefix(100))\"")
            }
            if name.contains("://") { uris.insert(name) } else { dnsNames.insert(name.lowercased()) }
        }
        self = .listed(uris: uris, dnsNames: dnsNames)
    }

    /// Whether `certificate` (already verified against the client CA) names a caller.
    public func admits(_ certificate: Certificate) -> Bool {
        switch self {
        case .anySigned:
            return true
        case .listed(let uris, let dnsNames):
            guard let alternatives = try? certificate.extensions.subjectAlternativeNames else { return false }
            return alternatives.contains { name in
                switch name {
                case .uniformResourceIdentifier(let uri): uris.contains(uri)
                case .dnsName(let dns): dnsNames.contains(dns.lowercased())
                default: false
                }
            }
        }
    }

    /// The names a certificate carries, for the log line of a refusal (at most four, each cut to 200 bytes).
    public static func names(in certificate: Certificate) -> [String] {
        guard let alternatives = try? certificate.extensions.subjectAlternativeNames else { return [] }
        return alternatives.compactMap { name -> String? in
            switch name {
            case .uniformResourceIdentifier(let uri): String(uri.prefix(200))
            case .dnsName(let dns): String(dns.prefix(200))
            default: nil
            }
        }.prefix(4).map { $0 }
    }
}
