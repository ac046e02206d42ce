import DataPlane
import Logging
import ProviderLogin
import Synchronization
import Traces
import TrustedIssuers

/// The person's token at the company's provider, the subject of an exchange.
public struct SubjectToken: Sendable {
    public let token: String
    /// The gateway session whose sign-in gave it: its end drops what was exchanged with it.
    public let sessionID: String

    public init(token: String, sessionID: String) {
        self.token = token
        self.sessionID = sessionID
    }
}

/// Where an exchange gets the person's provider token.
public protocol SubjectTokenSource: Sendable {
    /// The person's current access token at `issuer` (with at least `minimumLife` seconds left), from
    /// their newest live sign-in there; `nil` when they have none.
    func subjectToken(userID: String, issuer: String, minimumLife: Double, now: Double) async throws -> SubjectToken?
}

/// Gets tokens for upstream audiences from the company's provider for people, and keeps them.
///
/// The provider is the trusted issuer (with `login`) the route names; the gateway calls its token
/// endpoint as that login's client, with the person's access token from their sign-in as the
/// subject (RFC 8693 token exchange, or Entra's on-behalf-of). One exchange at a time a person and
/// target (requests that miss together wait for the one); a token due for renewal is still sent
/// while one exchange renews it in the background.
public final class TokenExchangeService: Sendable {
    public typealias Key = ExchangedTokenCache.Key

    let subjects: any SubjectTokenSource
    let directory: ProviderDirectory
    let trusted: TrustedIssuers?
    let tokenEndpoint: TokenEndpoint
    public let cache: ExchangedTokenCache
    let now: @Sendable () -> Double
    let logger: Logger
    /// The exchanges under way, with the cache's generation when each began: a request joins one
    /// only while no forget has come since (one that began before a logout may carry its token).
    private let inFlight = Mutex<[Key: (task: Task<String, any Error>, seen: UInt64)]>([:])

    /// A token the provider gives without `expires_in` is kept this long.
    public static let assumedLifetime: Double = 300

    public init(
        subjects: any SubjectTokenSource, directory: ProviderDirectory, trusted: TrustedIssuers?, tokenEndpoint: TokenEndpoint = TokenEndpoint(),
        cache: ExchangedTokenCache, now: @escaping @Sendable () -> Double, logger: Logger
    ) {
        self.subjects = subjects
        self.directory = directory
        self.trusted = trusted
        self.tokenEndpoint = tokenEndpoint
        self.cache = cache
        self.now = now
        self.logger = logger
    }

    /// The kept token for `key`, if any; one due for renewal starts its renewal off the request path.
    public func cachedToken(for key: Key) -> String? {
        switch cache.lookup(key, now: now()) {
        case .fresh(let token): return token
        case .renewing(let token):
            _ = exchangeOnce(key)
            return token
        case .missing: return nil
        }
    }

    /// A token for `key`: the kept one, else one exchange (shared with the requests that miss together).
    ///
    /// - Throws: `ExchangeError`; anything else is the store's failure.
    public func token(for key: Key) async throws -> String {
        if let token = cachedToken(for: key) { return token }
        return try await exchangeOnce(key).value
    }

    /// The exchange in flight for `key`, or a new one.
    private func exchangeOnce(_ key: Key) -> Task<String, any Error> {
        inFlight.withLock { running in
            let seen = cache.generation
            if let current = running[key], current.seen == seen { return current.task }
            // Shared by every request that asks meanwhile: its calls are no one request's spans.
            let task = Task { [self] in
                defer {
                    inFlight.withLock { running in
                        if running[key]?.seen == seen { running[key] = nil }
                    }
                }
                return try await CallSpans.$current.withValue(nil) { try await exchange(key, seen: seen) }
            }
            running[key] = (task, seen)
            return task
        }
    }

    private func exchange(_ key: Key, seen: UInt64) async throws -> String {
        let target = key.target
        guard let provider = directory.providers.first(where: { $0.issuer == target.issuer }) else {
            throw ExchangeError.unavailable("the provider is no longer configured for sign-in")
        }
        guard let endpoint = trusted?.endpoints(issuer: target.issuer)?.token else {
            throw ExchangeError.unavailable("the provider's discovery names no token endpoint now")
        }
        guard let subject = try await subjects.subjectToken(userID: key.userID, issuer: target.issuer, minimumLife: ExchangedTokenCache.sendMargin, now: now()) else {
            throw ExchangeError.requiresSignIn(target.issuer)
        }
        let answer: TokenEndpointAnswer
        do {
            switch target.form {
            case .rfc8693:
                answer = try await tokenEndpoint.tokenExchange(
                    subjectToken: subject.token, audience: target.audience, scopes: target.scopes, client: provider.tokenClient, endpoint: endpoint)
            case .entraOnBehalfOf:
                answer = try await tokenEndpoint.onBehalfOf(
                    assertion: subject.token, scopes: target.scopes.isEmpty ? [target.audience + "/.default"] : target.scopes,
                    client: provider.tokenClient, endpoint: endpoint)
            }
        } catch {
            switch error {
            case .refused(let reason):
                logger.notice(
                    "the provider refused a token exchange",
                    metadata: ["provider": "\(provider.name)", "audience": "\(target.audience)", "user_id": "\(key.userID)", "error": "\(reason)"])
                throw ExchangeError.refused(reason)
            case .unavailable(let why), .malformed(let why):
                logger.notice(
                    "the provider could not be asked for a token exchange",
                    metadata: ["provider": "\(provider.name)", "audience": "\(target.audience)", "why": "\(why)"])
                throw ExchangeError.unavailable(why)
            }
        }
        guard let token = answer.accessToken, !token.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) else {
            throw ExchangeError.unavailable("the provider's answer carries no usable access_token")
        }
        // RFC 8693 2.2.1: "N_A" when the token is not an OAuth access token; it is still sent as a bearer token.
        if let type = answer.tokenType, type.lowercased() != "bearer", type != "N_A" {
            let named = TokenEndpoint.isErrorCode(type) ? type : "non-standard"
            throw ExchangeError.unavailable("the provider gave a \(named) token, and the gateway sends bearer tokens only")
        }
        let now = now()
        cache.keep(
            token, for: key, sessionID: subject.sessionID, expiresAt: now + (answer.expiresIn ?? Self.assumedLifetime), now: now, seen: seen)
        return token
    }
}
