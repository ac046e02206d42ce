import JOSE
import Synchronization

/// One trusted issuer's keys as held now, how they are verified against, and
/// how they are fetched again.
///
/// Fetches are shared: while one runs, every caller that needs one awaits it.
/// An unknown `kid` starts at most one fetch per `refresh_cooldown_seconds`.
/// The last good keys keep working for `max_stale_seconds` after the last
/// successful fetch; past that (or before any) the issuer is unavailable.
final class IssuerKeys: Sendable {
    let issuer: TrustedIssuer
    let policy: AccessTokenPolicy
    let clock: any TokenClock
    private let fetcher: KeyFetcher?
    private let state: Mutex<State>

    struct State {
        var keys: [String: JWSKey] = [:]
        var fetchedAt: Double?
        var refreshAt: Double = 0
        var lastError: String?
        var failures = 0
        var missFetchAt: Double?
        var inFlight: Task<Void, Never>?
        var completedFetches = 0
        /// The fetch (by `completedFetches` when it ran) whose slowness was already reported.
        var slowFetchReported: Int?
        var source: String
        var skipped: [String] = []
        /// The login endpoints of the last discovery document (or why it names none).
        var endpoints: Result<ProviderEndpoints, KeyFetchError>?
    }

    /// - Parameter secret: the HMAC keys of a `secret_file` issuer (fixed; nothing is fetched).
    init(issuer: TrustedIssuer, leeway: Double, clock: any TokenClock, fetcher: KeyFetcher?, secret: [JWSKey]?) {
        self.issuer = issuer
        self.clock = clock
        self.fetcher = fetcher
        // An ID token or a logout token is never an access token, whatever its aud; where the issuer
        // says its access tokens are typed (RFC 9068 `at+jwt`), no other typ passes.
        var policy = AccessTokenPolicy(
            issuer: issuer.issuer, audience: nil, leeway: leeway, maximumLifetime: issuer.maximumTokenLifetime,
            acceptedTypes: issuer.requiresAccessTokenType ? ["at+jwt", "application/at+jwt"] : ["at+jwt", "application/at+jwt", "JWT"],
            requiredClaims: Array(Set(["iss", "aud", "exp", issuer.subjectClaim] + Self.tenantClaim(issuer))).sorted(),
            forbiddenClaims: AccessTokenPolicy.otherTokenClaims.filter { !(issuer.accessTokensCarryNonce && $0 == "nonce") })
        policy.audiences = issuer.audiences
        policy.requiresType = issuer.requiresAccessTokenType
        policy.requiresKeyID = false
        self.policy = policy
        var initial = State(source: "secret_file")
        switch issuer.keySource {
        case .jwks(let url): initial.source = url
        case .discovery: initial.source = issuer.discoveryURL
        case .secret: break
        }
        if let secret {
            initial.keys = Dictionary(uniqueKeysWithValues: secret.map { ($0.kid, $0) })
            initial.fetchedAt = clock.now()
            initial.refreshAt = .infinity
        }
        state = Mutex(initial)
    }

    /// Takes over the keys `previous` fetched, when both fetch from the same place (a reload that
    /// changed another setting of the issuer): its users are not refused while the keys are fetched again.
    func adoptKeys(of previous: IssuerKeys) {
        guard !usesSecret, previous.issuer.keySource == issuer.keySource, previous.issuer.caFile == issuer.caFile else { return }
        let held = previous.state.withLock { $0 }
        state.withLock { state in
            state.keys = held.keys
            state.fetchedAt = held.fetchedAt
            state.refreshAt = held.refreshAt
            state.lastError = held.lastError
            state.failures = held.failures
            state.skipped = held.skipped
            state.endpoints = held.endpoints
        }
    }

    private static func tenantClaim(_ issuer: TrustedIssuer) -> [String] {
        if case .claim(let name, _) = issuer.tenant { return [name] }
        return []
    }

    private var usesSecret: Bool {
        if case .secret = issuer.keySource { return true }
        return false
    }

    // MARK: Verification

    /// The rules of an ID token this issuer returns to the gateway's sign-in: `aud` is the
    /// gateway's `client_id` (not the access tokens' audiences), `iat` required, any `typ`.
    func idTokenPolicy(clientID: String) -> AccessTokenPolicy {
        var idPolicy = policy
        idPolicy.audiences = [clientID]
        idPolicy.requiredClaims = Array(Set(policy.requiredClaims + ["iat"])).sorted()
        idPolicy.acceptedTypes = ["JWT"]
        idPolicy.requiresType = false
        idPolicy.forbiddenClaims = ["events"]
        return idPolicy
    }

    /// The rules of an Identity Assertion JWT Authorization Grant (draft-ietf-oauth-identity-assertion-authz-grant,
    /// section 3): `typ` `oauth-id-jag+jwt`, required; `aud` the gateway's issuer (with or without a
    /// trailing slash); `iss`, `sub`, `aud`, `exp`, `iat`, `jti` and `client_id` required.
    func identityAssertionGrantPolicy(audience: String) -> AccessTokenPolicy {
        var grantPolicy = policy
        let bare = audience.hasSuffix("/") ? String(audience.dropLast()) : audience
        grantPolicy.audiences = [bare, bare + "/"]
        grantPolicy.requiredClaims = ["iss", "sub", "aud", "exp", "iat", "jti", "client_id"]
        grantPolicy.forbiddenClaims = ["nonce", "events"]
        grantPolicy.acceptedTypes = ["oauth-id-jag+jwt"]
        grantPolicy.requiresType = true
        return grantPolicy
    }

    /// The rules of a back-channel logout token (OpenID Connect Back-Channel Logout 1.0, 2.4 and
    /// 2.6): `aud` the gateway's `client_id`; `iss`, `iat` and `jti` required, `exp` when present;
    /// no `nonce`; `typ` `logout+jwt`, `JWT` or none, as providers in the field send.
    func logoutTokenPolicy(clientID: String) -> AccessTokenPolicy {
        var logoutPolicy = policy
        logoutPolicy.audiences = [clientID]
        logoutPolicy.requiredClaims = ["iss", "aud", "iat", "jti"]
        logoutPolicy.forbiddenClaims = ["nonce", "at_hash", "c_hash"]
        logoutPolicy.acceptedTypes = ["logout+jwt", "application/logout+jwt", "JWT"]
        logoutPolicy.requiresType = false
        return logoutPolicy
    }

    /// Checks a parsed token of this issuer with the keys held now, by `policy` (the access
    /// tokens' unless given); never suspends.
    ///
    /// - Parameter identity: whether the token must name a user and a tenant; a logout token
    ///   may name only the provider's session (its identity then has an empty subject and tenant).
    func verify(_ jws: JWSCompact, claims: JSONObject, policy given: AccessTokenPolicy? = nil, identity: Bool = true) -> ExternalVerification {
        let policy = given ?? self.policy
        let now = clock.now()
        let (keys, fetchedAt, missFetchAt, fetching) = state.withLock { ($0.keys, $0.fetchedAt, $0.missFetchAt, $0.inFlight != nil) }
        // The public answer names the issuer only; why its keys cannot be had (a URL, an error) goes to
        // the log and the admin listener's /readyz, never to whoever sent a token naming it.
        guard let fetchedAt else {
            return .unavailable("the keys of \(issuer.issuer) have not been fetched yet")
        }
        guard usesSecret || now - fetchedAt <= issuer.maximumStaleness else {
            return .unavailable("the keys of \(issuer.issuer) could not be fetched for \(AccessTokenPolicy.describe(now - fetchedAt))")
        }
        do throws(TokenValidationError) {
            let algorithm = try jws.algorithm()
            let kid = try policy.checkHeader(jws.header)
            let key: JWSKey
            if usesSecret {
                // One shared secret per algorithm: the kid, if any, names nothing here.
                guard let secret = keys.values.first(where: { $0.algorithm == algorithm }) else {
                    throw TokenValidationError(.algorithmMismatch, "\(issuer.issuer) signs with \(policy.acceptedAlgorithmsDescription(keys)), not \(algorithm.rawValue)")
                }
                key = secret
            } else if kid.isEmpty {
                guard keys.count == 1, let only = keys.values.first else {
                    throw TokenValidationError(.unknownKey, "the header has no \"kid\" and \(issuer.issuer) publishes several keys")
                }
                key = only
            } else if let known = keys[kid] {
                key = known
            } else {
                let mayFetch = fetching || missFetchAt.map { now - $0 >= issuer.refreshCooldown } ?? true
                if mayFetch { return .keysMayHaveChanged }
                throw TokenValidationError(.unknownKey, "\(issuer.issuer) publishes no key with the kid \"\(JSONValue.clip(kid))\"")
            }
            try jws.verifySignature(with: key)
            if let problem = policy.problems(in: claims, at: now, stopAtFirst: true).first { throw problem }
            guard identity else {
                let verified = VerifiedAccessToken(header: jws.header, claims: claims, keyID: key.kid, algorithm: algorithm)
                return .verified(ExternalIdentity(issuer: issuer.issuer, subject: claims["sub"]?.stringValue ?? "", tenantID: ""), verified)
            }
            guard let subject = claims[issuer.subjectClaim]?.stringValue, !subject.isEmpty else {
                throw TokenValidationError(.invalidClaim, "the claim \"\(issuer.subjectClaim)\" must be a non-empty string")
            }
            let tenantID: String
            switch issuer.tenant {
            case .fixed(let fixed): tenantID = fixed
            case .claim(let name, let tenants):
                guard let value = claims[name]?.stringValue, Self.isTenantName(value) else {
                    throw TokenValidationError(.invalidClaim, "the claim \"\(name)\" must name a tenant (1-64 letters, digits or . _ @ + -)")
                }
                guard tenants.contains(value) else {
                    return .tenantNotAllowed("\(issuer.issuer) may not name the tenant \"\(value)\" (its tenants are listed in trust.issuers)")
                }
                tenantID = value
            }
            // The operator's word for this issuer (emails_verified): an address it sends is one it verified.
            let claims = issuer.vouchingForEmail(claims)
            let verified = VerifiedAccessToken(header: jws.header, claims: claims, keyID: key.kid, algorithm: algorithm)
            return .verified(ExternalIdentity(issuer: issuer.issuer, subject: subject, tenantID: tenantID), verified)
        } catch {
            return .refused(error)
        }
    }

    static func isTenantName(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count) && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            case UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "@"), UInt8(ascii: "+"), UInt8(ascii: "-"): true
            default: false
            }
        }
    }

    // MARK: Fetching

    /// Fetches now unless a fetch is running (then waits for it); for start-up and the background refresh.
    func refresh() async {
        if let (task, _) = startOrJoinFetch(forUnknownKey: false) { await task.value }
    }

    /// How long a request with an unknown kid waits for the fetch it joined, discovery, JWKS and
    /// redirects together; past it the request is answered (503) and the fetch goes on alone.
    static let unknownKeyWait: Duration = .seconds(3)

    /// For an unknown kid: joins a running fetch, or starts one if the cooldown allows, and waits
    /// for it, at most `unknownKeyWait`. Only requests that arrive while that one fetch runs wait;
    /// the cooldown answers the rest at once.
    ///
    /// - Returns: `false` when the wait ended before the fetch did.
    func refreshForUnknownKey(within wait: Duration = unknownKeyWait) async -> Bool {
        guard let (task, _) = startOrJoinFetch(forUnknownKey: true) else { return true }
        // The first of the fetch's end and the deadline resumes the request; the other finds it resumed.
        let outcome = FirstOutcome()
        return await withCheckedContinuation { continuation in
            outcome.install(continuation)
            let deadline = Task {
                try? await Task.sleep(for: wait)
                outcome.resume(with: false)
            }
            Task {
                await task.value
                outcome.resume(with: true)
                deadline.cancel()  // the fetch came first: nothing left for the deadline to do
            }
        }
    }

    /// The running fetch, or a new one (for an unknown kid only once per cooldown), and how many
    /// fetches had completed before it; `nil` when none may start.
    private func startOrJoinFetch(forUnknownKey: Bool) -> (Task<Void, Never>, Int)? {
        guard let fetcher else { return nil }
        let now = clock.now()
        return state.withLock { state -> (Task<Void, Never>, Int)? in
            if let running = state.inFlight { return (running, state.completedFetches) }
            if forUnknownKey {
                if let last = state.missFetchAt, now - last < issuer.refreshCooldown { return nil }
                state.missFetchAt = now
            }
            let issuer = self.issuer
            let task = Task { [self] in
                let result: Result<FetchedKeys, KeyFetchError>
                do throws(KeyFetchError) {
                    result = .success(try await fetcher.fetchKeys(for: issuer))
                } catch {
                    result = .failure(error)
                }
                self.record(result)
            }
            state.inFlight = task
            return (task, state.completedFetches)
        }
    }

    /// Whether the caller is the first to find the running fetch too slow (so it is reported once
    /// per fetch, not once per request that waited for it).
    func isFirstToReportSlowFetch() -> Bool {
        state.withLock { state in
            guard state.slowFetchReported != state.completedFetches else { return false }
            state.slowFetchReported = state.completedFetches
            return true
        }
    }

    private func record(_ result: Result<FetchedKeys, KeyFetchError>) {
        let now = clock.now()
        state.withLock { state in
            state.inFlight = nil
            state.completedFetches += 1
            switch result {
            case .success(let fetched):
                state.keys = fetched.keys
                state.skipped = fetched.skipped
                state.source = fetched.jwksURL
                state.endpoints = fetched.endpoints
                state.fetchedAt = now
                state.lastError = nil
                state.failures = 0
                // Before the max-age ends, and well before the keys would turn stale.
                state.refreshAt = now + min(fetched.maximumAge * 0.9, issuer.maximumStaleness / 2)
            case .failure(let error):
                state.lastError = error.message
                state.failures += 1
                // Retry soon, backing off to a minute (sooner when the keys turn stale sooner); known keys keep working meanwhile.
                state.refreshAt = now + min(60, Double(1 << min(state.failures, 6)), max(1, issuer.maximumStaleness / 4))
            }
        }
    }

    /// The login endpoints as the last discovery document named them; `nil` before a fetch or when it named none.
    var endpoints: ProviderEndpoints? {
        state.withLock { state in
            guard case .success(let endpoints)? = state.endpoints else { return nil }
            return endpoints
        }
    }

    /// Whether the background refresh should fetch now.
    func isDue(at now: Double) -> Bool {
        fetcher != nil && state.withLock { $0.inFlight == nil && now >= $0.refreshAt }
    }

    var status: IssuerStatus {
        let now = clock.now()
        return state.withLock { state in
            IssuerStatus(
                issuer: issuer.issuer, source: state.source,
                keys: state.keys.values.sorted { $0.kid < $1.kid }.map { ($0.kid, $0.algorithm.rawValue) },
                age: state.fetchedAt.map { now - $0 }, lastError: state.lastError,
                usable: state.fetchedAt.map { usesSecret || now - $0 <= issuer.maximumStaleness } ?? false, skipped: state.skipped,
                endpoints: state.endpoints)
        }
    }
}

extension AccessTokenPolicy {
    fileprivate func acceptedAlgorithmsDescription(_ keys: [String: JWSKey]) -> String {
        Set(keys.values.map(\.algorithm.rawValue)).sorted().joined(separator: ", ")
    }
}

/// A continuation resumed once, by whichever of its racers comes first.
private final class FirstOutcome: Sendable {
    private let continuation = Mutex<CheckedContinuation<Bool, Never>?>(nil)

    func install(_ continuation: CheckedContinuation<Bool, Never>) {
        self.continuation.withLock { $0 = continuation }
    }

    func resume(with value: Bool) {
        continuation.withLock { pending in
            pending?.resume(returning: value)
            pending = nil
        }
    }
}
