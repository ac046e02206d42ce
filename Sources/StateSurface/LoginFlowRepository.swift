/// One sign-in through a provider between its start and its callback (`login_flows`).
///
/// Kept by the hash of its `state` (the value in the provider's redirect), so the table
/// never holds what a URL carried. The PKCE verifier and the nonce are the flow's secrets:
/// they live here for at most the flow's ten minutes and go with the row.
public struct LoginFlowRecord: Sendable, Equatable {
    /// SHA-256 of the `state` parameter, base64url.
    public var stateHash: String
    /// The provider's name (`trust.issuers[N].login.name`).
    public var provider: String
    /// The anonymous session the sign-in upgrades.
    public var sessionID: String
    public var nonce: String
    /// The PKCE code verifier sent with the code to the token endpoint.
    public var codeVerifier: String
    /// Where the browser goes back to, its origin checked at start.
    public var returnTo: String
    /// The base64url SHA-256 of the verifier the browser keeps: the login code is redeemed only with that verifier.
    public var loginChallenge: String
    public var createdAt: Double
    public var expiresAt: Double

    public init(
        stateHash: String, provider: String, sessionID: String, nonce: String, codeVerifier: String, returnTo: String, loginChallenge: String,
        createdAt: Double, expiresAt: Double
    ) {
        self.stateHash = stateHash
        self.provider = provider
        self.sessionID = sessionID
        self.nonce = nonce
        self.codeVerifier = codeVerifier
        self.returnTo = returnTo
        self.loginChallenge = loginChallenge
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// Sign-ins through a provider in flight: started on one instance, completed on any.
public protocol LoginFlowRepository: Sendable {
    func insertLoginFlow(_ record: LoginFlowRecord) async throws
    /// Removes the flow with `stateHash` and returns it when it had not expired at `now`: one
    /// caller at most ever gets a flow (a replayed or raced callback gets `nil`).
    func takeLoginFlow(stateHash: String, now: Double) async throws -> LoginFlowRecord?
    /// Forgets flows that expired before `cutoff`; returns how many.
    @discardableResult
    func deleteExpiredLoginFlows(before cutoff: Double) async throws -> Int
}
