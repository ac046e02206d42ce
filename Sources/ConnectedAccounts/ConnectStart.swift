import JOSE
import ProviderLogin
import StateSurface

/// The start of a person's connecting of a service: the flow to keep and the authorization URL
/// their browser is sent to (RFC 6749 4.1.1, PKCE S256 always, RFC 7636).
///
/// `state` is 256 bits from the CSPRNG; only its hash is kept, with the PKCE verifier and the
/// browser session that started it. Nothing about the person enters the URL.
public struct ConnectStart: Sendable {
    /// How long a started connecting may take to come back.
    public static let lifetime: Double = 600

    /// The URL the browser navigates to.
    public let authorizationURL: String
    /// The flow to store before answering.
    public let flow: ConnectFlowRecord

    /// Makes a flow and its URL for `owner`, bound to the browser session whose cookie hashes to `cookieHash`.
    ///
    /// - Parameters:
    ///   - redirectURI: the gateway's callback (`{public_url}/.portcullis/connect/callback`).
    ///   - returnTo: where the browser goes once connected, checked by the caller.
    public init(
        connection: ConnectionSettings, owner: ConnectionTokenVault.Owner, cookieHash: String, redirectURI: String, returnTo: String, now: Double
    ) throws {
        let state = Base64URL.encode(try SecureRandom.bytes(32))
        // 43 characters of base64url: RFC 7636's verifier alphabet, 256 bits.
        let verifier = Base64URL.encode(try SecureRandom.bytes(32))
        let challenge = try Digest.sha256Base64URL(verifier)
        flow = ConnectFlowRecord(
            stateHash: try LoginStart.hash(state), connection: connection.name, userID: owner.userID, tenantID: owner.tenantID, cookieHash: cookieHash,
            codeVerifier: verifier, returnTo: returnTo, createdAt: now, expiresAt: now + Self.lifetime)
        var query: [(String, String)] = [
            ("response_type", "code"), ("client_id", connection.clientID), ("redirect_uri", redirectURI), ("state", state),
            ("code_challenge", challenge), ("code_challenge_method", "S256"),
        ]
        if !connection.scopes.isEmpty { query.append(("scope", connection.scopes.joined(separator: " "))) }
        let separator = connection.authorizationEndpoint.contains("?") ? "&" : "?"
        authorizationURL =
            connection.authorizationEndpoint + separator + query.map { FormEncoding.encode($0.0) + "=" + FormEncoding.encode($0.1) }.joined(separator: "&")
    }
}
