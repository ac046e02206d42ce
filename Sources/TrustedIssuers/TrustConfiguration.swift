import ConfigurationReading

/// The identity providers the gateway trusts beside itself (`trust.issuers`).
public struct TrustConfiguration: Sendable, Equatable {
    public var issuers: [TrustedIssuer] = []

    public init(issuers: [TrustedIssuer] = []) {
        self.issuers = issuers
    }

    /// The issuers users may sign in through, in configuration order.
    public var loginIssuers: [TrustedIssuer] { issuers.filter { $0.login != nil } }

    /// Reads `trust.issuers` from the configuration file.
    ///
    /// - Parameter gatewayIssuer: the gateway's own `iss`, which no trusted issuer may claim
    ///   (the gateway's keys verify its tokens and nothing else, and no provider's keys verify them).
    /// - Throws: `ConfigurationError` naming the entry and the key.
    public init(reading values: ConfigurationValues, gatewayIssuer: String) throws(ConfigurationError) {
        guard let entries = values.mapList("trust.issuers") else { return }
        var seen: Set<String> = []
        var loginNames: Set<String> = []
        for entry in entries {
            let issuer = try TrustedIssuer(reading: entry)
            guard issuer.issuer != gatewayIssuer else {
                throw entry.problem("issuer", "is the gateway's own issuer (gateway.issuer); a trusted issuer must be another party")
            }
            guard seen.insert(issuer.issuer).inserted else {
                throw entry.problem("issuer", "repeats \(issuer.issuer), which an earlier entry names already")
            }
            if let login = issuer.login, !loginNames.insert(login.name).inserted {
                throw ConfigurationError(fileKey: "\(entry.key).login.name", "repeats \(login.name), which an earlier issuer's login names already")
            }
            issuers.append(issuer)
        }
    }
}
