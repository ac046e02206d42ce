import ExtAuthz
import AuthorizationServer
import ConfigurationReading
import ConnectedAccounts
import DataPlane
import Foundation
import JOSE
import Observability
import SecurityGuard
import TrafficCop
import TrustedIssuers
import Traces

extension GatewayConfiguration {
    /// Reads the gateway's keys (`gateway.*`, `admin.*`, `tokens.*`, `limits.*`,
    /// `runtime.name`, `runtime.url`, `runtime.timeout_seconds`, `runtime.max_waiters`, `runtime.outage_refresh_grace_seconds`, `rate_limits.*`,
    /// `contracts.*`) on top of the defaults declared above.
    ///
    /// - Throws: `ConfigurationError` naming the first key whose value cannot be used.
    public init(reading values: ConfigurationValues) throws(ConfigurationError) {
        var configuration = GatewayConfiguration()
        if let value = try values.string("gateway.host") { configuration.host = value }
        if let value = try values.int("gateway.port", in: 0...65_535) { configuration.port = value }
        if let value = try values.string("gateway.audience") { configuration.audience = value }
        if let value = try values.string("gateway.client_id") { configuration.clientID = value }
        if let value = try values.string("gateway.default_tenant") {
            guard AccountService.isValidName(value) else { throw ConfigurationError(key: "gateway.default_tenant", "must be 1-64 letters, digits or . _ @ + -") }
            configuration.defaultTenant = value
        }
        if let value = try values.int("gateway.max_body_bytes", in: 1_024...(64 << 20)) { configuration.maximumBodyBytes = value }
        if let value = try values.string("gateway.client_directory") { configuration.clientDirectory = value.isEmpty ? nil : value }
        if let value = try values.bool("gateway.query_credentials") { configuration.acceptsQueryCredentials = value }
        if let value = try values.bool("gateway.http2") { configuration.http2 = value }
        if let value = try values.string("gateway.demo") {
            guard let mode = DemoMode(rawValue: value) else { throw ConfigurationError(key: "gateway.demo", "must be auto (on when the listener is loopback), on or off, not \"\(value)\"") }
            configuration.demo = mode
        }
        if let value = try values.int("gateway.max_message_bytes", in: 1_024...(16 << 20)) { configuration.maximumMessageBytes = value }
        if let origins = try Self.origins(values, "gateway.allowed_origins") { configuration.allowedOrigins = origins }
        if let value = try values.url("gateway.public_url") {
            // The issuer and every MCP server's URL are made from it: a path would put them in two places.
            if let path = URL(string: value)?.path, !path.isEmpty, path != "/" {
                throw ConfigurationError(
                    key: "gateway.public_url",
                    "must be an origin (scheme, host and port) without a path, such as https://auth.example.com, not \"\(value)\": the issuer and the MCP servers' URLs are made from it, and a path would make them disagree; serve the gateway at its own host's root")
            }
            configuration.publicURL = value
        }
        configuration.browserSessions = try BrowserSessionSettings(reading: values)
        if let value = try values.string("gateway.cookie_domain") { configuration.cookieDomain = value.isEmpty ? nil : value.lowercased() }
        if let origins = try Self.origins(values, "gateway.login_return_origins") { configuration.loginReturnOrigins = origins }
        if let proxies = try values.strings("gateway.trusted_proxies") {
            configuration.trustedProxies = []
            for text in proxies {
                guard let network = IPNetwork(text) else {
                    throw ConfigurationError(key: "gateway.trusted_proxies", "must list IP addresses or CIDR networks such as 10.0.0.0/8, not \"\(text)\"")
                }
                configuration.trustedProxies.append(network)
            }
        }
        if let value = try values.string("gateway.forward_auth.headers") {
            guard let family = ForwardAuthHeaderFamily(rawValue: value) else {
                throw ConfigurationError(
                    key: "gateway.forward_auth.headers", "must be nginx (X-Original-URI, X-Original-Method) or forwarded (X-Forwarded-Uri, X-Forwarded-Method: Caddy, Traefik), not \"\(value)\"")
            }
            configuration.forwardAuthHeaders = family
        }
        for family in ForwardAuthHeaderFamily.allCases {
            let key = "gateway.forward_auth.proxies.\(family.rawValue)"
            for text in try values.strings(key) ?? [] {
                guard let network = IPNetwork(text) else {
                    throw ConfigurationError(key: key, "must list IP addresses or CIDR networks such as 10.0.0.5, not \"\(text)\"")
                }
                guard configuration.trustedProxies.contains(where: { $0.contains(network.bytes) && $0.prefixLength <= network.prefixLength }) else {
                    throw ConfigurationError(key: key, "lists \(text), which gateway.trusted_proxies does not cover: forward-auth answers trusted proxies only; add it there too")
                }
                if let bound = configuration.forwardAuthProxies.first(where: { ForwardAuthProxies.overlap($0.network, network) }) {
                    throw ConfigurationError(
                        key: key, "lists \(text), which shares addresses with \(bound.family.rawValue)'s \(bound.network.description): each proxy speaks one family; list it under one")
                }
                configuration.forwardAuthProxies.append(.init(network: network, family: family))
            }
        }
        configuration.extAuthz = try ExtAuthzConfiguration(reading: values)
        configuration.tracing = try TracingSettings(reading: values)
        switch (try values.string("gateway.tls.certificate_path"), try values.string("gateway.tls.private_key_path")) {
        case (nil, nil): break
        case (let certificate?, let key?): configuration.tls = TLSFiles(certificatePath: certificate, privateKeyPath: key)
        case (nil, _): throw ConfigurationError(key: "gateway.tls.certificate_path", "is required when gateway.tls.private_key_path is set")
        case (_, nil): throw ConfigurationError(key: "gateway.tls.private_key_path", "is required when gateway.tls.certificate_path is set")
        }
        configuration.upstreamCAFile = try values.string("gateway.upstream_ca_file")
        // The environment's GATEWAY_ROUTES (short forms) over the file's list (strings or maps).
        if let routes = try values.strings("gateway.routes") {
            configuration.routes = try routes.map { text throws(ConfigurationError) in try ProxyRoute.reading(short: text, key: "gateway.routes") }
        } else if let entries = values.mapList("gateway.routes") {
            configuration.routes = try entries.map { entry throws(ConfigurationError) in try ProxyRoute(reading: entry) }
        }
        try configuration.checkCookieDomain()
        try configuration.checkRoutes(configuration.routes)
        if let value = try values.string("logging.access_user_name") {
            guard let parsed = AccessLogUserName(rawValue: value) else {
                throw ConfigurationError(key: "logging.access_user_name", "must be username, email or none, not \"\(JSONValue.clip(value))\"")
            }
            configuration.accessLogUserName = parsed
        }
        // admin.port is read (and checked) even with the listener off, so a file keeping it is still good.
        let adminPort = try values.int("admin.port", in: 0...65_535)
        if let value = try values.string("admin.host") { configuration.adminHost = value }
        if try values.bool("admin.enabled") == false {
            configuration.adminPort = nil
        } else if let adminPort {
            configuration.adminPort = adminPort
        }

        if let value = try values.seconds("tokens.access_token_lifetime_seconds") { configuration.accessTokenLifetime = value }
        if let value = try values.int("tokens.revocation_outage_grace_seconds", in: 0...3_600) { configuration.revocationOutageGrace = Double(value) }
        if let value = try values.seconds("tokens.refresh_token_lifetime_seconds") { configuration.refreshTokenLifetime = value }
        if let value = try values.int("tokens.leeway_seconds", in: 0...600) { configuration.leeway = Double(value) }
        if let value = try values.seconds("tokens.max_lifetime_seconds") { configuration.maximumTokenLifetime = value }
        guard configuration.accessTokenLifetime <= configuration.maximumTokenLifetime else {
            throw ConfigurationError(key: "tokens.access_token_lifetime_seconds", "must not exceed tokens.max_lifetime_seconds (\(Int(configuration.maximumTokenLifetime)))")
        }

        if let value = try values.int("limits.max_header_bytes", in: 1_024...(1 << 20)) { configuration.limits.maximumHeaderBytes = value }
        if let value = try values.int("limits.max_header_count", in: 8...10_000) { configuration.limits.maximumHeaderCount = value }
        if let value = try values.int("limits.max_header_field_bytes", in: 256...(1 << 20)) { configuration.limits.maximumHeaderFieldBytes = value }
        if let value = try values.int("limits.request_head_timeout_seconds", in: 1...300) { configuration.limits.requestHeadTimeout = Double(value) }
        if let value = try values.int("limits.idle_timeout_seconds", in: 1...3_600) { configuration.limits.idleTimeout = Double(value) }
        if let value = try values.int("limits.request_timeout_seconds", in: 1...3_600) { configuration.limits.requestTimeout = Double(value) }
        if let value = try values.int("limits.max_connections", in: 1...1_000_000) { configuration.limits.maximumConnections = value }
        if let value = try values.int("limits.h2_max_concurrent_streams", in: 1...10_000) { configuration.limits.http2MaximumConcurrentStreams = value }
        if let value = try values.int("limits.h2_max_resets_per_second", in: 1...10_000) { configuration.limits.http2MaximumResetsPerSecond = value }
        if let value = try values.int("limits.ws_messages_per_second", in: 1...100_000) { configuration.limits.webSocketMessagesPerSecond = Double(value) }
        if let value = try values.int("limits.ws_ping_interval_seconds", in: 1...3_600) { configuration.limits.webSocketPingInterval = Double(value) }
        if let value = try values.int("limits.ws_send_timeout_seconds", in: 1...3_600) { configuration.limits.webSocketSendTimeout = Double(value) }

        if let value = try values.string("runtime.name") { configuration.runtimeName = value }
        configuration.runtimeURL = try values.url("runtime.url")
        if let value = try values.int("runtime.timeout_seconds", in: 1...300) { configuration.runtimeTimeout = Double(value) }
        if let value = try values.int("runtime.max_waiters", in: 1...1_000_000) { configuration.runtimeMaximumWaiters = value }
        if let value = try values.int("runtime.outage_refresh_grace_seconds", in: 0...3_600) { configuration.runtimeOutageRefreshGrace = Double(value) }

        for rule in AdmissionRateLimits.Rule.allCases {
            configuration.rateLimits[rule] = try Self.rateLimit(values, "rate_limits." + rule.rawValue, default: configuration.rateLimits[rule])
        }
        if let value = try values.int("contracts.sessions_per_user", in: 1...100_000) { configuration.contract.maximumSessionsPerUser = value }
        if let value = try values.int("contracts.sockets_per_session", in: 1...1_000_000) { configuration.contract.maximumSocketsPerSession = value }
        if let value = try values.strings("contracts.anonymous_intents") { configuration.contract.anonymousIntents = Set(value) }
        if let issuer = try GatewayIssuer.read(values) {
            configuration.issuer = issuer.url
            configuration.issuerIsDerived = issuer.isDerived
        }
        configuration.trust = try TrustConfiguration(reading: values, gatewayIssuer: configuration.issuer)
        configuration.routes = try configuration.resolvingMCPResources(configuration.routes)
        configuration.authorizationServer = try AuthorizationServerSettings(reading: values)
        configuration.connections = try ConnectionsConfiguration(reading: values)
        try configuration.checkUpstreamCredentials()
        try configuration.checkRouteIssuers()
        try configuration.checkRouteAudiences()
        try configuration.checkMCPAudiences()
        self = configuration
    }

    /// A list of exact origins (`https://app.example.com`: scheme, host, port; no path).
    static func origins(_ values: ConfigurationValues, _ key: String) throws(ConfigurationError) -> [String]? {
        guard let origins = try values.strings(key) else { return nil }
        for origin in origins {
            guard let url = URL(string: origin), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil,
                url.path.isEmpty, url.query == nil
            else { throw ConfigurationError(key: key, "must list origins such as https://app.example.com (scheme, host, port; no path), not \"\(origin)\"") }
        }
        return origins
    }

    static func rateLimit(_ values: ConfigurationValues, _ key: String, default fallback: RateLimit) throws(ConfigurationError) -> RateLimit {
        var limit = fallback
        if let value = try values.int(key + ".per_minute", in: 1...1_000_000) { limit.perMinute = Double(value) }
        if let value = try values.int(key + ".burst", in: 1...1_000_000) { limit.burst = value }
        return limit
    }
}
