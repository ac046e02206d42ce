import ConfigurationReading

/// `authorization_server`: the gateway as the OAuth 2.1 authorization server MCP clients (and any
/// other OAuth client) sign in through. It reads itself.
public struct AuthorizationServerSettings: Sendable, Equatable {
    /// `authorization_server.clients`: clients registered in the configuration.
    public var clients: [RegisteredClient] = []
    /// `authorization_server.access_token_lifetime_seconds`: the life of an access token it issues (600).
    public var accessTokenLifetime: Double = 600
    /// `authorization_server.code_lifetime_seconds`: how long a code may wait for its exchange (60).
    public var codeLifetime: Double = 60
    /// `authorization_server.client_metadata_hosts`: where Client ID Metadata Documents may be fetched from (none: not fetched).
    public var clientMetadataHosts = ClientMetadataHosts([])!
    /// `authorization_server.dynamic_registration`: RFC 7591 registration, off by default.
    public var dynamicRegistration = false
    /// `authorization_server.max_unused_registrations`: how many registrations nobody has used yet
    /// (each lives ten minutes) all instances together keep; past it a registration is answered
    /// 503 `temporarily_unavailable` (1000).
    public var maximumUnusedRegistrations = 1_000

    public init() {}

    /// The keys of one entry of `authorization_server.clients`.
    static let clientKeys: Set<String> = ["client_id", "name", "redirect_uris", "client_secret_file"]

    /// - Throws: `ConfigurationError` naming the key: a client without an id or a redirect URI, a
    ///   redirect URI that is neither https nor a loopback http one (or has a fragment), two clients
    ///   with one id, a lifetime out of range.
    public init(reading values: ConfigurationValues) throws(ConfigurationError) {
        if let seconds = try values.int("authorization_server.access_token_lifetime_seconds", in: 60...3_600) { accessTokenLifetime = Double(seconds) }
        if let seconds = try values.int("authorization_server.code_lifetime_seconds", in: 10...600) { codeLifetime = Double(seconds) }
        if let entries = try values.strings("authorization_server.client_metadata_hosts") {
            guard let hosts = ClientMetadataHosts(entries) else {
                throw ConfigurationError(
                    key: "authorization_server.client_metadata_hosts",
                    "must list host names (vscode.dev), *.domain for every host under one, or * for any host (public addresses only for those two), not \(entries)")
            }
            clientMetadataHosts = hosts
        }
        if let on = try values.bool("authorization_server.dynamic_registration") { dynamicRegistration = on }
        if let count = try values.int("authorization_server.max_unused_registrations", in: 1...1_000_000) { maximumUnusedRegistrations = count }
        guard let entries = values.mapList("authorization_server.clients") else { return }
        for entry in entries {
            if let unknown = entry.names.subtracting(Self.clientKeys).sorted().first {
                throw entry.problem(unknown, "is not a setting of a client (known: \(Self.clientKeys.sorted().joined(separator: ", ")))")
            }
            guard let clientID = try entry.string("client_id"), !clientID.isEmpty, clientID.utf8.count <= 255,
                clientID.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
            else {
                throw entry.problem("client_id", "is required: 1-255 visible ASCII characters without quotes, such as ops-cli")
            }
            guard !clients.contains(where: { $0.clientID == clientID }) else { throw entry.problem("client_id", "is \(clientID), which an earlier client has too") }
            guard let uris = try entry.strings("redirect_uris"), !uris.isEmpty else {
                throw entry.problem("redirect_uris", "is required: where the client's browser comes back to, such as http://127.0.0.1/callback")
            }
            if let bad = uris.first(where: { !RedirectURI.isAcceptable($0) }) {
                throw entry.problem(
                    "redirect_uris", "lists \(bad), which is not a redirect URI a client may have: https, http on a loopback host (127.0.0.1, [::1], localhost), or an app's own scheme; no fragment")
            }
            let name = try entry.string("name") ?? clientID
            var secret: ClientSecret?
            if let file = try entry.string("client_secret_file") {
                let key = "authorization_server.clients[\(clients.count)].client_secret_file"
                var bytes = try OwnerOnlyFile.read(file, key: key)
                // A secret written with `echo` ends in a newline that was never part of it.
                while bytes.last == UInt8(ascii: "\n") || bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
                guard bytes.count >= 16 else {
                    throw ConfigurationError(fileKey: key, "names \(file), which holds \(bytes.count) bytes; a client secret needs at least 16 (openssl rand -hex 32 makes one)")
                }
                // The client sends it as text (a header or a form): bytes it could not send would lock it out.
                guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    throw ConfigurationError(fileKey: key, "names \(file), whose secret is not printable ASCII without spaces, so no client could send it; openssl rand -hex 32 makes one")
                }
                do {
                    secret = try ClientSecret(bytes)
                } catch {
                    throw ConfigurationError(fileKey: key, "names \(file), whose secret could not be digested: \(error)")
                }
            }
            clients.append(RegisteredClient(clientID: clientID, name: name, redirectURIs: uris, source: .configured, secret: secret))
        }
    }

    /// Whether some configured client has a secret (the metadata then offers `client_secret_basic` and `client_secret_post`).
    public var hasConfidentialClients: Bool { clients.contains { $0.secret != nil } }

    /// The configured client with `clientID`.
    public func client(_ clientID: String) -> RegisteredClient? {
        clients.first { $0.clientID == clientID }
    }
}
