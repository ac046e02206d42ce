import JOSE

/// The person an authorization is for, as their browser session proves them.
public struct OAuthPerson: Sendable, Equatable {
    public let userID: String
    public let tenantID: String
    /// Their gateway session: what the server issues for them ends with it (sign-out, expiry).
    public let sessionID: String
    /// Claims the access tokens carry about them, for the resource's route policy and identity
    /// fields: `preferred_username`, `email`, `email_verified`, `name`, `groups`, `idp_iss`, `idp_sub`.
    public let claims: JSONObject

    public init(userID: String, tenantID: String, sessionID: String, claims: JSONObject) {
        self.userID = userID
        self.tenantID = tenantID
        self.sessionID = sessionID
        self.claims = claims
    }

    /// The claims a browser session holds that an access token may carry about its person.
    public static let carriedClaims = ["preferred_username", "email", "email_verified", "name", "groups", "idp_iss", "idp_sub"]
}
