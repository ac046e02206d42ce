import EdgeHTTP
import HTTPTypes
import Logging
import MCPPolicy
import MCPResource
import NIOCore
import NIOHTTP1
import NIOSSL
import Observability
import Traces
import RuntimeAccess
import SecurityGuard
import TrafficCop

/// Everything the event-loop proxy path needs, shared by every connection.
///
/// Every `gateway.routes` request (`http://` and `https://` upstreams, every
/// method) is served here, by a `ProxyExchange` on the client connection's event
/// loop from request head to response end: plain ones straight from the bytes
/// (`ProxyFrontHandler`), the rest after NIO's decoder (`ProxyChannelHandler`);
/// the rest of the API stays on Hummingbird. It is the only proxy path.
package final class DataPlane: Sendable {
    /// One `gateway.routes` entry served on the event loop.
    ///
    /// A class: every exchange holds its route, and a struct of this size was copied into each
    /// one, a retain and a release for each of its references on every request.
    package final class Route: Sendable {
        /// The path prefix without its trailing `/` (empty for `/`).
        package let prefix: String
        /// The host it is bound to; `nil`: any host.
        package let host: RouteHost?
        package let origin: UpstreamOrigin
        /// The `aud` of its assertions: the upstream URL as configured.
        package let audience: String
        /// The route template in logs and metrics.
        package let template: String
        package let name: String
        /// Its place in its table's `routes`, and the table's generation (the metric handles' key).
        package let index: Int
        package let generation: Int
        /// The methods it forwards, in NIO's spelling, and as `Allow` lists them.
        package let methods: [HTTPMethod]
        package let allowedMethodNames: [String]
        /// `false` for `auth: none`.
        package let requiresToken: Bool
        /// Whether it forwards one of `UpstreamNamespace.webDAVMethods`: its upstream is a WebDAV
        /// server, where a `DELETE` of a folder takes all it holds.
        package var speaksWebDAV: Bool { methods.contains { UpstreamNamespace.webDAVMethods.contains($0.rawValue) } }
        package let policy: RoutePolicy?
        /// `gateway.allowed_origins` as the route's table holds them (CORS on its answers).
        package let allowedOrigins: Set<String>
        /// Whether the upstream gets the path below the prefix (else the whole path).
        package let stripsPrefix: Bool
        /// Whether the upstream gets the client's `Host` (`preserve_host`) instead of its own.
        package let preservesHost: Bool
        /// A route without an upstream, decided by forward-auth only: `ProxyExchange.start` answers
        /// its requests 404 (its `origin` is never connected to).
        package let forwardAuthOnly: Bool
        /// The identity fields this route sends its upstream.
        package let identityFields: IdentityFieldNames?
        /// Every route's identity field names, folded: never taken from a client.
        package let identityFieldNames: Set<String>
        /// `auth: browser`: the session cookie is taken, and a navigation without a session is sent to sign in.
        package let acceptsSessionCookie: Bool
        /// The provider its navigations sign in with (`sign_in`).
        package let signIn: String?
        /// `grpc: true`: a request that is not gRPC is refused (415 `grpc_required`).
        package let grpcOnly: Bool
        /// `mcp: true`: the MCP server's resource; only tokens whose `aud` is its identifier are taken.
        package let mcp: MCPResource?
        /// What an MCP route's callers may do: every POST's body is read and decided on (set with `mcp`).
        package let mcpPolicy: MCPCallPolicy?
        /// `mcp != nil`, its identifier and its scopes, kept apart: asked on every request, where
        /// reading them through the optional struct copied all of it.
        package let isMCP: Bool
        package let mcpIdentifier: String?
        package let mcpScopes: [String]
        /// `upstream_credential`: the caller's own credential at the upstream, looked up per request.
        package let upstreamCredential: UpstreamCredential?

        package init(
            prefix: String, host: RouteHost?, origin: UpstreamOrigin, audience: String, template: String, name: String, index: Int,
            generation: Int, methods: [HTTPMethod], allowedMethodNames: [String], requiresToken: Bool, policy: RoutePolicy?,
            allowedOrigins: Set<String>, stripsPrefix: Bool, preservesHost: Bool, forwardAuthOnly: Bool,
            identityFields: IdentityFieldNames?, identityFieldNames: Set<String>, acceptsSessionCookie: Bool, signIn: String?,
            grpcOnly: Bool, mcp: MCPResource?, mcpPolicy: MCPCallPolicy?, upstreamCredential: UpstreamCredential? = nil
        ) {
            self.upstreamCredential = upstreamCredential
            self.prefix = prefix
            self.host = host
            self.origin = origin
            self.audience = audience
            self.template = template
            self.name = name
            self.index = index
            self.generation = generation
            self.methods = methods
            self.allowedMethodNames = allowedMethodNames
            self.requiresToken = requiresToken
            self.policy = policy
            self.allowedOrigins = allowedOrigins
            self.stripsPrefix = stripsPrefix
            self.preservesHost = preservesHost
            self.forwardAuthOnly = forwardAuthOnly
            self.identityFields = identityFields
            self.identityFieldNames = identityFieldNames
            self.acceptsSessionCookie = acceptsSessionCookie
            self.signIn = signIn
            self.grpcOnly = grpcOnly
            self.mcp = mcp
            self.mcpPolicy = mcpPolicy
            self.isMCP = mcp != nil
            self.mcpIdentifier = mcp?.identifier
            self.mcpScopes = mcp?.scopes ?? []
        }

        /// The Bearer token of an `Authorization` value as this route reads it: beside the session
        /// cookie on an `auth: browser` route (another scheme left to the cookie), strictly elsewhere.
        package func bearerToken(fromAuthorization authorization: String?) throws(AuthenticationFailure) -> String? {
            acceptsSessionCookie
                ? try AccessTokenAuthenticator.bearerTokenBesideCookie(fromAuthorization: authorization)
                : try AccessTokenAuthenticator.bearerToken(fromAuthorization: authorization)
        }
    }

    /// The routes and origins in force (a reload replaces them).
    package let table: LiveRouteTable
    let authenticator: AccessTokenAuthenticator
    let sessions: SessionOwnershipView
    let runtime: RuntimeClient
    let admission: Admission
    let metrics: GatewayMetrics
    package let logger: Logger
    /// The one line per proxied request.
    let accessLog: AccessLog
    let maximumBodyBytes: Int
    let upstreamTimeout: TimeAmount
    let forwardedProto: String
    /// TLS for `https://` upstreams: the system's trust roots plus `gateway.upstream_ca_file`.
    let upstreamTLS: NIOSSLContext?
    /// The same trust, offering `h2` by ALPN: for `protocol: h2` upstreams.
    let upstreamTLSForHTTP2: NIOSSLContext?
    /// Browser sessions, for `auth: browser` routes.
    let browser: BrowserSessionGate
    /// The WebSocket tunnels open to routes.
    package let tunnels: TunnelRegistry
    /// Where a route's `upstream_credential` comes from (`nil`: no route may have one).
    let credentials: (any UpstreamCredentialSource)?
    /// Where a route's `upstream_credential: {exchange: ...}` gets its token (`nil`: no route may have one).
    let exchanges: (any ExchangedCredentialSource)?
    /// Which header family each proxy in front speaks to `/api/auth/verify`; `nil`: forward-auth
    /// is not decided on the event loop (Hummingbird's route answers every decision).
    let forwardAuthProxies: ForwardAuthProxies?
    /// Starts a span for each request and decision; `nil`: tracing is off, and nothing is started.
    let tracer: RequestTracer?
    private let pools = EventLoopTable<UpstreamPool>()
    private let http2Pools = EventLoopTable<UpstreamHTTP2Pool>()
    private let metricTables = EventLoopTable<ProxyMetricHandles>()
    private let headBufferTables = EventLoopTable<HeadBuffers>()

    package init(
        table: LiveRouteTable, authenticator: AccessTokenAuthenticator, sessions: SessionOwnershipView, runtime: RuntimeClient,
        admission: Admission, metrics: GatewayMetrics, logger: Logger, accessLog: AccessLog, maximumBodyBytes: Int, upstreamTimeout: Double, forwardedProto: String,
        upstreamTLS: NIOSSLContext?, upstreamTLSForHTTP2: NIOSSLContext? = nil, browser: BrowserSessionGate, tunnels: TunnelRegistry = TunnelRegistry(),
        forwardAuthProxies: ForwardAuthProxies? = nil, credentials: (any UpstreamCredentialSource)? = nil,
        exchanges: (any ExchangedCredentialSource)? = nil, tracer: RequestTracer? = nil
    ) {
        self.tracer = tracer
        self.credentials = credentials
        self.exchanges = exchanges
        self.forwardAuthProxies = forwardAuthProxies
        self.upstreamTLSForHTTP2 = upstreamTLSForHTTP2
        self.tunnels = tunnels
        self.upstreamTLS = upstreamTLS
        self.browser = browser
        self.table = table
        self.authenticator = authenticator
        self.sessions = sessions
        self.runtime = runtime
        self.admission = admission
        self.metrics = metrics
        self.logger = logger
        self.accessLog = accessLog
        self.maximumBodyBytes = maximumBodyBytes
        self.upstreamTimeout = .milliseconds(Int64(upstreamTimeout * 1000))
        self.forwardedProto = forwardedProto
    }

    /// The most bytes of pipelined requests a connection may hold while one is answered before it
    /// is closed: more than one read can bring only when a client keeps sending past what it was asked for.
    var maximumQueuedBytes: Int { max(256 * 1024, maximumBodyBytes) }

    /// The metric handles of `eventLoop` (made on first use).
    func metricHandles(for eventLoop: any EventLoop) -> ProxyMetricHandles {
        metricTables.value(for: eventLoop) { ProxyMetricHandles(metrics: metrics) }
    }

    /// The head buffers of `eventLoop` (made on first use).
    func headBuffers(for eventLoop: any EventLoop) -> HeadBuffers {
        headBufferTables.value(for: eventLoop) { HeadBuffers() }
    }

    /// The pool of `eventLoop` (made on first use).
    func pool(for eventLoop: any EventLoop) -> UpstreamPool {
        pools.value(for: eventLoop) { UpstreamPool(eventLoop: eventLoop, tls: upstreamTLS) }
    }

    /// The HTTP/2 upstream connections of `eventLoop` (made on first use).
    func http2Pool(for eventLoop: any EventLoop) -> UpstreamHTTP2Pool {
        http2Pools.value(for: eventLoop) { UpstreamHTTP2Pool(eventLoop: eventLoop, tls: upstreamTLSForHTTP2) }
    }

    /// The TLS context for `https://` upstreams, with full certificate verification: the
    /// system's trust roots, and the CA certificates of `caFile` (PEM) when given; `alpn` offers
    /// those protocols (`["h2"]` for `protocol: h2`).
    package static func upstreamTLSContext(caFile: String?, alpn: [String] = []) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.applicationProtocols = alpn
        if let caFile {
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMFile(caFile)
            } catch {
                throw GatewayStartupError("gateway.upstream_ca_file: cannot read PEM CA certificates from \(caFile)")
            }
            guard !certificates.isEmpty else { throw GatewayStartupError("gateway.upstream_ca_file: \(caFile) holds no PEM certificate") }
            configuration.additionalTrustRoots = [.certificates(certificates)]
        }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw GatewayStartupError("cannot set up TLS for https upstreams: \(error)")
        }
    }
}
