import ConfigurationReading
import TrustedIssuers

/// The providers users may sign in through (`trust.issuers` entries with `login`), by name.
///
/// Built once from the configuration; the names are the ones in the login paths
/// (`/api/auth/oidc/{name}/start`), checked unique when the configuration is read.
public struct ProviderDirectory: Sendable {
    /// One provider as the sign-in page lists it.
    public struct Provider: Sendable {
        public let name: String
        public let displayName: String
        /// The provider's exact `iss`.
        public let issuer: String
        public let settings: ProviderLoginSettings
        public let trust: TrustedIssuer
        /// How the gateway authenticates at its token endpoint, read at start.
        public let credential: ClientCredential
    }

    /// No provider: nobody signs in through one.
    public static let none = ProviderDirectory(providers: [])

    private init(providers: [Provider]) {
        self.providers = providers
        byName = [:]
        vault = nil
    }

    /// In configuration order.
    public let providers: [Provider]
    /// Seals the providers' tokens kept at rest; `nil` when no keys directory was given (`trust check`).
    public let vault: ProviderTokenVault?
    private let byName: [String: Provider]

    /// Reads every provider's client credential (the files are owner-only, as every credential file)
    /// and, given the keys directory, the key that seals the providers' tokens (made on first start).
    ///
    /// - Throws: `ConfigurationError` naming `trust.issuers[N].login.KEY` when a credential cannot be used,
    ///   or `keys.directory` when the sealing key cannot be read or made.
    public init(trust: TrustConfiguration, keysDirectory: String? = nil) throws(ConfigurationError) {
        var providers: [Provider] = []
        for (index, issuer) in trust.issuers.enumerated() {
            guard let login = issuer.login else { continue }
            let credential = try ClientCredential.load(login, key: "trust.issuers[\(index)].login")
            providers.append(
                Provider(name: login.name, displayName: login.displayName, issuer: issuer.issuer, settings: login, trust: issuer, credential: credential))
        }
        self.providers = providers
        vault = try keysDirectory.flatMap { directory throws(ConfigurationError) in
            providers.isEmpty ? nil : try ProviderTokenVault.load(keysDirectory: directory)
        }
        byName = Dictionary(providers.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The provider named `name` in a path; `nil` for a name no provider has.
    public func provider(named name: String) -> Provider? { byName[name] }

    public var isEmpty: Bool { providers.isEmpty }
}
