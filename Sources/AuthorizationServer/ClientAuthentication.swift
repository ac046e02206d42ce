import Foundation

/// How a client identified itself at the token or revocation endpoint (RFC 6749 section 2.3.1):
/// `Authorization: Basic` (`client_secret_basic`), `client_id` and `client_secret` in the form
/// (`client_secret_post`), or `client_id` alone (a public client, `none`).
public struct ClientAuthentication: Sendable, Equatable {
    /// The client it says it is (`nil`: it said nothing).
    public let clientID: String?
    /// The secret it presented, if any.
    public let secret: String?
    /// The Basic header's secret as it came, when form-decoding changed it: RFC 6749 asks clients
    /// to form-encode, but `curl -u` and many libraries do not, and a secret with `+` or `%` in it
    /// must work from both.
    public let undecodedSecret: String?

    public init(clientID: String?, secret: String?, undecodedSecret: String? = nil) {
        self.clientID = clientID
        self.secret = secret
        self.undecodedSecret = undecodedSecret
    }

    /// The secrets it may have meant: the decoded one, and the one as it came when they differ.
    public var presentedSecrets: [String] { [secret, undecodedSecret].compactMap { $0 } }

    /// Reads it from the request's `Authorization` header (when it is `Basic`) and its form.
    ///
    /// - Throws: `OAuthError` `invalid_client` for a Basic header that does not decode to
    ///   `id:secret`; `invalid_request` for a client that authenticates two ways at once, or
    ///   names two different ids.
    public init(authorization: String?, form: [String: String]) throws(OAuthError) {
        let formSecret = form["client_secret"]
        guard let authorization, Self.isBasic(authorization) else {
            self.init(clientID: form["client_id"], secret: formSecret)
            return
        }
        // RFC 6749 2.3.1: base64 of the form-encoded id, a colon, the form-encoded secret.
        let encoded = authorization.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard encoded.utf8.count <= 4_096, let bytes = Data(base64Encoded: encoded), let text = String(data: bytes, encoding: .utf8),
            let colon = text.firstIndex(of: ":")
        else {
            throw OAuthError.invalidClient("the Authorization header must be Basic with the base64 of client_id:client_secret (each form-encoded)")
        }
        let rawID = String(text[..<colon])
        let rawSecret = String(text[text.index(after: colon)...])
        // Decoded as RFC 6749 says; a part that does not decode (a lone `%`) is taken as it came.
        let id = Self.formDecoded(rawID[...]) ?? rawID
        let decodedSecret = Self.formDecoded(rawSecret[...])
        let secret = decodedSecret ?? rawSecret
        guard !id.isEmpty else {
            throw OAuthError.invalidClient("the Authorization header must be Basic with the base64 of client_id:client_secret (each form-encoded)")
        }
        guard formSecret == nil else {
            throw OAuthError.invalidRequest("the client authenticated twice (Authorization: Basic and client_secret in the form); use one")
        }
        if let named = form["client_id"], named != id {
            throw OAuthError.invalidRequest("client_id in the form names another client than the Authorization header")
        }
        self.init(clientID: id, secret: secret, undecodedSecret: rawSecret == secret ? nil : rawSecret)
    }

    /// Whether an `Authorization` value tries `Basic` (a refusal then carries `WWW-Authenticate: Basic`,
    /// even when the value does not decode).
    public static func isBasic(_ authorization: String?) -> Bool {
        guard let authorization else { return false }
        return authorization.count > 6 && authorization.prefix(6).lowercased() == "basic "
    }

    /// `application/x-www-form-urlencoded` decoding of one part ("+" is a space).
    static func formDecoded(_ part: Substring) -> String? {
        String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
