import Foundation
import JOSE
import Logging
import StateSurface
import TrustedIssuers

/// The relying party's side of a sign-in after its start: the provider's redirect back
/// (the callback), the browser's completion, a refresh through the provider, and the URL
/// that ends the provider's session.
///
/// Everything here is the flow's own work; the gateway's session, tokens and sockets stay
/// with the routes that call it.
public struct ProviderSignIn: Sendable {
    /// How long a login code may wait for its completion.
    public static let codeLifetime: Double = 60

    public let directory: ProviderDirectory
    public let trusted: TrustedIssuers?
    public let store: any LoginFlowRepository & ProviderSessionRepository
    public let vault: ProviderTokenVault
    public let tokenEndpoint: TokenEndpoint
    /// `{public_url}/api/auth/oidc/callback`, sent again with the code as RFC 6749 4.1.3 requires.
    public let redirectURI: String
    public let clock: any TokenClock
    public let logger: Logger

    public init(
        directory: ProviderDirectory, trusted: TrustedIssuers?, store: any LoginFlowRepository & ProviderSessionRepository, vault: ProviderTokenVault,
        tokenEndpoint: TokenEndpoint = TokenEndpoint(), redirectURI: String, clock: any TokenClock, logger: Logger
    ) {
        self.directory = directory
        self.trusted = trusted
        self.store = store
        self.vault = vault
        self.tokenEndpoint = tokenEndpoint
        self.redirectURI = redirectURI
        self.clock = clock
        self.logger = logger
    }

    /// A refusal with nowhere safe to send the browser (the route answers 400 JSON), or of a completion.
    public struct Refusal: Error, Sendable, Equatable {
        public let code: String
        public let message: String
    }

    /// Why a callback sent the browser back without a sign-in: the code in `#portcullis_error=`.
    public enum CallbackError: String, Error, Sendable {
        /// The user (or the provider's policy) declined.
        case accessDenied = "access_denied"
        /// The provider answered with another error, or with no code or ID token.
        case providerError = "provider_error"
        /// The `iss` of the answer is not the provider's (RFC 9207).
        case issuerMismatch = "issuer_mismatch"
        /// The token endpoint refused the code.
        case codeRefused = "code_refused"
        /// The ID token failed a check (signature, audience, nonce, times).
        case idTokenInvalid = "id_token_invalid"
        /// The ID token names a tenant its issuer may not produce.
        case tenantNotAllowed = "tenant_not_allowed"
        /// The provider or its keys cannot be reached now.
        case providerUnavailable = "provider_unavailable"
    }

    /// What a callback came to: the flow its `state` named, and a login code or why there is none.
    public struct CallbackResult: Sendable {
        public let flow: LoginFlowRecord
        public let outcome: Result<String, CallbackError>

        /// Where an app's sign-in sends the browser: the flow's `return_to` with `#portcullis_login=CODE`,
        /// or `#portcullis_error=CODE` when the provider or a check said no.
        public var location: String {
            let back = ProviderSignIn.withoutFragment(flow.returnTo)
            switch outcome {
            case .success(let code): return back + "#portcullis_login=" + code
            case .failure(let error): return back + "#portcullis_error=" + error.rawValue
            }
        }
    }

    /// Handles the provider's redirect for an app's sign-in (see `callbackResult`).
    ///
    /// - Returns: `CallbackResult.location`.
    public func callback(_ query: [String: String]) async throws -> String {
        try await callbackResult(query).location
    }

    /// Handles the provider's redirect: takes the flow its `state` names, then checks the answer,
    /// exchanges the code and verifies the ID token.
    ///
    /// - Throws: `Refusal` when `state` names no live flow (unknown, used or expired).
    public func callbackResult(_ query: [String: String]) async throws -> CallbackResult {
        guard let state = query["state"], (1...512).contains(state.utf8.count),
            let flow = try await store.takeLoginFlow(stateHash: try LoginStart.hash(state), now: clock.now())
        else {
            throw Refusal(code: "state_invalid", message: "this sign-in is unknown, was used already or has expired; start the sign-in again")
        }
        func failed(_ error: CallbackError, _ why: String) -> CallbackResult {
            logger.notice("provider sign-in failed", metadata: ["provider": "\(flow.provider)", "error": "\(error.rawValue)", "why": "\(why)"])
            return CallbackResult(flow: flow, outcome: .failure(error))
        }
        guard let provider = directory.provider(named: flow.provider) else {
            return failed(.providerUnavailable, "the provider is no longer configured")
        }
        if let error = query["error"] {
            return failed(error == "access_denied" ? .accessDenied : .providerError, "the provider answered an error")
        }
        guard let endpoints = trusted?.endpoints(issuer: provider.issuer) else {
            return failed(.providerUnavailable, "the provider's discovery names no endpoints now")
        }
        // RFC 9207: a provider that says it sends `iss` must send its own; one that does not may still send it.
        if let iss = query["iss"] {
            guard iss == provider.issuer else { return failed(.issuerMismatch, "the answer's iss is another issuer's") }
        } else if endpoints.issuerInAuthorizationResponse {
            return failed(.issuerMismatch, "the provider advertises iss in its answers and sent none")
        }
        guard let code = query["code"], (1...4096).contains(code.utf8.count) else {
            return failed(.providerError, "the answer carries no code")
        }
        let answer: TokenEndpointAnswer
        do {
            answer = try await tokenEndpoint.exchange(
                code: code, codeVerifier: flow.codeVerifier, redirectURI: redirectURI, provider: provider, endpoint: endpoints.token)
        } catch {
            switch error {
            case .refused(let reason): return failed(.codeRefused, "the token endpoint refused the code (\(reason))")
            case .unavailable(let why): return failed(.providerUnavailable, why)
            case .malformed(let why): return failed(.providerError, why)
            }
        }
        guard let idToken = answer.idToken else { return failed(.providerError, "the token endpoint returned no ID token") }
        let verified: VerifiedIDToken
        switch await trusted?.verifyIDToken(idToken, issuer: provider.issuer, clientID: provider.settings.clientID, nonce: flow.nonce) {
        case .verified(let token)?: verified = token
        case .refused(let error)?: return failed(.idTokenInvalid, "\(error.reason.rawValue): \(error.message)")
        case .unavailable(let why)?: return failed(.providerUnavailable, why)
        case .tenantNotAllowed(let why)?: return failed(.tenantNotAllowed, why)
        case nil: return failed(.providerUnavailable, "the provider is not trusted")
        }
        let loginCode = Base64URL.encode(try SecureRandom.bytes(32))
        let now = clock.now()
        let identity = ProviderIdentityRecord(
            provider: provider.name, issuer: verified.identity.issuer, subject: verified.identity.subject, tenantID: verified.identity.tenantID,
            providerSessionID: verified.providerSessionID, sealedIDToken: try vault.seal(idToken, kind: .idToken, sessionID: flow.sessionID),
            sealedRefreshToken: try answer.refreshToken.map { try vault.seal($0, kind: .refreshToken, sessionID: flow.sessionID) },
            sealedAccessToken: try answer.accessToken.map { try vault.seal($0, kind: .accessToken, sessionID: flow.sessionID) },
            accessTokenExpiresAt: answer.accessToken == nil ? nil : clock.now() + (answer.expiresIn ?? Self.assumedAccessTokenLifetime))
        try await store.insertLoginCode(
            LoginCodeRecord(
                codeHash: try LoginStart.hash(loginCode), sessionID: flow.sessionID, loginChallenge: flow.loginChallenge, provider: identity,
                createdAt: now, expiresAt: now + Self.codeLifetime))
        logger.info("provider sign-in confirmed", metadata: ["provider": "\(provider.name)"])
        return CallbackResult(flow: flow, outcome: .success(loginCode))
    }

    /// Takes a login code for its session, proved by the verifier the browser kept.
    ///
    /// The code is spent by any attempt, right or wrong: a code tried with another session or
    /// verifier cannot be tried again.
    public func complete(loginCode: String, sessionID: String, loginVerifier: String) async throws -> ProviderIdentityRecord {
        let invalid = Refusal(code: "login_code_invalid", message: "the login code is unknown, was used already or has expired; sign in again")
        guard loginCode.utf8.count == 43, Base64URL.isCanonical(loginCode.utf8),
            let record = try await store.takeLoginCode(codeHash: try LoginStart.hash(loginCode), now: clock.now())
        else { throw invalid }
        guard record.sessionID == sessionID else {
            throw Refusal(code: "login_code_invalid", message: "the login code was issued to another session; sign in again from this one")
        }
        guard (1...256).contains(loginVerifier.utf8.count), Scrypt.constantTimeEquals(Array(try LoginStart.hash(loginVerifier).utf8), Array(record.loginChallenge.utf8)) else {
            throw Refusal(code: "login_code_invalid", message: "the login_verifier does not match the login_challenge the sign-in started with; sign in again")
        }
        return record.provider
    }

    /// Why a refresh through the provider gave nothing.
    public enum RefreshOutcome: Error, Sendable, Equatable {
        /// The provider said no: its token endpoint answered a 4xx other than 429 (whatever the
        /// body, an empty one too), or returned an ID token for another user. The user is
        /// disabled, deleted or signed out there.
        case refused
        /// The provider cannot be asked now: unreachable, too slow, a 5xx, 429, an answer that is
        /// not a token response, or its keys out of reach to check a returned ID token.
        case unavailable
    }

    /// Uses the session's provider refresh token, when it has one.
    ///
    /// An ID token in the answer is verified (signature, `iss`, `aud`, times) and must name the
    /// sign-in's subject (OpenID Connect Core 12.2); one for another subject is a refusal.
    ///
    /// - Returns: the record with the provider's new tokens sealed (unchanged without a refresh
    ///   token), or the reason the provider gave none.
    public func refresh(_ session: ProviderSessionRecord) async -> Result<ProviderSessionRecord, RefreshOutcome> {
        guard let sealed = session.identity.sealedRefreshToken else { return .success(session) }
        guard let provider = directory.provider(named: session.identity.provider),
            let trusted, let endpoints = trusted.endpoints(issuer: provider.issuer)
        else { return .failure(.unavailable) }
        guard let refreshToken = vault.open(sealed, kind: .refreshToken, sessionID: session.sessionID) else {
            // Another key sealed it (keys/provider-tokens.key was replaced): nothing can vouch for the user now.
            logger.warning("a provider refresh token cannot be opened: keys/provider-tokens.key changed", metadata: ["session_id": "\(session.sessionID)"])
            return .failure(.refused)
        }
        let answer: TokenEndpointAnswer
        do {
            answer = try await tokenEndpoint.refresh(refreshToken, provider: provider, endpoint: endpoints.token)
        } catch {
            switch error {
            case .refused(let reason):
                logger.notice("the provider refused a refresh", metadata: ["provider": "\(provider.name)", "error": "\(reason)", "session_id": "\(session.sessionID)"])
                return .failure(.refused)
            case .unavailable(let why), .malformed(let why):
                logger.notice("the provider could not be asked for a refresh", metadata: ["provider": "\(provider.name)", "why": "\(why)", "session_id": "\(session.sessionID)"])
                return .failure(.unavailable)
            }
        }
        var next = session
        var keptIDToken = answer.idToken
        if let idToken = answer.idToken {
            switch await trusted.verifyIDToken(idToken, issuer: provider.issuer, clientID: provider.settings.clientID, nonce: nil) {
            case .verified(let token):
                guard token.identity.issuer == session.identity.issuer, token.identity.subject == session.identity.subject else {
                    logger.warning(
                        "the provider's refresh returned an ID token for another user; the session ends",
                        metadata: ["provider": "\(provider.name)", "session_id": "\(session.sessionID)"])
                    return .failure(.refused)
                }
            case .refused(let error):
                logger.warning(
                    "the provider's refresh returned an ID token that fails its checks; the session ends",
                    metadata: ["provider": "\(provider.name)", "error": "\(error.reason.rawValue)", "session_id": "\(session.sessionID)"])
                return .failure(.refused)
            case .tenantNotAllowed:
                return .failure(.refused)
            case .unavailable:
                // The provider said yes and rotated its refresh token, which must be kept; the ID
                // token that could not be checked is not (the sign-in's stays).
                keptIDToken = nil
            }
        }
        do {
            if let rotated = answer.refreshToken {
                next.identity.sealedRefreshToken = try vault.seal(rotated, kind: .refreshToken, sessionID: session.sessionID)
            }
            if let keptIDToken { next.identity.sealedIDToken = try vault.seal(keptIDToken, kind: .idToken, sessionID: session.sessionID) }
            // The new access token replaces the sign-in's (a token exchange's subject is always the latest).
            if let accessToken = answer.accessToken {
                next.identity.sealedAccessToken = try vault.seal(accessToken, kind: .accessToken, sessionID: session.sessionID)
                next.identity.accessTokenExpiresAt = clock.now() + (answer.expiresIn ?? Self.assumedAccessTokenLifetime)
            }
        } catch {
            return .failure(.unavailable)
        }
        return .success(next)
    }

    /// How long a provider's access token is taken to live when its answer has no `expires_in`: a
    /// token exchange renews it after that rather than present it until the provider refuses it.
    public static let assumedAccessTokenLifetime: Double = 300

    /// The provider's access token of `session`, with when it expires (`nil`: the provider did not
    /// say): the subject of a token exchange. `nil` when none is kept, or another key sealed it.
    public func accessToken(of session: ProviderSessionRecord) -> (token: String, expiresAt: Double?)? {
        guard let sealed = session.identity.sealedAccessToken,
            let token = vault.open(sealed, kind: .accessToken, sessionID: session.sessionID)
        else { return nil }
        return (token, session.identity.accessTokenExpiresAt)
    }

    /// The provider's end-session URL for a session (OpenID Connect RP-Initiated Logout 1.0):
    /// `id_token_hint`, `client_id` and `post_logout_redirect_uri`; `nil` when the provider has no end-session endpoint.
    public func endSessionURL(_ session: ProviderSessionRecord, postLogoutRedirectURI: String) -> String? {
        guard let provider = directory.provider(named: session.identity.provider),
            let endpoint = trusted?.endpoints(issuer: provider.issuer)?.endSession
        else { return nil }
        var query: [(String, String)] = []
        if let idToken = vault.open(session.identity.sealedIDToken, kind: .idToken, sessionID: session.sessionID) {
            query.append(("id_token_hint", idToken))
        }
        query += [("client_id", provider.settings.clientID), ("post_logout_redirect_uri", postLogoutRedirectURI)]
        let separator = endpoint.contains("?") ? "&" : "?"
        return endpoint + separator + query.map { FormEncoding.encode($0.0) + "=" + FormEncoding.encode($0.1) }.joined(separator: "&")
    }

    public static func withoutFragment(_ url: String) -> String {
        url.firstIndex(of: "#").map { String(url[..<$0]) } ?? url
    }
}
