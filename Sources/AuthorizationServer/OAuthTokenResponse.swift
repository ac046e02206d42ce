import JOSE

/// A token endpoint's answer (RFC 6749 §5.1): the access token for one resource and its refresh
/// token (none for an identity assertion grant: the client asks its provider again).
public struct OAuthTokenResponse: Sendable {
    public let accessToken: String
    public let expiresIn: Int
    public let refreshToken: String?
    public let scope: String
    public let resource: String

    /// The JSON body. Secrets: never logged.
    public var json: JSONValue {
        var body: JSONObject = [
            "access_token": .string(accessToken), "token_type": "Bearer", "expires_in": .number(Double(expiresIn)),
            "scope": .string(scope), "resource": .string(resource),
        ]
        if let refreshToken { body["refresh_token"] = .string(refreshToken) }
        return .object(body)
    }
}
