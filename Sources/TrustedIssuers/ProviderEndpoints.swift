import JOSE

/// What an issuer's discovery document says about signing in through it: the endpoints
/// of the OpenID Connect code flow and the features the gateway checks for.
///
/// Read with its keys (every fetch of the discovery document), so that the login flow
/// uses the endpoints as the provider publishes them now, never a URL from a request.
public struct ProviderEndpoints: Sendable, Equatable {
    public var authorization: String
    public var token: String
    /// Where a user's provider session ends (RP-initiated logout); `nil` when none is published.
    public var endSession: String?
    /// `authorization_response_iss_parameter_supported` (RFC 9207): the callback's `iss` is then required and checked.
    public var issuerInAuthorizationResponse: Bool
    /// `backchannel_logout_supported`.
    public var backChannelLogout: Bool

    public init(authorization: String, token: String, endSession: String? = nil, issuerInAuthorizationResponse: Bool = false, backChannelLogout: Bool = false) {
        self.authorization = authorization
        self.token = token
        self.endSession = endSession
        self.issuerInAuthorizationResponse = issuerInAuthorizationResponse
        self.backChannelLogout = backChannelLogout
    }

    /// The endpoints a discovery document names, or the error saying what is missing.
    ///
    /// Every URL must be one the gateway may fetch (`https://`, or `http://` to loopback); an
    /// end-session URL that is not is left out rather than sent to a browser.
    ///
    /// The token endpoint, where the gateway sends its client credential, must be on the issuer's
    /// origin, or on the login's `token_endpoint_origin` (Google's is on another host).
    static func read(_ document: JSONObject, issuer: TrustedIssuer) -> Result<ProviderEndpoints, KeyFetchError> {
        guard let authorization = document["authorization_endpoint"]?.stringValue, TrustedIssuer.isFetchable(authorization) else {
            return .failure(KeyFetchError("the discovery document names no https authorization_endpoint"))
        }
        guard let token = document["token_endpoint"]?.stringValue, TrustedIssuer.isFetchable(token) else {
            return .failure(KeyFetchError("the discovery document names no https token_endpoint"))
        }
        let tokenOrigin = KeyFetcher.origin(token)
        guard tokenOrigin != nil, tokenOrigin == KeyFetcher.origin(issuer.issuer) || tokenOrigin == issuer.login?.tokenEndpointOrigin else {
            return .failure(
                KeyFetchError(
                    "the discovery document's token_endpoint is on \(tokenOrigin ?? "no origin"), not the issuer's origin; if that is right, set login.token_endpoint_origin to it"
                ))
        }
        let endSession = document["end_session_endpoint"]?.stringValue.flatMap { TrustedIssuer.isFetchable($0) ? $0 : nil }
        return .success(
            ProviderEndpoints(
                authorization: authorization, token: token, endSession: endSession,
                issuerInAuthorizationResponse: document["authorization_response_iss_parameter_supported"] == .bool(true),
                backChannelLogout: document["backchannel_logout_supported"] == .bool(true)))
    }
}
