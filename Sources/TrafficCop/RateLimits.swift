/// One rate limit: a sustained rate and a burst.
public struct RateLimit: Sendable, Equatable {
    /// Requests allowed per minute, sustained.
    public var perMinute: Double
    /// Requests allowed at once after a quiet spell.
    public var burst: Int

    public init(perMinute: Double, burst: Int) {
        self.perMinute = perMinute
        self.burst = burst
    }
}

/// The edge's rate limits, one token-bucket limiter per rule.
public struct AdmissionRateLimits: Sendable {
    public enum Rule: String, Sendable, CaseIterable {
        /// `POST /api/session/create-anonymous`, keyed by client address.
        case anonymousSessionPerClient = "anonymous_session_per_client"
        /// `POST /api/auth/login`, keyed by client address.
        case loginPerClient = "login_per_client"
        /// `POST /api/auth/login`, keyed by tenant and username.
        case loginPerUsername = "login_per_username"
        /// `POST /api/session/create`, keyed by user.
        case sessionCreatePerUser = "session_create_per_user"
        /// `POST /api/intent` and `GET /api/runtime/executions/{id}`, keyed by user.
        case intentPerUser = "intent_per_user"
        /// `POST /api/auth/oidc/backchannel-logout`, keyed by client address (the provider's, as a rule).
        case backChannelLogoutPerClient = "backchannel_logout_per_client"
        /// A session cookie this instance has not met, read from the store, keyed by client address.
        case sessionCookieLookupPerClient = "session_cookie_lookup_per_client"
        /// The authorization server's registration, token and revocation endpoints, keyed by client address.
        case oauthPerClient = "oauth_per_client"
        /// `POST /api/auth/oauth/register`, keyed by client address, on top of `oauthPerClient`.
        case registrationPerClient = "oauth_registration_per_client"
    }

    public struct Settings: Sendable, Equatable {
        public var anonymousSessionPerClient = RateLimit(perMinute: 60, burst: 30)
        public var loginPerClient = RateLimit(perMinute: 30, burst: 10)
        public var loginPerUsername = RateLimit(perMinute: 10, burst: 5)
        public var sessionCreatePerUser = RateLimit(perMinute: 30, burst: 10)
        public var intentPerUser = RateLimit(perMinute: 600, burst: 100)
        /// Generous: a provider ending many sessions at once sends a logout token for each.
        public var backChannelLogoutPerClient = RateLimit(perMinute: 600, burst: 100)
        /// Generous: a browser's cookie is read once per instance, then answered from memory; an
        /// office behind one address signs in again after a restart.
        public var sessionCookieLookupPerClient = RateLimit(perMinute: 300, burst: 100)
        /// An agent refreshes every few minutes; a registration is rare. Bounds guessing and registrations.
        public var oauthPerClient = RateLimit(perMinute: 120, burst: 30)
        /// A client registers once per install: a burst for a developer trying things, then few.
        public var registrationPerClient = RateLimit(perMinute: 6, burst: 20)

        public init() {}

        public subscript(rule: Rule) -> RateLimit {
            get {
                switch rule {
                case .anonymousSessionPerClient: anonymousSessionPerClient
                case .loginPerClient: loginPerClient
                case .loginPerUsername: loginPerUsername
                case .sessionCreatePerUser: sessionCreatePerUser
                case .intentPerUser: intentPerUser
                case .backChannelLogoutPerClient: backChannelLogoutPerClient
                case .sessionCookieLookupPerClient: sessionCookieLookupPerClient
                case .oauthPerClient: oauthPerClient
                case .registrationPerClient: registrationPerClient
                }
            }
            set {
                switch rule {
                case .anonymousSessionPerClient: anonymousSessionPerClient = newValue
                case .loginPerClient: loginPerClient = newValue
                case .loginPerUsername: loginPerUsername = newValue
                case .sessionCreatePerUser: sessionCreatePerUser = newValue
                case .intentPerUser: intentPerUser = newValue
                case .backChannelLogoutPerClient: backChannelLogoutPerClient = newValue
                case .sessionCookieLookupPerClient: sessionCookieLookupPerClient = newValue
                case .oauthPerClient: oauthPerClient = newValue
                case .registrationPerClient: registrationPerClient = newValue
                }
            }
        }
    }

    let limiters: [Rule: TokenBucketLimiter]

    /// - Parameter clock: seconds from a fixed origin (monotonic in production).
    public init(settings: Settings, clock: @escaping @Sendable () -> Double) {
        var limiters: [Rule: TokenBucketLimiter] = [:]
        for rule in Rule.allCases {
            let limit = settings[rule]
            limiters[rule] = TokenBucketLimiter(ratePerSecond: limit.perMinute / 60, burst: limit.burst, clock: clock)
        }
        self.limiters = limiters
    }

    /// Puts `settings` in force (a configuration reload); every key's bucket is kept.
    public func apply(_ settings: Settings) {
        for rule in Rule.allCases {
            let limit = settings[rule]
            limiters[rule]?.reconfigure(ratePerSecond: limit.perMinute / 60, burst: limit.burst)
        }
    }

    /// Takes one request from `rule`'s bucket for `key`.
    public func admit(_ rule: Rule, key: String) -> TokenBucketLimiter.Decision {
        limiters[rule]!.admit(key)
    }
}
