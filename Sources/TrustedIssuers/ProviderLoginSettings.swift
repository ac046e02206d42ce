import ConfigurationReading
import Foundation

/// How the gateway signs users in through a trusted issuer (`trust.issuers[N].login`):
/// the OpenID Connect client it is registered as at that provider.
///
/// Only the settings live here, read with the issuer they belong to; the flow itself
/// (state, the code exchange, the ID token, back-channel logout) is the `ProviderLogin`
/// module's. A client secret is never held in the configuration, only the file it is in,
/// and that file must not be readable by other users.
public struct ProviderLoginSettings: Sendable, Equatable {
    /// How the gateway proves itself at the provider's token endpoint.
    public enum ClientAuthentication: Sendable, Equatable {
        /// `client_secret_basic`: the secret read from this file.
        case secretBasic(file: String)
        /// `private_key_jwt`: a client assertion signed with the PEM private key in this file.
        case privateKeyJWT(file: String)
    }

    /// In the paths (`/api/auth/oidc/{name}/start`): `[a-z0-9-]`, 1-32 characters.
    public var name: String
    /// What a sign-in button says ("Sign in with ...").
    public var displayName: String
    public var clientID: String
    public var authentication: ClientAuthentication
    /// The scopes asked for; always holds `openid`.
    public var scopes: [String]
    /// An origin the token endpoint may be on besides the issuer's own (`token_endpoint_origin`, as
    /// `https://host[:port]`); `nil`: the issuer's origin only. The gateway sends its client
    /// credential there, so a discovery document naming another origin is refused unless it is this one.
    public var tokenEndpointOrigin: String?

    /// The keys a `login` map may set.
    public static let settingNames: Set<String> = [
        "name", "display_name", "client_id", "client_secret_file", "private_key_file", "scopes", "token_endpoint_origin",
    ]

    public init(name: String, displayName: String? = nil, clientID: String, authentication: ClientAuthentication, scopes: [String] = ["openid", "profile", "email"]) {
        self.name = name
        self.displayName = displayName ?? name
        self.clientID = clientID
        self.authentication = authentication
        self.scopes = scopes
    }

    /// Whether `name` may name a provider in a path: 1-32 of `a-z`, `0-9` and `-`.
    public static func isValidName(_ name: String) -> Bool {
        (1...32).contains(name.utf8.count)
            && name.utf8.allSatisfy { ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: "-") }
    }

    /// Reads and checks one `login` map.
    ///
    /// - Throws: `ConfigurationError` naming `trust.issuers[N].login.KEY`.
    public init(reading map: ConfigurationMap) throws(ConfigurationError) {
        if let unknown = map.names.subtracting(Self.settingNames).sorted().first {
            throw map.problem(unknown, "is not a setting of a provider login (known: \(Self.settingNames.sorted().joined(separator: ", ")))")
        }
        guard let name = try map.string("name") else { throw map.problem("name", "is required: the provider's name in the login paths, such as acme") }
        guard Self.isValidName(name) else { throw map.problem("name", "must be 1-32 of a-z, 0-9 and -, not \"\(name)\"") }
        guard let clientID = try map.string("client_id") else { throw map.problem("client_id", "is required: the client id the gateway is registered with at the provider") }
        // The files themselves are read (and refused when others can read them) as the gateway starts
        // (`ProviderLogin.ProviderDirectory`), as a trusted issuer's secret_file is.
        let authentication: ClientAuthentication
        switch (try map.string("client_secret_file"), try map.string("private_key_file")) {
        case (let file?, nil): authentication = .secretBasic(file: file)
        case (nil, let file?): authentication = .privateKeyJWT(file: file)
        case (nil, nil):
            throw map.problem("client_secret_file", "or private_key_file is required: how the gateway authenticates at the provider's token endpoint")
        case (_?, _?):
            throw map.problem("private_key_file", "and client_secret_file cannot both be set: the gateway authenticates one way")
        }
        var scopes = ["openid", "profile", "email"]
        if let listed = try map.strings("scopes") {
            guard listed.contains("openid") else { throw map.problem("scopes", "must include openid: without it the provider sends no ID token") }
            if let bad = listed.first(where: { $0.isEmpty || $0.utf8.contains { $0 <= 0x20 || $0 >= 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") } }) {
                throw map.problem("scopes", "lists \"\(bad)\", which is not a scope (visible ASCII, no spaces, quotes or backslashes)")
            }
            scopes = listed
        }
        self.init(name: name, displayName: try map.string("display_name"), clientID: clientID, authentication: authentication, scopes: scopes)
        if let origin = try map.string("token_endpoint_origin") {
            guard TrustedIssuer.isFetchable(origin), let normalized = KeyFetcher.origin(origin), URL(string: origin)?.path.isEmpty ?? false else {
                throw map.problem(
                    "token_endpoint_origin", "must be an https origin such as https://oauth2.googleapis.com (scheme, host, port; no path), not \"\(origin)\"")
            }
            tokenEndpointOrigin = normalized
        }
    }
}
