import JOSE

/// A token endpoint's answer (RFC 6749 §5.1): the access token for one resource and its refresh token.
public struct OAuthTokenResponse: Sendable {
    public let accessToken: String
    public let expiresIn: Int
    public let refreshToken: String
    public let scope: String
    public let resource: String

    /// The JSON body. Secrets: never logged.
    public var json: JSONValue {
        [
            "access_token": .string(accessToken), "token_type": "Bearer", "expires_in": .number(Double(expiresIn)),
            "refresh_token": .string(refreshToken), "scope": .string(scope), "resource": .string(resource),
        ]
    }
}
