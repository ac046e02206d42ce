import Foundation
import ConfigurationReading
import TrustedIssuers

/// One service people connect once (`connections[N]`), for which the gateway is their OAuth
/// client: where to send them, where to exchange the code, and what to ask for.
public struct ConnectionSettings: Sendable, Equatable {
    /// `name`: what routes (`upstream_credential: {connection: NAME}`), paths and commands call it.
    public var name: String
    /// `display_name`: what the connect and agents pages show (default: the name).
    public var displayName: String
    /// `authorization_endpoint`: where the person's browser is sent to allow it.
    public var authorizationEndpoint: String
    /// `token_endpoint`: where the gateway exchanges the code and refreshes.
    public var tokenEndpoint: String
    /// `revocation_endpoint`: RFC 7009, told when a person disconnects (`nil`: the tokens are only forgotten).
    public var revocationEndpoint: String?
    /// `client_id`.
    public var clientID: String
    /// `client_secret_file` (`client_secret_basic`): an owner-only file holding the secret.
    public var clientSecretFile: String
    /// `scopes`: what is asked for.
    public var scopes: [String]
    /// `ca_file`: the CA the service's TLS is checked against (`nil`: the system's).
    public var caFile: String?
    /// `issuer`: the service's issuer identifier (RFC 8414), when it names itself on the way back
    /// (RFC 9207 `iss`). Set, every callback for this connection must carry `iss` equal to it, so
    /// that a code another service sent back can never be taken for this one's (a mix-up attack).
    public var issuer: String?

    /// The keys an entry may set.
    static let keys: Set<String> = [
        "name", "display_name", "authorization_endpoint", "token_endpoint", "revocation_endpoint", "client_id", "client_secret_file", "scopes", "ca_file", "issuer",
    ]

    public init(
        name: String, displayName: String? = nil, authorizationEndpoint: String, tokenEndpoint: String, revocationEndpoint: String? = nil,
        clientID: String, clientSecretFile: String, scopes: [String], caFile: String? = nil, issuer: String? = nil
    ) {
        self.name = name
        self.displayName = displayName ?? name
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.clientID = clientID
        self.clientSecretFile = clientSecretFile
        self.scopes = scopes
        self.caFile = caFile
        self.issuer = issuer
    }

    /// A connection's name: 1-32 of lower-case letters, digits and `-`, starting with a letter
    /// (it is a path segment and a key in the store); never `callback`, the callback's own segment.
    public static func isValidName(_ name: String) -> Bool {
        guard name != "callback", let first = name.utf8.first, (1...32).contains(name.utf8.count), first >= 0x61 && first <= 0x7A else { return false }
        return name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "-") }
    }

    /// Reads one entry.
    ///
    /// - Throws: `ConfigurationError` naming `connections[N].KEY`: an unknown key, a missing or
    ///   malformed name, an endpoint that is not https (plain http only to loopback), no client.
    init(reading entry: ConfigurationMap) throws(ConfigurationError) {
        if let unknown = entry.names.subtracting(Self.keys).sorted().first {
            throw entry.problem(unknown, "is not a setting of a connection (known: \(Self.keys.sorted().joined(separator: ", ")))")
        }
        guard let name = try entry.string("name"), Self.isValidName(name) else {
            throw entry.problem("name", "is required: 1-32 lower-case letters, digits and -, starting with a letter, such as github (not callback)")
        }
        func endpoint(_ key: String) throws(ConfigurationError) -> String? {
            guard let url = try entry.string(key) else { return nil }
            guard TrustedIssuer.isFetchable(url), !url.contains("#") else {
                throw entry.problem(key, "must be an https URL without a fragment (plain http only to a loopback address), not \(url)")
            }
            return url
        }
        guard let authorization = try endpoint("authorization_endpoint") else {
            throw entry.problem("authorization_endpoint", "is required: where the person's browser is sent to allow access, such as https://github.com/login/oauth/authorize")
        }
        guard let token = try endpoint("token_endpoint") else {
            throw entry.problem("token_endpoint", "is required: where the gateway exchanges the code, such as https://github.com/login/oauth/access_token")
        }
        guard let clientID = try entry.string("client_id") else { throw entry.problem("client_id", "is required: the gateway's client id at the service") }
        guard let secretFile = try entry.string("client_secret_file") else {
            throw entry.problem("client_secret_file", "is required: an owner-only file (mode 0600) holding the client secret")
        }
        let scopes = try entry.strings("scopes") ?? []
        if let bad = scopes.first(where: { $0.isEmpty || $0.utf8.contains { $0 <= 0x20 || $0 == 0x22 || $0 == 0x5C || $0 >= 0x7F } }) {
            throw entry.problem("scopes", "lists \"\(bad)\", which is not a scope (RFC 6749 3.3: visible ASCII without spaces, quotes or backslashes)")
        }
        let caFile = try entry.string("ca_file")
        // Read at start, as a trusted issuer's: a file it cannot read is said now, not at the first connect.
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw entry.problem("ca_file", "names \(caFile), which cannot be read")
        }
        let issuer = try endpoint("issuer")
        if let issuer, issuer.contains("?") {
            throw entry.problem("issuer", "must be the service's issuer identifier, an https URL without a query or fragment (RFC 8414), not \(issuer)")
        }
        self.init(
            name: name, displayName: try entry.string("display_name"), authorizationEndpoint: authorization, tokenEndpoint: token,
            revocationEndpoint: try endpoint("revocation_endpoint"), clientID: clientID, clientSecretFile: secretFile, scopes: scopes,
            caFile: caFile, issuer: issuer)
    }
}
