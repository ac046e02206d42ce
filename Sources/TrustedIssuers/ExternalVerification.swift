import JOSE

/// Who a trusted issuer's token speaks for: the pair (issuer, subject) and the
/// tenant the configuration gives it.
public struct ExternalIdentity: Sendable, Equatable {
    public let issuer: String
    public let subject: String
    public let tenantID: String

    public init(issuer: String, subject: String, tenantID: String) {
        self.issuer = issuer
        self.subject = subject
        self.tenantID = tenantID
    }
}

/// The outcome of checking a token against its issuer's keys as they are now.
public enum ExternalVerification: Sendable {
    /// Valid: the identity, and the token's verified claims.
    case verified(ExternalIdentity, VerifiedAccessToken)
    /// Refused, with the verifier's reason (401).
    case refused(TokenValidationError)
    /// The issuer's keys are not at hand (never fetched, or older than `max_stale_seconds`): 503.
    case unavailable(String)
    /// Valid, but it names a tenant its issuer may not produce (`trust.issuers[N].tenants`): 403.
    case tenantNotAllowed(String)
    /// The `kid` is not among the keys held, and a fetch now may bring it: call
    /// `TrustedIssuers.refreshForUnknownKey(issuer:)`, then verify once more.
    case keysMayHaveChanged
}

/// One issuer's key state for `/readyz` and `portcullis trust check`.
public struct IssuerStatus: Sendable {
    public let issuer: String
    /// Where the keys come from: the JWKS URL, or `secret_file`.
    public let source: String
    public let keys: [(kid: String, algorithm: String)]
    /// Seconds since the last successful fetch; `nil` when none has succeeded.
    public let age: Double?
    public let lastError: String?
    /// Keys present and younger than `max_stale_seconds`.
    public let usable: Bool
    /// Keys of the last JWKS left out, with the reason.
    public let skipped: [String]
    /// The login endpoints of the last discovery document, or why it names none; `nil` without discovery or before a fetch.
    public var endpoints: Result<ProviderEndpoints, KeyFetchError>? = nil
}
