import MCPResource

/// An authorization request (`GET /api/auth/oauth/authorize`) checked in the order that decides
/// where its errors go: first the client and its `redirect_uri` (an error there is the gateway's
/// own page), then everything else (an error there goes back to the client with `state` and `iss`).
public struct AuthorizationRequest: Sendable, Equatable {
    public let client: RegisteredClient
    public let redirectURI: String
    /// Whether the request named `redirect_uri` (the token request must then name it too, RFC 6749 §4.1.3).
    public let redirectURIGiven: Bool
    public let state: String?
    public let challenge: PKCEChallenge
    public let resource: MCPResource
    /// The scopes asked, each one the resource offers; the resource's own when none were asked.
    public let scopes: [String]
    /// `prompt` (OpenID Connect's, space-separated): `consent` shows the consent page whatever was
    /// remembered; `none` never shows a page (what needs one is `consent_required` or `login_required`).
    public let prompt: Set<String>

    /// Whether the redirect identifies the client (RFC 8252 §8.6): an `https` URI registered
    /// exactly. A loopback one (any port: any program on the machine may listen there) or a
    /// private-use scheme (any app may claim it) does not, so a consent given before is never
    /// taken for this request without the person's click.
    public var redirectIdentifiesClient: Bool {
        redirectURI.utf8.count > 8 && redirectURI.prefix(8).lowercased() == "https://" && client.redirectURIs.contains(redirectURI)
    }

    /// The parameters as the query held them (each at most once).
    public typealias Parameters = [String: String]

    /// The parameters that may appear at most once (RFC 6749 §3.1).
    static let singleParameters = ["response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method", "resource", "prompt"]

    /// Step one: the client and where it goes back to.
    ///
    /// - Throws: `UnredirectableAuthorizationError`: the gateway's own page answers.
    public static func redirectTarget(
        _ parameters: Parameters, repeated: Set<String>, client found: RegisteredClient?
    ) throws(UnredirectableAuthorizationError) -> (RegisteredClient, String) {
        if repeated.contains("client_id") || repeated.contains("redirect_uri") {
            throw UnredirectableAuthorizationError("request_invalid", "client_id and redirect_uri may each be given once")
        }
        guard let clientID = parameters["client_id"], !clientID.isEmpty else {
            throw UnredirectableAuthorizationError("client_missing", "the request names no client_id; the application that sent you here must send one")
        }
        guard let client = found, client.clientID == clientID else {
            throw UnredirectableAuthorizationError(
                "client_unknown",
                "the client \(Self.printable(clientID)) is not registered with this gateway (or its registration expired); its operator adds it under authorization_server.clients")
        }
        guard let redirectURI = parameters["redirect_uri"] else {
            // One registered URI is the default (RFC 6749 §3.1.2.3); with several, the request must say.
            guard client.redirectURIs.count == 1, let only = client.redirectURIs.first, !only.lowercased().hasPrefix("http://") else {
                throw UnredirectableAuthorizationError("redirect_uri_missing", "the request names no redirect_uri, and \(client.name) has no single one to fall back on")
            }
            return (client, only)
        }
        guard RedirectURI.matches(redirectURI, registered: client.redirectURIs) else {
            throw UnredirectableAuthorizationError(
                "redirect_uri_invalid",
                "the redirect_uri is not one \(client.name) registered (it must match exactly; a loopback one on any port); nothing was sent back to it")
        }
        return (client, redirectURI)
    }

    /// Step two: the rest, for a client and `redirect_uri` already checked.
    ///
    /// - Parameter resources: the MCP resources by canonical URL.
    /// - Throws: `OAuthError`, to be sent back to the client.
    public init(
        _ parameters: Parameters, repeated: Set<String>, client: RegisteredClient, redirectURI: String, resource find: (String) -> MCPResource?
    ) throws(OAuthError) {
        self.client = client
        self.redirectURI = redirectURI
        redirectURIGiven = parameters["redirect_uri"] != nil
        state = parameters["state"]
        prompt = Set((parameters["prompt"] ?? "").split(separator: " ").map(String.init))
        if let twice = Self.singleParameters.first(where: repeated.contains) { throw .invalidRequest("\(twice) may be given once") }
        if prompt.contains("none"), prompt.count > 1 { throw .invalidRequest("prompt=none may not be combined with another value") }
        guard parameters["response_type"] == "code" else {
            throw OAuthError("unsupported_response_type", "response_type must be code (the authorization code flow with PKCE)")
        }
        challenge = try PKCEChallenge(challenge: parameters["code_challenge"], method: parameters["code_challenge_method"])
        guard let asked = parameters["resource"] else {
            throw .invalidTarget("resource is required: the canonical URL of the MCP server the token is for (RFC 8707)")
        }
        guard let resource = find(asked) else {
            throw .invalidTarget("resource \(Self.printable(asked)) is not an MCP server behind this gateway; use the URL its protected resource metadata names")
        }
        self.resource = resource
        let askedScopes = (parameters["scope"] ?? "").split(separator: " ").map(String.init)
        if askedScopes.isEmpty {
            scopes = resource.scopes
        } else {
            // Scopes the resource does not know are left out (RFC 6749 §3.3 lets the server grant less).
            // What its route requires must all be there, or the token would be refused at once.
            let offered = askedScopes.filter(resource.supportedScopes.contains)
            var unique: [String] = []
            for scope in offered where !unique.contains(scope) { unique.append(scope) }
            guard resource.scopes.allSatisfy(unique.contains) else {
                throw .invalidScope("the MCP server needs the scopes \(resource.scope); ask for them (or leave scope out)")
            }
            scopes = unique
        }
    }

    /// A value fit for a message: printable ASCII, at most 120 characters.
    static func printable(_ text: String) -> String {
        let kept = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(120).map(Character.init))
        return "\"" + kept + "\""
    }
}
