import ExtAuthz
import AuthorizationServer
import ConnectedAccounts
import DataPlane
import EdgeHTTP
import Foundation
import HTTPTypes
import Observability
import ProviderLogin
import TrafficCop
import TrustedIssuers
import Traces

/// How the gateway behaves. The defaults are the embedded deployment's:
/// loopback listeners, the Runtime in-process, nothing exposed beyond this machine.
public struct GatewayConfiguration: Sendable, Equatable {
    /// Public listener; loopback by default.
    public var host: String = "127.0.0.1"
    /// Public port (8080); 0 picks a free one.
    public var port: Int = 8080
    /// Admin listener for `/metrics`; loopback by default.
    public var adminHost: String = "127.0.0.1"
    /// Admin port (9090); `nil` turns the admin listener off; 0 picks a free one.
    public var adminPort: Int? = 9090
    /// `iss` of access tokens and assertions; also the base of the discovery URLs.
    public var issuer: String = "http://127.0.0.1:8080"
    /// Whether `issuer` was derived (from `public_url` or the listener) rather than set by `gateway.issuer`.
    public var issuerIsDerived = true
    /// `aud` of access tokens.
    public var audience: String = "portcullis"
    /// `client_id` of tokens minted at login.
    public var clientID: String = "portcullis"
    /// Access-token lifetime in seconds (15 minutes).
    public var accessTokenLifetime: Double = 900
    /// While the store is known unreachable, how long after its last sync the revocation mirror
    /// still answers (`tokens.revocation_outage_grace_seconds`; 0: every check needs the store).
    public var revocationOutageGrace: Double = 300
    /// Refresh-token lifetime in seconds (30 days); each rotation starts a new one.
    public var refreshTokenLifetime: Double = 30 * 86_400
    /// Clock skew tolerated on token times, in seconds.
    public var leeway: Double = 30
    /// Longest access-token lifetime accepted (`exp - iat`), in seconds.
    public var maximumTokenLifetime: Double = 3_600
    /// Tenant used when a login names none.
    public var defaultTenant: String = "default"
    /// The Runtime's name: the `aud` of assertions sent to it.
    public var runtimeName: String = "runtime"
    /// A remote Runtime's base URL; `nil` starts the Runtime in-process.
    public var runtimeURL: String? = nil
    /// How long a call to the Runtime may take, in seconds, before 504.
    public var runtimeTimeout: Double = 10
    /// Runtime calls waiting at once, at most (`runtime.max_waiters`): past it a request is 503 `runtime_busy` at once.
    public var runtimeMaximumWaiters: Int = 1_000
    /// While the Runtime is known unreachable, a refresh of a session this gateway last saw live
    /// and owned is answered from that view, for up to this long after the view was last checked
    /// (`runtime.outage_refresh_grace_seconds`; 0: a refresh needs the Runtime).
    public var runtimeOutageRefreshGrace: Double = 300
    /// Rate limits of the public routes.
    public var rateLimits = AdmissionRateLimits.Settings()
    /// Execution contract: sessions per user, sockets per session, anonymous intents.
    public var contract = ExecutionContract()
    /// Browser origins allowed to call the API (CORS) and to open sockets; empty: no cross-origin use.
    public var allowedOrigins: [String] = []
    /// The gateway's address as browsers and providers reach it (`gateway.public_url`): the base of
    /// the login redirect URI and the back-channel logout URI; `nil`: `issuer`.
    public var publicURL: String?
    /// The domain one browser sign-in covers (`gateway.cookie_domain`): the session cookie's
    /// `Domain`, and where route hosts may lie besides the public host; `nil`: the public host alone.
    public var cookieDomain: String?
    /// `gateway.browser_sessions`: how long a browser stays signed in.
    public var browserSessions = BrowserSessionSettings()
    /// Where a provider login may return to (`gateway.login_return_origins`), exact origins; empty: the public URL's own origin.
    public var loginReturnOrigins: [String] = []
    /// How access-log lines name the person beside `user_id` (`logging.access_user_name`).
    public var accessLogUserName = AccessLogUserName.username

    /// `public_url`, else `issuer`, without a trailing `/`.
    public var effectivePublicURL: String { (publicURL ?? issuer).trimmingTrailingSlash }
    /// The redirect URI registered at every provider users sign in through.
    public var loginRedirectURI: String { effectivePublicURL + "/api/auth/oidc/callback" }
    /// The back-channel logout URI registered at every provider users sign in through.
    public var backChannelLogoutURI: String { effectivePublicURL + "/api/auth/oidc/backchannel-logout" }
    /// The origins a login may return to: `login_return_origins`, or the public URL's own, as `ReturnTarget` spells origins.
    public var effectiveLoginReturnOrigins: [String] {
        (loginReturnOrigins.isEmpty ? [effectivePublicURL] : loginReturnOrigins).compactMap(ReturnTarget.origin(of:))
    }
    /// Proxies whose `X-Forwarded-For` is believed (addresses or CIDR networks), and the only
    /// peers `/api/auth/verify` answers (403 `forward_auth_untrusted_peer` for any other).
    public var trustedProxies: [IPNetwork] = []
    /// Which header names carry the original request to forward-auth (`gateway.forward_auth.headers`):
    /// nginx's `X-Original-*` by default, or `forwarded` (`X-Forwarded-Uri`/`-Method`: Caddy, Traefik).
    public var forwardAuthHeaders: ForwardAuthHeaderFamily = .nginx
    /// Proxies bound to a family of their own (`gateway.forward_auth.proxies.nginx` and `.forwarded`),
    /// each within `trustedProxies`; any other trusted proxy speaks `forwardAuthHeaders`.
    public var forwardAuthProxies: [ForwardAuthProxies.Binding] = []
    /// `ext_authz`: Envoy's external authorization on listeners of its own; `nil`: off.
    public var extAuthz: ExtAuthzConfiguration?
    /// `tracing`: OpenTelemetry traces sent over OTLP/HTTP; `nil`: off (no span is started).
    public var tracing: TracingSettings?
    /// Serve HTTPS with these PEM files; `nil` serves plain HTTP (fine on loopback).
    public var tls: TLSFiles? = nil
    /// Largest request body accepted, in bytes (413 beyond).
    public var maximumBodyBytes: Int = 64 * 1024
    /// Largest WebSocket message relayed, in bytes (close 1009 beyond).
    public var maximumMessageBytes: Int = 64 * 1024
    /// Limits at the edge: head size and time, idle time, connections, socket message rate and liveness.
    public var limits = EdgeLimits()
    /// Extra upstreams: requests under `prefix` are proxied to `upstream`.
    public var routes: [ProxyRoute] = []
    /// CA certificates (PEM) trusted for `https://` upstreams beside the system's; `nil`: the system's only.
    public var upstreamCAFile: String? = nil
    /// A directory to read the browser client and the demo page from at start-up
    /// (`js/portcullis.js`, `demo/index.html`) instead of the copies built into the
    /// binary; for people who serve a modified client. `nil`: the built-in copies.
    public var clientDirectory: String? = nil
    /// Whether an agent-socket upgrade may carry its access token as `access_token` in the
    /// URL (old clients); `false` answers such an upgrade 400 `token_in_url`. `true` for now,
    /// for compatibility; the project's client sends it in `Sec-WebSocket-Protocol`.
    public var acceptsQueryCredentials: Bool = true
    /// `gateway.http2`: HTTP/2 beside HTTP/1.1 on the public listener (ALPN `h2` with TLS, prior
    /// knowledge on plain HTTP); `false` serves HTTP/1.1 alone.
    public var http2: Bool = true
    /// The demo page at `/demo/`: `auto` serves it when the public listener is on loopback.
    public var demo: DemoMode = .auto
    /// Identity providers whose access tokens are accepted beside the gateway's own (`trust.issuers`).
    public var trust = TrustConfiguration()
    /// `authorization_server`: the clients the gateway's OAuth authorization server knows, and its lifetimes.
    public var authorizationServer = AuthorizationServerSettings()
    /// `connections`: services people connect once, the gateway their OAuth client at each.
    public var connections = ConnectionsConfiguration()

    /// Whether `/demo/` is served.
    public enum DemoMode: String, Sendable, Equatable, CaseIterable {
        case auto, on, off
    }

    /// `auto` resolved against the listener: on for a loopback host only.
    public var servesDemo: Bool {
        switch demo {
        case .on: true
        case .off: false
        case .auto: host == "127.0.0.1" || host == "::1" || host == "localhost"
        }
    }

    public init() {}

    /// `X-Forwarded-Proto` for upstreams: how clients reach this gateway.
    var forwardedProto: String { tls == nil ? "http" : "https" }

    /// The JWKS URL published in the discovery document.
    public var jwksURL: String { issuer.trimmingTrailingSlash + "/.well-known/jwks.json" }
}

/// Certificate chain and private key for HTTPS, both PEM files.
public struct TLSFiles: Sendable, Equatable {
    public var certificatePath: String
    public var privateKeyPath: String

    public init(certificatePath: String, privateKeyPath: String) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
    }
}
