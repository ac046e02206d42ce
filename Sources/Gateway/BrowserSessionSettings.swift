import ConfigurationReading
import Foundation

/// How long a browser stays signed in (`gateway.browser_sessions`).
public struct BrowserSessionSettings: Sendable, Equatable {
    /// `idle_minutes`: a session unused this long ends (480: a working day).
    public var idleMinutes: Double = 480
    /// `max_hours`: a session ends this long after its sign-in, however used (24).
    public var maximumHours: Double = 24
    /// `recheck_minutes`: a session signed in through a provider that gave a refresh token, in use,
    /// is re-checked with it this often (15: an access token's life); refused there, it ends.
    public var recheckMinutes: Double = 15
    /// `recheck_unavailable_limit_minutes`: a provider that cannot be asked (unreachable, 5xx, 429)
    /// is asked again with backoff; a session it has not confirmed for this long ends as if refused (60).
    public var recheckUnavailableLimitMinutes: Double = 60

    public init() {}

    /// Reads `gateway.browser_sessions.*` over the defaults.
    init(reading values: ConfigurationValues) throws(ConfigurationError) {
        if let value = try values.int("gateway.browser_sessions.idle_minutes", in: 1...(60 * 24 * 30)) { idleMinutes = Double(value) }
        if let value = try values.int("gateway.browser_sessions.max_hours", in: 1...(24 * 90)) { maximumHours = Double(value) }
        if let value = try values.int("gateway.browser_sessions.recheck_minutes", in: 1...(60 * 24)) { recheckMinutes = Double(value) }
        if let value = try values.int("gateway.browser_sessions.recheck_unavailable_limit_minutes", in: 1...(60 * 24 * 7)) {
            recheckUnavailableLimitMinutes = Double(value)
        }
        if idleMinutes > maximumHours * 60 {
            throw ConfigurationError(key: "gateway.browser_sessions.idle_minutes", "is longer than gateway.browser_sessions.max_hours; make it shorter")
        }
    }
}

extension GatewayConfiguration {
    /// Whether browsers reach the gateway over https (the public URL's scheme): the session
    /// cookie is then `Secure` and `__Host-`/`__Secure-` prefixed.
    public var servesBrowsersOverHTTPS: Bool { effectivePublicURL.lowercased().hasPrefix("https://") }
}
