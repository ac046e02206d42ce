import JOSE
import StateSurface

/// An RFC 7591 registration request, checked: a public client (no secret) with its redirect URIs.
///
/// The server registers public clients only: a requested secret-based `token_endpoint_auth_method`
/// is replaced by `none` (RFC 7591 §3.2.1 lets it), which the answer says. PKCE is the proof.
public struct ClientRegistration: Sendable, Equatable {
    public let name: String
    public let redirectURIs: [String]

    /// The most redirect URIs one registration may list.
    public static let maximumRedirectURIs = 10
    /// The most bytes a registration's redirect URIs may take together: with its name (at most
    /// 100 characters) all a self-registration stores, so at most a few KiB each.
    public static let maximumRedirectURIBytes = 2_048

    /// - Throws: `OAuthError` `invalid_client_metadata` or `invalid_redirect_uri` (RFC 7591 §3.2.2).
    public init(_ body: JSONObject) throws(OAuthError) {
        guard case .array(let uris)? = body["redirect_uris"], !uris.isEmpty, uris.count <= Self.maximumRedirectURIs else {
            throw OAuthError("invalid_redirect_uri", "redirect_uris must list 1 to \(Self.maximumRedirectURIs) URIs")
        }
        var redirectURIs: [String] = []
        for uri in uris {
            guard let text = uri.stringValue, RedirectURI.isAcceptable(text) else {
                throw OAuthError(
                    "invalid_redirect_uri", "each redirect URI must be https, http on a loopback host (127.0.0.1, [::1], localhost), or an app's own scheme, without a fragment")
            }
            if !redirectURIs.contains(text) { redirectURIs.append(text) }
        }
        guard redirectURIs.reduce(0, { $0 + $1.utf8.count }) <= Self.maximumRedirectURIBytes else {
            throw OAuthError("invalid_redirect_uri", "redirect_uris may take at most \(Self.maximumRedirectURIBytes) bytes together")
        }
        self.redirectURIs = redirectURIs
        if let grants = body["grant_types"] {
            guard case .array(let list) = grants, list.allSatisfy({ ["authorization_code", "refresh_token"].contains($0.stringValue ?? "") }) else {
                throw OAuthError("invalid_client_metadata", "grant_types may list authorization_code and refresh_token only")
            }
        }
        if let types = body["response_types"] {
            guard case .array(let list) = types, list.allSatisfy({ $0.stringValue == "code" }) else {
                throw OAuthError("invalid_client_metadata", "response_types may list code only")
            }
        }
        switch body["client_name"] {
        case nil, .null?:
            name = "Unnamed client"
        case .string(let text)?:
            let printable = text.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F && !(0x80...0x9F).contains($0.value) }
            guard !text.isEmpty, text.count <= 100, printable else {
                throw OAuthError("invalid_client_metadata", "client_name must be 1-100 printable characters")
            }
            name = text
        default:
            throw OAuthError("invalid_client_metadata", "client_name must be a string")
        }
    }

    /// The answer to a registration (RFC 7591 §3.2.1).
    public static func response(for client: RegisteredClient, issuedAt: Double) -> JSONValue {
        [
            "client_id": .string(client.clientID), "client_id_issued_at": .number(issuedAt.rounded(.down)), "client_name": .string(client.name),
            "redirect_uris": .array(client.redirectURIs.map(JSONValue.string)), "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"], "token_endpoint_auth_method": "none",
        ]
    }
}

extension RegisteredClient {
    /// A registration as the store keeps it.
    public init?(_ record: OAuthClientRecord) {
        guard case .array(let uris)? = try? StrictJSONReader().parse(Array(record.redirectURIs.utf8)) else { return nil }
        self.init(clientID: record.clientID, name: record.name, redirectURIs: uris.compactMap(\.stringValue), source: .dynamic)
    }
}
