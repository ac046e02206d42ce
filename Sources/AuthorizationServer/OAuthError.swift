/// A refusal of the authorization server, in OAuth's terms (RFC 6749 §4.1.2.1, §5.2).
///
/// `code` is OAuth's stable error code (`invalid_request`, `invalid_grant`, `invalid_target`, ...);
/// `description` one sentence a person can act on, never repeating a code, token or verifier.
public struct OAuthError: Error, Sendable, Equatable {
    public let code: String
    public let description: String

    public init(_ code: String, _ description: String) {
        self.code = code
        self.description = description
    }

    public static func invalidRequest(_ description: String) -> OAuthError { OAuthError("invalid_request", description) }
    public static func invalidGrant(_ description: String) -> OAuthError { OAuthError("invalid_grant", description) }
    public static func invalidClient(_ description: String) -> OAuthError { OAuthError("invalid_client", description) }
    public static func invalidTarget(_ description: String) -> OAuthError { OAuthError("invalid_target", description) }
    public static func invalidScope(_ description: String) -> OAuthError { OAuthError("invalid_scope", description) }
}

/// Why an authorization request cannot go back to its client: the gateway answers it with a page
/// of its own, never a redirect anywhere (RFC 6749 §4.1.2.1).
public struct UnredirectableAuthorizationError: Error, Sendable, Equatable {
    /// A stable code for the page and the log (`client_unknown`, `redirect_uri_invalid`, ...).
    public let code: String
    public let message: String

    public init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }
}
