import ConfigurationReading
import Foundation
import JOSE

/// One identity provider whose access tokens the gateway accepts (an entry of
/// `trust.issuers`): where its keys come from and the rules its tokens meet.
///
/// Read from the configuration file only (a list of maps has no environment
/// spelling), validated at start with errors that name the entry and the key.
public struct TrustedIssuer: Sendable, Equatable {
    /// Where the issuer's verification keys come from.
    public enum KeySource: Sendable, Equatable {
        /// A JWKS URL named in the configuration.
        case jwks(url: String)
        /// OIDC discovery: `<issuer>/.well-known/openid-configuration`, whose `jwks_uri` is fetched.
        case discovery
        /// A shared HMAC secret in a file (a legacy Supabase project secret, say).
        case secret(file: String)
    }

    /// Which tenant an identity of this issuer belongs to.
    public enum Tenant: Sendable, Equatable {
        case fixed(String)
        /// The claim naming it, and the tenants it may name; a token without it is refused (401),
        /// one naming another tenant is forbidden (403): no issuer's users can join another's tenant.
        case claim(String, tenants: Set<String>)
    }

    /// The exact `iss`.
    public var issuer: String
    public var keySource: KeySource
    /// `aud` must hold one of these.
    public var audiences: [String]
    /// The algorithms accepted; `nil` accepts the asymmetric algorithm each published key is bound to.
    public var algorithms: [JWSAlgorithm]?
    public var tenant: Tenant
    /// The claim holding the subject (`sub` unless configured).
    public var subjectClaim = "sub"
    /// At most one fetch per this many seconds for an unknown `kid`.
    public var refreshCooldown: Double = 30
    /// How long the last good keys keep working while the provider cannot be reached.
    public var maximumStaleness: Double = 86_400
    /// A PEM CA bundle to verify the provider's HTTPS with, instead of the system's roots.
    public var caFile: String?
    /// Longest token lifetime accepted (`exp - iat`, and `exp - now`), in seconds.
    public var maximumTokenLifetime: Double = 86_400
    /// Signing users in through this provider (`login`); `nil`: its tokens are accepted, nobody signs in through it.
    public var login: ProviderLoginSettings?
    /// Whether its access tokens carry `typ: at+jwt` (RFC 9068), so that a token of any other `typ`
    /// is refused (`access_token_type: at+jwt`); `false`: any `typ`, or none.
    public var requiresAccessTokenType = false
    /// Whether its access tokens may carry `nonce` (`access_tokens_carry_nonce`): Keycloak up to
    /// version 24 copies the sign-in's `nonce` into them. `false`: a token with `nonce` is an ID token.
    public var accessTokensCarryNonce = false
    /// Whether every address this issuer sends is one it verified (`emails_verified: true`): its
    /// `email` without `email_verified` then counts as verified. `false`: an
    /// address counts only with `email_verified: true`; an explicit `false` is never overridden.
    public var emailsVerified = false
    /// Whether the gateway's authorization server takes this issuer's Identity Assertion JWT
    /// Authorization Grants (`enterprise_authorization: true`): the company's provider decides
    /// which client may act for whom at which MCP server, and no consent page is shown.
    public var enterpriseAuthorization = false

    /// `claims` as this issuer's word makes them: with `emailsVerified`, an `email` without
    /// `email_verified` gets `email_verified: true` (an explicit value is kept, `false` too).
    public func vouchingForEmail(_ claims: JSONObject) -> JSONObject {
        guard emailsVerified, claims["email"] != nil, claims["email_verified"] == nil else { return claims }
        var vouched = claims
        vouched["email_verified"] = .bool(true)
        return vouched
    }

    /// The keys an entry may set.
    public static let settingNames: Set<String> = [
        "issuer", "jwks_url", "audiences", "algorithms", "tenant", "tenant_claim", "tenants", "subject_claim", "secret_file",
        "refresh_cooldown_seconds", "max_stale_seconds", "ca_file", "max_token_lifetime_seconds", "login", "access_token_type",
        "access_tokens_carry_nonce", "emails_verified", "enterprise_authorization",
    ]

    public init(issuer: String, keySource: KeySource, audiences: [String], algorithms: [JWSAlgorithm]? = nil, tenant: Tenant) {
        self.issuer = issuer
        self.keySource = keySource
        self.audiences = audiences
        self.algorithms = algorithms
        self.tenant = tenant
    }

    /// The discovery document's URL.
    public var discoveryURL: String {
        var base = Substring(issuer)
        while base.hasSuffix("/") { base = base.dropLast() }
        return base + "/.well-known/openid-configuration"
    }

    /// Reads and checks one entry.
    ///
    /// - Throws: `ConfigurationError` naming `trust.issuers[N].KEY`.
    public init(reading entry: ConfigurationMap) throws(ConfigurationError) {
        if let unknown = entry.names.subtracting(Self.settingNames).sorted().first {
            throw entry.problem(unknown, "is not a setting of a trusted issuer (known: \(Self.settingNames.sorted().joined(separator: ", ")))")
        }
        guard let issuer = try entry.string("issuer") else { throw entry.problem("issuer", "is required: the exact iss of the provider's tokens") }
        guard let issuerURL = URL(string: issuer), let scheme = issuerURL.scheme?.lowercased(), ["http", "https"].contains(scheme), issuerURL.host != nil else {
            throw entry.problem("issuer", "must be the provider's issuer URL, such as https://idp.example.com/realms/acme, not \"\(issuer)\"")
        }
        let jwksURL = try entry.string("jwks_url")
        let secretFile = try entry.string("secret_file")
        let source: KeySource
        switch (jwksURL, secretFile) {
        case (let url?, nil):
            guard Self.isFetchable(url) else {
                throw entry.problem("jwks_url", "must be an https:// URL (http:// only to a loopback host), not \"\(url)\"")
            }
            source = .jwks(url: url)
        case (nil, let file?):
            source = .secret(file: file)
        case (nil, nil):
            guard Self.isFetchable(issuer) else {
                throw entry.problem("issuer", "is plain http on a host other than loopback, so its discovery document cannot be fetched; set jwks_url to an https:// URL")
            }
            source = .discovery
        case (_?, _?):
            throw entry.problem("secret_file", "and jwks_url cannot both be set: an issuer's keys come from one place")
        }
        guard let audiences = try entry.strings("audiences"), !audiences.isEmpty, !audiences.contains(where: \.isEmpty) else {
            throw entry.problem("audiences", "is required: the aud values this gateway accepts from this issuer, such as [portcullis-api]")
        }
        var algorithms: [JWSAlgorithm]?
        if let names = try entry.strings("algorithms") {
            guard !names.isEmpty else { throw entry.problem("algorithms", "must list at least one algorithm, or be left out") }
            algorithms = try names.map { name throws(ConfigurationError) in
                guard let algorithm = JWSAlgorithm(rawValue: name) else {
                    throw entry.problem("algorithms", "lists \"\(name)\", which is not a JWS algorithm Portcullis verifies (\(JWSAlgorithm.allCases.map(\.rawValue).joined(separator: ", ")); never none)")
                }
                return algorithm
            }
        }
        if case .secret = source {
            let chosen = algorithms ?? [.hs256]
            guard chosen.allSatisfy({ $0.family == .hmac }) else {
                throw entry.problem("algorithms", "must be HMAC algorithms (HS256, HS384, HS512) with secret_file")
            }
            algorithms = chosen
        } else if let chosen = algorithms, chosen.contains(where: { $0.family == .hmac }) {
            throw entry.problem("algorithms", "lists an HMAC algorithm, which is accepted only with a shared secret (secret_file), never from a JWKS")
        }
        let tenant: Tenant
        switch (try entry.string("tenant"), try entry.string("tenant_claim")) {
        case (let fixed?, nil): tenant = .fixed(fixed)
        case (nil, let claim?):
            guard let tenants = try entry.strings("tenants"), !tenants.isEmpty else {
                throw entry.problem(
                    "tenants", "is required with tenant_claim: list the tenants this issuer's tokens may name, so that no issuer's users can name another's tenant")
            }
            if let bad = tenants.first(where: { !IssuerKeys.isTenantName($0) }) {
                throw entry.problem("tenants", "lists \"\(bad)\", which is not a tenant name (1-64 letters, digits or . _ @ + -)")
            }
            tenant = .claim(claim, tenants: Set(tenants))
        case (nil, nil): throw entry.problem("tenant", "or tenant_claim is required: the tenant this issuer's users belong to, or the claim naming it")
        case (_?, _?): throw entry.problem("tenant_claim", "and tenant cannot both be set")
        }
        if case .fixed = tenant, try entry.strings("tenants") != nil {
            throw entry.problem("tenants", "goes with tenant_claim only; with a fixed tenant there is nothing to choose from")
        }
        self.init(issuer: issuer, keySource: source, audiences: audiences, algorithms: algorithms, tenant: tenant)
        if let claim = try entry.string("subject_claim") { subjectClaim = claim }
        if let value = try entry.int("refresh_cooldown_seconds", in: 1...3_600) { refreshCooldown = Double(value) }
        if let value = try entry.int("max_stale_seconds", in: 60...(30 * 86_400)) { maximumStaleness = Double(value) }
        if let value = try entry.int("max_token_lifetime_seconds", in: 60...(7 * 86_400)) { maximumTokenLifetime = Double(value) }
        if let value = try entry.bool("emails_verified") { emailsVerified = value }
        if let value = try entry.bool("enterprise_authorization") { enterpriseAuthorization = value }
        if let file = try entry.string("ca_file") {
            guard FileManager.default.isReadableFile(atPath: file) else { throw entry.problem("ca_file", "names \(file), which cannot be read") }
            caFile = file
        }
        if let map = try entry.map("login") {
            guard source == .discovery else {
                throw entry.problem(
                    "login", "needs OIDC discovery (the authorization and token endpoints come from the issuer's discovery document); remove jwks_url and secret_file")
            }
            let settings = try ProviderLoginSettings(reading: map)
            // The sign-in's ID tokens carry aud = client_id: listed here, one would pass as an access token.
            if audiences.contains(settings.clientID) {
                throw entry.problem(
                    "audiences",
                    "lists \"\(settings.clientID)\", the client_id of this issuer's login, which every ID token it issues to the gateway carries as aud; list the audience of its access tokens instead (an API identifier)"
                )
            }
            // A user signed in through a provider is keyed by sub, the one claim OpenID Connect keeps stable
            // (an email may change hands), and the one a back-channel logout token names.
            if subjectClaim != "sub" {
                throw entry.problem("subject_claim", "must be sub (or left out) on an issuer with login: users who sign in are keyed by sub, which the provider keeps stable")
            }
            login = settings
        }
        if let type = try entry.string("access_token_type") {
            guard ["at+jwt", "application/at+jwt"].contains(type.lowercased()) else {
                throw entry.problem("access_token_type", "must be at+jwt (RFC 9068), or be left out to accept any typ, not \"\(type)\"")
            }
            requiresAccessTokenType = true
        }
        if let value = try entry.bool("access_tokens_carry_nonce") { accessTokensCarryNonce = value }
    }

    /// An `https://` URL, or `http://` to a loopback host (for tests on one machine).
    public static func isFetchable(_ text: String) -> Bool {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else { return false }
        if scheme == "https" { return true }
        return scheme == "http" && LoopbackHost.contains(host)
    }
}
