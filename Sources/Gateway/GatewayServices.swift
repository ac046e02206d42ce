import AuthorizationServer
import ConnectedAccounts
import DataPlane
import HTTPTypes
import Hummingbird
import JOSE
import Logging
import Observability
import Traces
import ProviderLogin
import Resilience
import RuntimeAPI
import RuntimeAccess
import SecurityGuard
import SocketGuard
import StateSurface
import TokenExchange
import TrafficCop
import TrustedIssuers

/// The gateway's parts, built once from its configuration: the composition
/// root. Routes, the socket guard and the relay are each given the few parts
/// they use, not this whole value.
///
/// The gateway's own store holds accounts and credentials only; sessions and
/// executions belong to the Runtime and are reached through `runtime`.
public struct GatewayServices: Sendable {
    public typealias Store = UserRepository & CredentialRepository & LoginFlowRepository & ProviderSessionRepository & ProviderUserRepository & BrowserSessionRepository & OAuthRepository & ConnectionRepository

    public let configuration: GatewayConfiguration
    public let store: any Store
    public let keys: LiveKeyRing
    public let accounts: AccountService
    public let refreshTokens: RefreshTokenService
    public let authenticator: AccessTokenAuthenticator
    /// Revoked token ids and account not-befores, mirrored in memory (synced by `AccessChangeWatcher`).
    public let revocations: RevocationList
    public let issuer: AccessTokenIssuer
    /// The Runtime client; its HTTP client must be shut down (`PortcullisServer` does it).
    public let runtime: RuntimeClient
    public let metrics: GatewayMetrics
    /// Open agent sockets by session (this gateway's).
    /// WebSocket tunnels to routes; closed with the agent sockets of their session (`sockets`).
    let tunnels = TunnelRegistry()
    public let sockets: SocketRegistry
    /// The agent links to the Runtime, one per event loop.
    let agentLinks: RuntimeAgentLinks
    /// Who owns the sessions proxied requests name (kept fresh by `AccessChangeWatcher`).
    public let sessionOwners: SessionOwnershipView
    /// The dependencies' background checks, which readiness answers from.
    public let monitor: DependencyMonitor
    public let clock: any TokenClock
    public let logger: Logger
    /// The one line per request (through `logger` unless serve gives it the buffered access log).
    public let accessLog: AccessLog
    /// Starts the data plane's, forward-auth's and ext_authz's spans (`tracing`); `nil`: off.
    public let tracer: RequestTracer?
    /// The identity providers whose tokens count beside the gateway's (`nil`: none).
    public let trustedIssuers: TrustedIssuers?
    /// The providers users sign in through (`trust.issuers` entries with `login`).
    public let providers: ProviderDirectory
    /// The services people connect (`connections`), with the gateway's credential at each.
    public let connections: ConnectionDirectory
    /// The connected accounts' tokens this instance sent lately.
    let connectedTokens = ConnectedTokenCache()
    /// The tokens exchanged at the company's provider for people lately (`upstream_credential: {exchange: ...}`).
    let exchangedTokens = ExchangedTokenCache()
    let admission: Admission
    /// The routes and CORS origins in force: the data plane, forward-auth and the origin policy
    /// read them per request, and a reload replaces them (`ConfigurationReloader`).
    let routeTable: LiveRouteTable
    /// How the last configuration reload ended (the admin `/readyz` says).
    public let reloads = ReloadStatus()
    /// The last provider re-check of each provider on this instance (the admin `/readyz` shows it).
    let providerRechecks = ProviderRecheckStatus()
    /// The browser sessions met so far (`auth: browser` routes, `/.portcullis/*`).
    public let browserSessions: BrowserSessionBook
    /// The session cookie's name and attributes on this deployment.
    public let sessionCookie: SessionCookie
    /// Fetches Client ID Metadata Documents, keeping them as their `Cache-Control` says (`nil`:
    /// `authorization_server.client_metadata_hosts` is empty). Trusts what `https://` routes do.
    let clientMetadata: ClientMetadataFetcher?

    /// - Parameters:
    ///   - trustedIssuers: built from `configuration.trust` (`TrustedIssuers(configuration:...)`,
    ///     which reads shared secrets and can fail, so it is made before).
    ///   - providers: built from `configuration.trust` too (`ProviderDirectory(trust:)`, which reads
    ///     the client credentials and can fail).
    public init(
        configuration: GatewayConfiguration, store: any Store, keys: LiveKeyRing,
        runtimeBaseURL: String?, metrics: GatewayMetrics, passwordHasher: PasswordHasher = PasswordHasher(),
        clock: any TokenClock = SystemClock(), trustedIssuers: TrustedIssuers? = nil, providers: ProviderDirectory = .none,
        connections: ConnectionDirectory = .none, logger: Logger, accessLog: AccessLog? = nil, tracer: RequestTracer? = nil
    ) {
        self.tracer = tracer
        self.trustedIssuers = trustedIssuers
        self.connections = connections
        sockets = SocketRegistry(tunnels: tunnels)
        browserSessions = BrowserSessionBook(
            store: store, idleSeconds: configuration.browserSessions.idleMinutes * 60, maximumSeconds: configuration.browserSessions.maximumHours * 3600,
            recheckSeconds: configuration.browserSessions.recheckMinutes * 60)
        sessionCookie = SessionCookie(secure: configuration.servesBrowsersOverHTTPS, domain: configuration.cookieDomain)
        let metadataHosts = configuration.authorizationServer.clientMetadataHosts
        // The CA file is read again (and refused, naming it) by the data plane at start.
        clientMetadata = metadataHosts.isEmpty
            ? nil : (try? DataPlane.upstreamTLSContext(caFile: configuration.upstreamCAFile)).map { ClientMetadataFetcher(hosts: metadataHosts, tls: $0) }
        routeTable = LiveRouteTable(RouteTable(routes: configuration.routes, allowedOrigins: configuration.allowedOrigins, publicHost: configuration.publicHost))
        self.providers = providers
        var accessLog = accessLog ?? AccessLog(logger: logger)
        accessLog.userNames = configuration.accessLogUserName
        self.accessLog = accessLog
        self.configuration = configuration
        self.store = store
        self.keys = keys
        self.clock = clock
        self.logger = logger
        self.metrics = metrics
        accounts = AccountService(users: store, hasher: passwordHasher, clock: clock)
        refreshTokens = RefreshTokenService(credentials: store, lifetime: configuration.refreshTokenLifetime, clock: clock)
        let policy = AccessTokenPolicy.gateway(
            issuer: configuration.issuer, audience: configuration.audience, leeway: configuration.leeway,
            maximumLifetime: configuration.maximumTokenLifetime)
        let storeCircuit = (store as? any StateStore)?.outageCircuit
        revocations = RevocationList(
            store: store, clock: clock, outageGrace: configuration.revocationOutageGrace, storeIsDown: { storeCircuit?.isOpen ?? false })
        authenticator = AccessTokenAuthenticator(
            verifier: AccessTokenVerifier(keys: keys, policy: policy, clock: clock), revocations: revocations, cache: VerifiedTokenCache(),
            trusted: trustedIssuers)
        issuer = AccessTokenIssuer(
            keys: keys, issuer: configuration.issuer, audience: configuration.audience, lifetime: configuration.accessTokenLifetime, clock: clock)
        runtime = RuntimeClient(
            baseURL: runtimeBaseURL ?? configuration.runtimeURL, audience: configuration.runtimeName,
            signer: GatewayAssertionSigner(keys: keys, issuer: configuration.issuer, clock: clock), timeout: configuration.runtimeTimeout,
            http: makeUpstreamHTTPClient(), maximumWaiters: configuration.runtimeMaximumWaiters)
        sessionOwners = SessionOwnershipView(clock: clock)
        monitor = DependencyMonitor(store: store, storeCircuit: storeCircuit, runtime: runtime, metrics: metrics, logger: logger)
        agentLinks = RuntimeAgentLinks(
            runtime: runtime, metrics: metrics, logger: logger, maximumMessageBytes: configuration.maximumMessageBytes,
            timeout: configuration.runtimeTimeout)
        let started = ContinuousClock.now
        let rateLimits = AdmissionRateLimits(settings: configuration.rateLimits) {
            let elapsed = ContinuousClock.now - started
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        admission = Admission(
            validator: SessionIntentValidator(contract: configuration.contract), rateLimits: rateLimits,
            clientAddresses: ClientAddressResolver(trustedProxies: configuration.trustedProxies), metrics: metrics)
    }

    var authentication: CallerAuthentication { CallerAuthentication(authenticator: authenticator, metrics: metrics) }
    var jsonBody: JSONBody { JSONBody(maximumBytes: configuration.maximumBodyBytes) }

    var authRoutes: AuthRoutes {
        AuthRoutes(
            authentication: authentication, admission: admission, runtime: runtime, body: jsonBody, accounts: accounts,
            refreshTokens: refreshTokens, revocations: revocations, issuer: issuer, sockets: sockets, sessionOwners: sessionOwners,
            metrics: metrics, logger: logger,
            defaultTenant: configuration.defaultTenant, clientID: configuration.clientID, runtimeOutageRefreshGrace: configuration.runtimeOutageRefreshGrace,
            providerSessions: store, signIn: providerSignIn, postLogoutRedirectURI: (configuration.effectiveLoginReturnOrigins.first ?? configuration.effectivePublicURL) + "/")
    }

    /// The code flow's callback, completion and provider refresh; `nil` without a provider for sign-in.
    var providerSignIn: ProviderSignIn? {
        guard !providers.isEmpty, let vault = providers.vault else { return nil }
        return ProviderSignIn(
            directory: providers, trusted: trustedIssuers, store: store, vault: vault, redirectURI: configuration.loginRedirectURI, clock: clock, logger: logger)
    }

    var providerLoginRoutes: ProviderLoginRoutes {
        ProviderLoginRoutes(
            directory: providers, trustedIssuers: trustedIssuers, signIn: providerSignIn, store: store, admission: admission, runtime: runtime, body: jsonBody,
            auth: authRoutes, clock: clock, logger: logger, redirectURI: configuration.loginRedirectURI,
            returnOrigins: configuration.effectiveLoginReturnOrigins, sessionLifetime: configuration.refreshTokenLifetime, browser: browserSessionRoutes)
    }

    /// Re-checks provider sign-ins in use (by a browser or an agent) with their provider (`nil` with no provider to sign in with).
    var providerRecheck: ProviderRecheck? {
        providerSignIn.map { signIn in
            ProviderRecheck(
                signIn: signIn, store: store, ending: authRoutes.providerEnding, interval: browserSessions.recheckSeconds,
                unavailableLimit: configuration.browserSessions.recheckUnavailableLimitMinutes * 60, metrics: metrics, status: providerRechecks, clock: clock,
                logger: logger)
        }
    }

    var browserSessionRoutes: BrowserSessionRoutes {
        BrowserSessionRoutes(
            providers: providers, trustedIssuers: trustedIssuers, signIn: providerSignIn, store: store, book: browserSessions, cookie: sessionCookie,
            admission: admission, runtime: runtime, accounts: accounts, auth: authRoutes, table: routeTable, clock: clock, logger: logger,
            publicURL: configuration.effectivePublicURL, publicHost: configuration.publicHost, redirectURI: configuration.loginRedirectURI,
            returnOrigins: configuration.effectiveLoginReturnOrigins, defaultTenant: configuration.defaultTenant)
    }

    /// What the data plane and forward-auth need of browser sessions.
    var browserGate: BrowserSessionGate {
        let (table, publicHost, returnOrigins) = (routeTable, configuration.publicHost, configuration.effectiveLoginReturnOrigins)
        return BrowserSessionGate(
            cookie: sessionCookie, book: browserSessions, publicURL: configuration.effectivePublicURL, clock: clock,
            acceptsReturn: { url in
                (try? BrowserSessionRoutes.checkedReturn(url, table: table.current, publicHost: publicHost, returnOrigins: returnOrigins)) != nil
            }, logger: logger)
    }

    var forwardAuthRoutes: ForwardAuthRoutes {
        ForwardAuthRoutes(
            table: routeTable, authentication: authentication, admission: admission, runtime: runtime, sessionOwners: sessionOwners,
            metrics: metrics, proxies: forwardAuthProxies,
            browser: browserSessionRoutes, gate: browserGate)
    }

    var sessionRoutes: SessionRoutes {
        SessionRoutes(authentication: authentication, admission: admission, runtime: runtime, body: jsonBody)
    }

    var intentRoutes: IntentRoutes {
        IntentRoutes(authentication: authentication, admission: admission, runtime: runtime, body: jsonBody)
    }

    /// The proxy for `gateway.routes`, on the event loop; it reads `gateway.upstream_ca_file`
    /// (and so can fail). Its TLS context is made whether or not a route is `https://` now: a reload may add one.
    func makeDataPlane() throws -> DataPlane {
        DataPlane(
            table: routeTable, authenticator: authenticator, sessions: sessionOwners, runtime: runtime, admission: admission,
            metrics: metrics, logger: logger, accessLog: accessLog, maximumBodyBytes: configuration.maximumBodyBytes, upstreamTimeout: configuration.runtimeTimeout,
            forwardedProto: configuration.forwardedProto, upstreamTLS: try DataPlane.upstreamTLSContext(caFile: configuration.upstreamCAFile),
            upstreamTLSForHTTP2: try DataPlane.upstreamTLSContext(caFile: configuration.upstreamCAFile, alpn: ["h2"]),
            browser: browserGate, tunnels: tunnels, forwardAuthProxies: forwardAuthProxies,
            credentials: connections.isEmpty
                ? nil
                : ConnectedAccountCredentials(
                    accounts: connectedAccounts, cache: connectedTokens, clock: clock, connectBase: configuration.effectivePublicURL + ConnectRoutes.prefix + "/"),
            exchanges: tokenExchange.map(ExchangedCredentials.init), tracer: tracer)
    }

    /// Exchanges tokens at the company's provider for people (`nil` with no provider to sign in with).
    var tokenExchange: TokenExchangeService? {
        guard let signIn = providerSignIn else { return nil }
        let (clock, sessionOwners, runtime, admission) = (clock, sessionOwners, runtime, admission)
        let isLive: @Sendable (String, String, String) async throws -> Bool = { sessionID, userID, tenantID in
            try await sessionOwners.isLive(sessionID, by: Principal(userID: userID, tenantID: tenantID), runtime: runtime, admission: admission)
        }
        return TokenExchangeService(
            subjects: ProviderSubjectTokens(store: store, signIn: signIn, recheck: providerRecheck, isLive: isLive, now: { clock.now() }),
            directory: providers,
            trusted: trustedIssuers,
            cache: exchangedTokens, now: { clock.now() }, logger: logger)
    }

    /// Which header family each proxy in front speaks (`gateway.forward_auth`).
    var forwardAuthProxies: ForwardAuthProxies {
        ForwardAuthProxies(defaultFamily: configuration.forwardAuthHeaders, bindings: configuration.forwardAuthProxies)
    }

    var authorizationServerRoutes: AuthorizationServerRoutes {
        let settings = configuration.authorizationServer
        return AuthorizationServerRoutes(
            settings: settings,
            tokens: OAuthTokenService(
                store: store, keys: keys, issuer: configuration.issuer.trimmingTrailingSlash, settings: settings, refreshLifetime: configuration.refreshTokenLifetime,
                clock: clock, clientMetadata: clientMetadata),
            store: store, browser: browserSessionRoutes, recheck: providerRecheck, table: routeTable, verifier: authenticator.verifier,
            connections: connectedAccounts, trusted: trustedIssuers, people: store, logger: logger)
    }

    /// People's connected accounts (none without `connections`).
    public var connectedAccounts: ConnectedAccountService {
        ConnectedAccountService(
            directory: connections, store: store, redirectURI: configuration.effectivePublicURL + ConnectedAccountService.callbackPath, logger: logger)
    }

    /// `/.portcullis/connect/*`: served with no connection configured too, answering that none has the name.
    var connectRoutes: ConnectRoutes {
        ConnectRoutes(
            accounts: connectedAccounts, connectedTokens: connectedTokens, browser: browserSessionRoutes, clock: clock, logger: logger)
    }

    var discoveryRoutes: DiscoveryRoutes {
        DiscoveryRoutes(
            keys: keys, issuer: configuration.issuer, jwksURL: configuration.jwksURL, readiness: Readiness(monitor: monitor, trustedIssuers: trustedIssuers),
            routes: routeTable, dynamicRegistration: configuration.authorizationServer.dynamicRegistration,
            clientMetadataDocuments: !configuration.authorizationServer.clientMetadataHosts.isEmpty,
            confidentialClients: configuration.authorizationServer.hasConfidentialClients, trusted: trustedIssuers)
    }

    var socketGuard: WebSocketGuard {
        WebSocketGuard(
            authenticator: authenticator, runtime: runtime, sessions: sessionOwners, admission: admission, registry: sockets,
            allowedOrigins: { [routeTable] in routeTable.current.allowedOrigins }, acceptsQueryCredentials: configuration.acceptsQueryCredentials,
            metrics: metrics)
    }

    var agentSockets: AgentSockets {
        AgentSockets(
            links: agentLinks, authenticator: authenticator, registry: sockets, metrics: metrics, clock: clock,
            maximumMessageBytes: configuration.maximumMessageBytes, limits: configuration.limits, logger: logger)
    }
}
