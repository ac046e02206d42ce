import TrafficCop

/// Which header family each proxy in front speaks to forward-auth: one instance behind nginx and
/// Caddy at once, each proxy bound to its own family (`gateway.forward_auth.proxies`), every other
/// trusted proxy to `gateway.forward_auth.headers`.
///
/// The family is the peer's, never the request's: a client whose headers a proxy copies into its
/// auth request cannot choose the family that proxy does not set, and a request carrying the
/// other family's fields is still refused (400 `forward_auth_headers_mixed`).
public struct ForwardAuthProxies: Sendable, Equatable {
    /// One network of proxies and the family it speaks.
    public struct Binding: Sendable, Equatable {
        public let network: IPNetwork
        public let family: ForwardAuthHeaderFamily

        public init(network: IPNetwork, family: ForwardAuthHeaderFamily) {
            self.network = network
            self.family = family
        }
    }

    /// The family of a trusted proxy bound to none (`gateway.forward_auth.headers`).
    public var defaultFamily: ForwardAuthHeaderFamily
    public var bindings: [Binding]

    public init(defaultFamily: ForwardAuthHeaderFamily = .nginx, bindings: [Binding] = []) {
        self.defaultFamily = defaultFamily
        self.bindings = bindings
    }

    /// The family `peer` (an IP address) speaks: its binding's, else the default.
    public func family(for peer: String) -> ForwardAuthHeaderFamily {
        guard !bindings.isEmpty, let bytes = IPNetwork.parseAddress(peer) else { return defaultFamily }
        return bindings.first { $0.network.contains(bytes) }?.family ?? defaultFamily
    }

    /// Whether two networks share an address (one holds the other's first address, at the shorter prefix).
    package static func overlap(_ a: IPNetwork, _ b: IPNetwork) -> Bool {
        a.bytes.count == b.bytes.count && (a.contains(b.bytes) || b.contains(a.bytes))
    }
}
