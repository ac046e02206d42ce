import HTTPTypes
import Hummingbird
import JOSE
import Logging
import Runtime
import SecurityGuard
import StateSurface
import TrafficCop

/// Everything the public routes use, built once per gateway.
public struct GatewayServices: Sendable {
    public let configuration: GatewayConfiguration
    public let state: any SessionRepository & UserRepository & CredentialRepository
    public let keys: LiveKeyRing
    public let accounts: AccountService
    public let refreshTokens: RefreshTokenService
    public let authenticator: AccessTokenAuthenticator
    /// Revoked token ids, mirrored in memory (synced every second by `PortcullisServer`).
    public let revocations: RevocationList
    public let issuer: AccessTokenIssuer
    /// The Runtime client; its HTTP client must be shut down (`PortcullisServer` does it).
    public let runtime: RuntimeClient
    public let validator: SessionIntentValidator
    public let rateLimits: AdmissionRateLimits
    public let clientAddresses: ClientAddressResolver
    public let metrics: GatewayMetrics
    /// Open agent sockets by session (this gateway's).
    public let sockets = SocketRegistry()
    public let clock: any TokenClock
    public let logger: Logger

    public init(
        configuration: GatewayConfiguration, state: any SessionRepository & UserRepository & CredentialRepository, keys: LiveKeyRing,
        runtimeBaseURL: String?, metrics: GatewayMetrics, passwordHasher: PasswordHasher = PasswordHasher(),
        clock: any TokenClock = SystemClock(), logger: Logger
    ) {
        self.configuration = configuration
        self.state = state
        self.keys = keys
        self.clock = clock
        self.logger = logger
        self.metrics = metrics
        accounts = AccountService(users: state, hasher: passwordHasher, clock: clock)
        refreshTokens = RefreshTokenService(credentials: state, lifetime: configuration.refreshTokenLifetime, clock: clock)
        let policy = AccessTokenPolicy.gateway(
            issuer: configuration.issuer, audience: configuration.audience, leeway: configuration.leeway,
            maximumLifetime: configuration.maximumTokenLifetime)
        revocations = RevocationList(credentials: state, clock: clock)
        authenticator = AccessTokenAuthenticator(
            verifier: AccessTokenVerifier(keys: keys, policy: policy, clock: clock), revocations: revocations, cache: VerifiedTokenCache())
        issuer = AccessTokenIssuer(
            keys: keys, issuer: configuration.issuer, audience: configuration.audience, lifetime: configuration.accessTokenLifetime, clock: clock)
        runtime = RuntimeClient(
            baseURL: runtimeBaseURL ?? configuration.runtimeURL, audience: configuration.runtimeName,
            signer: GatewayAssertionSigner(keys: keys, issuer: configuration.issuer, clock: clock), timeout: configuration.runtimeTimeout,
            http: makeUpstreamHTTPClient())
        validator = SessionIntentValidator(contract: configuration.contract)
        let started = ContinuousClock.now
        rateLimits = AdmissionRateLimits(settings: configuration.rateLimits) {
            let elapsed = ContinuousClock.now - started
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        clientAddresses = ClientAddressResolver(trustedProxies: configuration.trustedProxies)
    }

    // MARK: Helpers the routes share

    /// The client's address for rate limits (peer, or `X-Forwarded-For` from a trusted proxy).
    func clientAddress(_ request: Request, _ context: GatewayRequestContext) -> String {
        clientAddresses.clientAddress(peer: context.peerAddress, forwardedFor: request.headers[values: HTTPField.Name("X-Forwarded-For")!])
    }

    /// Takes a token from `rule`'s bucket for `key`, or throws 429.
    func limit(_ rule: AdmissionRateLimits.Rule, key: String) throws {
        let decision = rateLimits.admit(rule, key: key)
        guard decision.allowed else {
            metrics.rateLimited(rule: rule.rawValue)
            throw GatewayError.rateLimited(retryAfter: decision.retryAfter)
        }
    }

    /// The caller a required Bearer token proves.
    func requireCaller(_ request: Request) async throws -> AuthenticatedCaller {
        guard let caller = try await optionalCaller(request) else {
            metrics.tokenRejected(reason: "missing")
            throw GatewayError(AuthenticationFailure.missing)
        }
        return caller
    }

    /// The caller if a Bearer token was sent (it must then be valid); `nil` if none was.
    func optionalCaller(_ request: Request) async throws -> AuthenticatedCaller? {
        do {
            guard let token = try AccessTokenAuthenticator.bearerToken(fromAuthorization: request.headers[.authorization]) else { return nil }
            return try await authenticator.authenticate(token)
        } catch let failure as AuthenticationFailure {
            switch failure {
            case .invalid(let error): metrics.tokenRejected(reason: error.reason.rawValue)
            case .missing: metrics.tokenRejected(reason: "missing")
            case .revoked: metrics.tokenRejected(reason: "revoked")
            case .sessionIDGiven: metrics.tokenRejected(reason: "session_id_given")
            case .refreshTokenGiven: metrics.tokenRejected(reason: "refresh_token_given")
            }
            throw GatewayError(failure)
        }
    }

    /// Admits `intent` through the Traffic Cop, or throws its refusal as an HTTP error.
    func admit(_ intent: SessionIntent, facts: AdmissionFacts = AdmissionFacts()) throws -> AdmittedSessionIntent {
        do {
            return try validator.admit(intent, facts: facts)
        } catch {
            throw GatewayError(error)
        }
    }

    /// A session id from the path or body, checked for form (naming a token mix-up).
    static func checkedSessionID(_ value: String?) throws -> String {
        if let problem = SessionID.problem(with: value) {
            throw GatewayError(.badRequest, problem == .missing ? "session_missing" : "session_malformed", problem.message)
        }
        return value!
    }

    /// The request body as a strict JSON object (empty body: empty object); 413 beyond the limit.
    func body(_ request: Request) async throws -> JSONObject {
        do {
            return try await request.jsonObject(limit: configuration.maximumBodyBytes)
        } catch .tooLarge(let limit) {
            throw GatewayError(.contentTooLarge, "payload_too_large", "the request body is limited to \(limit) bytes")
        } catch .invalid(let message) {
            throw GatewayError.invalidRequest("the body must be a JSON object: \(message)")
        }
    }

    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok, noStore: Bool = false) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if noStore {
            headers[.cacheControl] = "no-store"
            headers[HTTPField.Name("Pragma")!] = "no-cache"
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(value))))
    }
}

extension JSONObject {
    /// A required string member, or 400 naming it.
    func requiredString(_ name: String) throws -> String {
        guard let value = self[name] else { throw GatewayError.invalidRequest("\(name) is required") }
        guard let text = value.stringValue, !text.isEmpty else { throw GatewayError.invalidRequest("\(name) must be a non-empty string") }
        return text
    }

    /// An optional string member; 400 if present with another type.
    func optionalString(_ name: String) throws -> String? {
        guard let value = self[name], value != .null else { return nil }
        guard let text = value.stringValue else { throw GatewayError.invalidRequest("\(name) must be a string") }
        return text
    }
}
