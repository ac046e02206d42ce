import JOSE
import StateSurface
import TrustedIssuers

/// The start of a sign-in through a provider: the flow to keep and the authorization URL
/// the browser is sent to (OpenID Connect Core 3.1.2.1, PKCE S256 always, RFC 7636).
///
/// Everything the provider's answer is later checked against is made here from the CSPRNG
/// and kept in the State Surface (`LoginFlowRecord`): `state` (only its hash is kept), the
/// `nonce` the ID token must carry, and the PKCE verifier. The session id never enters the URL.
public struct LoginStart: Sendable {
    /// How long a started sign-in may take to come back.
    public static let lifetime: Double = 600

    /// The URL the browser navigates to.
    public let authorizationURL: String
    /// The flow to store before answering (its `state` appears in the URL only as sent).
    public let flow: LoginFlowRecord

    /// Why a start is refused: a stable code and one sentence (the route answers 400).
    public struct Refusal: Error, Sendable, Equatable {
        public let code: String
        public let message: String
    }

    /// Makes a sign-in's flow and URL.
    ///
    /// - Parameters:
    ///   - returnTo: where the browser goes back to; its origin must be one of `returnOrigins`.
    ///   - loginChallenge: the base64url SHA-256 (43 characters) of a verifier the browser keeps.
    /// - Throws: `Refusal` for a `return_to` or `login_challenge` that cannot be used.
    public init(
        provider: ProviderDirectory.Provider, endpoints: ProviderEndpoints, redirectURI: String, sessionID: String, returnTo: String,
        loginChallenge: String, returnOrigins: [String]?, now: Double
    ) throws {
        // `nil` origins: a browser flow's `rd`, checked by the caller.
        if let returnOrigins, !(ReturnTarget.origin(of: returnTo).map(returnOrigins.contains) ?? false) {
            throw Refusal(
                code: "invalid_request",
                message: "return_to must be an http(s) URL on an origin in gateway.login_return_origins (\(returnOrigins.joined(separator: ", ")))")
        }
        guard loginChallenge.utf8.count == 43, Base64URL.isCanonical(loginChallenge.utf8), Base64URL.decode(loginChallenge)?.count == 32 else {
            throw Refusal(code: "invalid_request", message: "login_challenge must be the base64url SHA-256 (43 characters) of a verifier the browser keeps")
        }
        let state = Base64URL.encode(try SecureRandom.bytes(32))
        let nonce = Base64URL.encode(try SecureRandom.bytes(32))
        // 43 characters of base64url: RFC 7636's verifier alphabet, 256 bits.
        let verifier = Base64URL.encode(try SecureRandom.bytes(32))
        let challenge = try Digest.sha256Base64URL(verifier)
        flow = LoginFlowRecord(
            stateHash: try Self.hash(state), provider: provider.name, sessionID: sessionID, nonce: nonce, codeVerifier: verifier,
            returnTo: returnTo, loginChallenge: loginChallenge, createdAt: now, expiresAt: now + Self.lifetime)
        let query: [(String, String)] = [
            ("response_type", "code"), ("client_id", provider.settings.clientID), ("redirect_uri", redirectURI),
            ("scope", provider.settings.scopes.joined(separator: " ")), ("state", state), ("nonce", nonce),
            ("code_challenge", challenge), ("code_challenge_method", "S256"),
        ]
        let separator = endpoints.authorization.contains("?") ? "&" : "?"
        authorizationURL = endpoints.authorization + separator + query.map { FormEncoding.encode($0.0) + "=" + FormEncoding.encode($0.1) }.joined(separator: "&")
    }

    /// What `return_to` begins with for a browser sign-in (`/.portcullis/sign_in`): the callback
    /// then completes the sign-in itself and sets the session cookie, and the rest is `rd`.
    public static let browserReturnPrefix = "portcullis-browser:"

    /// Makes a browser sign-in's flow and URL: `rd` is checked already (`SignInRedirect`), and
    /// `loginChallenge` is the hash of the flow cookie's value.
    public init(provider: ProviderDirectory.Provider, endpoints: ProviderEndpoints, redirectURI: String, sessionID: String, browserReturn rd: SignInRedirect,
        loginChallenge: String, now: Double) throws {
        try self.init(
            provider: provider, endpoints: endpoints, redirectURI: redirectURI, sessionID: sessionID, returnTo: Self.browserReturnPrefix + rd.target,
            loginChallenge: loginChallenge, returnOrigins: nil, now: now)
    }

    /// How a `state` is kept: SHA-256, base64url.
    public static func hash(_ state: String) throws -> String {
        try Digest.sha256Base64URL(state)
    }
}
