import ConfigurationReading
import DataPlane
import TrustedIssuers

/// A configuration read again (on `SIGHUP`), with the keys whose values differ from the
/// configuration the process started with.
public struct ReloadedConfiguration: Sendable {
    public let gateway: GatewayConfiguration
    /// Every key whose value differs from start-up's, as read (file and environment).
    public let changedKeys: [String]

    public init(gateway: GatewayConfiguration, changedKeys: [String]) {
        self.gateway = gateway
        self.changedKeys = changedKeys
    }
}

extension GatewayServices {
    /// Whether a reload puts `key` in force: the routes and their policies, the CORS origins,
    /// the trusted issuers and the rate limits. Any other key waits for a restart.
    public static func isLive(_ key: String) -> Bool {
        key == "gateway.routes" || key == "gateway.allowed_origins" || key == "trust.issuers" || key.hasPrefix("rate_limits.")
    }

    /// Puts what can change live of `next` in force, for the requests that start from now on;
    /// requests in flight finish under what they started with.
    ///
    /// - Returns: the changed keys that wait for a restart.
    /// - Throws: `ConfigurationError` naming the key (a trusted issuer's secret that cannot be read,
    ///   a change to a sign-in provider); nothing has changed then.
    public func apply(_ next: ReloadedConfiguration) throws -> [String] {
        let configuration = next.gateway
        // Against the running public host and cookie domain: those change only on a restart.
        try self.configuration.checkRoutes(configuration.routes)
        // MCP resources are named from the running public URL, which a reload does not change.
        let routes = try self.configuration.resolvingMCPResources(configuration.routes)
        // Sign-in providers are read once (their client credentials, the sealing key): a change to one
        // is refused rather than half applied, since its issuer's keys and its sign-in belong together.
        let running = trustedIssuers?.configuration ?? self.configuration.trust
        if Self.signIns(running) != Self.signIns(configuration.trust) {
            throw ConfigurationError(
                fileKey: "trust.issuers",
                "a provider's login changed (added, removed or edited); sign-in providers change only on a restart, so the reload was refused whole")
        }
        if let trustedIssuers {
            // The last step that can fail: what follows only swaps values in.
            if try trustedIssuers.apply(configuration.trust) { authenticator.cache?.removeAll() }
        } else if !configuration.trust.issuers.isEmpty {
            throw ConfigurationError(fileKey: "trust.issuers", "this gateway was started without trusted issuers; add them with a restart")
        }
        routeTable.replace(routes: routes, allowedOrigins: configuration.allowedOrigins)
        admission.apply(rateLimits: configuration.rateLimits)
        return next.changedKeys.filter { !Self.isLive($0) }
    }

    /// The sign-in providers' settings as one text, in issuer order: two configurations whose
    /// texts differ would have a reload refused (`apply`). No secret is in it (a client secret is
    /// named by its file).
    public static func signInText(_ trust: TrustConfiguration) -> String {
        signIns(trust).sorted { $0.key < $1.key }.map { "\($0.key) \(String(describing: $0.value))" }.joined(separator: "\n")
    }

    /// Each sign-in provider's issuer and login settings.
    private static func signIns(_ trust: TrustConfiguration) -> [String: ProviderLoginSettings] {
        Dictionary(trust.loginIssuers.compactMap { issuer in issuer.login.map { (issuer.issuer, $0) } }, uniquingKeysWith: { first, _ in first })
    }
}
