/// How the Runtime behaves. Defaults are the embedded deployment's.
public struct RuntimeConfiguration: Sendable, Equatable {
    /// Listen address; loopback by default.
    public var host: String = "127.0.0.1"
    /// Listen port (8081); 0 picks a free one (the embedded gateway reads it back).
    public var port: Int = 8081
    /// The Runtime's name: the `aud` every assertion must carry.
    public var name: String = "runtime"
    /// The gateway's issuer: the `iss` every assertion must carry.
    public var assertionIssuer: String = "http://127.0.0.1:8080"
    /// Clock skew tolerated on assertion times, in seconds.
    public var assertionLeeway: Double = 5
    /// Longest assertion lifetime accepted (DESIGN.md: 60 s).
    public var assertionMaximumLifetime: Double = 60
    /// Idle time after which an anonymous session expires (30 minutes).
    public var anonymousIdleTimeout: Double = 30 * 60
    /// Idle time after which an authenticated session expires (24 hours).
    public var authenticatedIdleTimeout: Double = 24 * 3600
    /// Absolute lifetime of an authenticated session, from login (7 days).
    public var authenticatedLifetime: Double = 7 * 24 * 3600
    /// The execution contract for anonymous sessions: the only intents they may run.
    public var anonymousIntents: Set<String> = ["echo", "time.now"]
    /// Largest session metadata, serialised, in bytes.
    public var maximumMetadataBytes: Int = 4096
    /// Largest request body or agent-channel message, in bytes.
    public var maximumMessageBytes: Int = 64 * 1024
    /// How often ended sessions are swept from storage, in seconds.
    public var sweepInterval: Double = 60
    /// How long into a graceful stop a connection to the Runtime may stay open, in seconds:
    /// the command line's `limits.shutdown_timeout_seconds` (not a `runtime.*` key).
    public var shutdownTimeout: Double = 30

    public init() {}
}
