import ConfigurationReading
import DataPlane
import EdgeHTTP
import Foundation
import HTTPTypes
import MCPPolicy
import TrafficCop

extension ProxyRoute {
    /// The keys of a route map in `gateway.routes`.
    static let settingNames: Set<String> = ["host", "prefix", "upstream", "strip_prefix", "methods", "auth", "sign_in", "require", "identity_headers", "grpc", "protocol", "preserve_host", "audience", "mcp", "upstream_credential"]
    /// The keys of a route's `identity_headers`.
    static let identityFieldKeys: Set<String> = ["user", "email", "groups", "tenant", "username", "subject", "name", "claims"]
    /// The keys of a route's `require`.
    static let requirementNames: Set<String> = ["scopes", "any_of", "tenants", "issuers", "session", "email_domains"]
    /// The keys of a route's `mcp` map.
    static let mcpSettingNames: Set<String> = ["tools", "prompts", "resources", "methods", "max_body_bytes", "name", "scope_descriptions"]
    /// The keys of one rule of `mcp.tools` or `mcp.prompts` (`mcp.resources` says `uri` for `name`).
    static let mcpRuleNames: Set<String> = ["name", "require", "scopes"]
    /// The keys of one `any_of` rule.
    static let claimRuleNames: Set<String> = ["claim", "contains"]

    /// The short form, `PREFIX=URL`: any valid token, every method.
    static func reading(short text: String, key: String) throws(ConfigurationError) -> ProxyRoute {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, parts[0].hasPrefix("/"), let url = URL(string: parts[1]), ["http", "https"].contains(url.scheme ?? "") else {
            throw ConfigurationError(key: key, "must list PREFIX=URL entries such as /api/billing=http://127.0.0.1:9000, or maps with prefix and upstream, not \"\(text)\"")
        }
        let route = ProxyRoute(prefix: parts[0], upstream: parts[1])
        if let problem = route.problem { throw ConfigurationError(key: key, problem) }
        return route
    }

    /// One entry of `gateway.routes` in the file: a string (the short form) or a map.
    ///
    /// - Throws: `ConfigurationError` naming `gateway.routes[N].KEY` for an unknown key, a
    ///   method not forwarded, an `auth` other than `bearer` or `none`, an empty rule, or a bad claim path.
    init(reading entry: ConfigurationMap) throws(ConfigurationError) {
        if let text = entry.scalar {
            self = try Self.reading(short: text, key: entry.key)
            return
        }
        if let unknown = entry.names.subtracting(Self.settingNames).sorted().first {
            throw entry.problem(unknown, "is not a setting of a route (known: \(Self.settingNames.sorted().joined(separator: ", ")))")
        }
        guard let prefix = try entry.string("prefix") else { throw entry.problem("prefix", "is required: the path prefix proxied, such as /api/billing") }
        // Without an upstream, a route is decided by forward-auth for a proxy in front only.
        let upstream = try entry.string("upstream") ?? ""
        if upstream.isEmpty, let proxying = ["strip_prefix", "preserve_host", "protocol", "grpc"].first(where: entry.names.contains) {
            throw entry.problem(
                proxying, "applies to proxying, and this route has no upstream (forward-auth decides it for a proxy in front); give it an upstream or leave \(proxying) out")
        }
        self.init(prefix: prefix, upstream: upstream)
        if let audience = try entry.string("audience") {
            guard audience.utf8.count <= 512, audience.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else {
                throw entry.problem("audience", "must be 1-512 visible ASCII characters without quotes or backslashes (a URL or URN naming the app), not \"\(audience)\"")
            }
            configuredAudience = audience
        }
        if let text = try entry.string("host") {
            guard let host = RouteHost(configured: text) else {
                throw entry.problem("host", "must be a host name such as grafana.example.com, or *.example.com for every name one label below it (no scheme, port or path), not \"\(text)\"")
            }
            self.host = host
        }
        if let (setting, problem) = settingProblem { throw entry.problem(setting, problem) }
        if let grpc = try entry.bool("grpc") { grpcOnly = grpc }
        // A gRPC method's path is the service's own (`/package.Service/Method`): kept whole unless told.
        stripsPrefix = try entry.bool("strip_prefix") ?? !grpcOnly
        preservesHost = try entry.bool("preserve_host") ?? false
        if let name = try entry.string("protocol") {
            guard let value = UpstreamProtocol(rawValue: name) else {
                throw entry.problem("protocol", "must be http1 (the default), h2c (HTTP/2 to an http:// upstream) or h2 (HTTP/2 over TLS to an https:// upstream), not \"\(name)\"")
            }
            let secure = upstream.lowercased().hasPrefix("https://")
            if value == .h2c && secure { throw entry.problem("protocol", "h2c is HTTP/2 over plain TCP: the upstream must be http://; for https:// say h2") }
            if value == .h2 && !secure { throw entry.problem("protocol", "h2 is HTTP/2 over TLS: the upstream must be https://; for http:// say h2c") }
            upstreamProtocol = value
        } else if grpcOnly {
            // gRPC servers speak HTTP/2 only: a gRPC route's upstream is spoken to in HTTP/2 unless told.
            upstreamProtocol = upstream.lowercased().hasPrefix("https://") ? .h2 : .h2c
        }
        if let credential = try entry.map("upstream_credential") {
            if upstream.isEmpty {
                throw entry.problem("upstream_credential", "applies to proxying, and this route has no upstream; give it an upstream or leave upstream_credential out")
            }
            if let unknown = credential.names.subtracting(["connection", "exchange"]).sorted().first {
                throw credential.problem(unknown, "is not a kind of upstream credential (known: connection, exchange)")
            }
            if let exchange = try credential.map("exchange") {
                guard try credential.string("connection") == nil else {
                    throw credential.problem("exchange", "and connection are two ways to get the person's credential: give one")
                }
                upstreamCredential = .exchange(try Self.exchangeTarget(reading: exchange))
            } else {
                guard let name = try credential.string("connection") else {
                    throw credential.problem(
                        "connection", "is required: the name of a connection (connections[].name) whose token the person's requests carry, or give exchange")
                }
                upstreamCredential = .connection(name)
            }
        }
        if let fields = try entry.map("identity_headers") {
            identityFields = try Self.identityFields(reading: fields)
        }
        if let names = try entry.strings("methods") {
            guard !names.isEmpty else { throw entry.problem("methods", "must name at least one method (leave it out for every method)") }
            var methods: [HTTPRequest.Method] = []
            for name in names {
                guard let method = Self.forwardableMethods.first(where: { $0.rawValue == name.uppercased() }) else {
                    let why =
                        ["CONNECT", "TRACE"].contains(name.uppercased())
                        ? "which no route forwards (CONNECT would be a tunnel, TRACE echoes the request back)"
                        : "which a route does not forward (known: \(Self.forwardableMethods.map(\.rawValue).joined(separator: ", ")))"
                    throw entry.problem("methods", "names \(name), \(why)")
                }
                if !methods.contains(method) { methods.append(method) }
            }
            // A route that answers GET answers HEAD too (RFC 9110 9.3.2), as every GET route of the gateway.
            if methods.contains(.get), !methods.contains(.head) { methods.append(.head) }
            self.methods = methods
        }
        switch try entry.string("auth") {
        case nil, "bearer"?: requiresToken = true
        case "browser"?:
            requiresToken = true
            acceptsSessionCookie = true
        case "none"?: requiresToken = false
        case let other?:
            throw entry.problem("auth", "must be bearer (a valid token, the default), browser (the session cookie or a token; a navigation is sent to sign in) or none, not \"\(other)\"")
        }
        if let provider = try entry.string("sign_in") {
            guard acceptsSessionCookie else { throw entry.problem("sign_in", "is set only with auth: browser (where a navigation is sent to sign in)") }
            signIn = provider
        }
        if let require = try entry.map("require") {
            guard requiresToken else { throw entry.problem("require", "cannot be set with auth: none (there is no token to check)") }
            policy = try Self.policy(reading: require)
        }
        // `mcp: true`, or a map of rules (which is `true` with them).
        let mcpRules: ConfigurationMap?
        let servesMCP: Bool
        switch entry.values["mcp"] {
        case .map(let map)?: (mcpRules, servesMCP) = (map, true)
        default: (mcpRules, servesMCP) = (nil, try entry.bool("mcp") == true)
        }
        if servesMCP {
            // An MCP server takes the tokens made for it, by Bearer only: no cookie, no anonymous call.
            guard !upstream.isEmpty else { throw entry.problem("mcp", "needs an upstream: the MCP server's URL, such as http://127.0.0.1:9100/mcp") }
            guard requiresToken, !acceptsSessionCookie else {
                throw entry.problem("mcp", "takes the tokens the authorization server issues for it, by Bearer only: leave auth out (or say bearer)")
            }
            guard !grpcOnly else { throw entry.problem("mcp", "and grpc cannot both be set: an MCP server speaks JSON-RPC over HTTP") }
            if case .wildcard? = host {
                throw entry.problem("mcp", "needs one host: an MCP server's canonical URL names it, so a wildcard host cannot be one")
            }
            self.servesMCP = true
            if let mcpRules {
                mcpPolicy = try Self.mcpPolicy(reading: mcpRules)
                (mcpName, mcpScopeDescriptions) = try Self.mcpWords(reading: mcpRules, scopes: (policy?.scopes ?? []) + (mcpPolicy?.ruleScopes ?? []))
            }
        }
    }

    /// A route's `upstream_credential.exchange`: the provider (a trusted issuer with `login`, checked
    /// with the whole configuration), the audience, the scopes and the form.
    static func exchangeTarget(reading map: ConfigurationMap) throws(ConfigurationError) -> ExchangeTarget {
        if let unknown = map.names.subtracting(["issuer", "audience", "scopes", "form"]).sorted().first {
            throw map.problem(unknown, "is not a setting of a token exchange (known: audience, form, issuer, scopes)")
        }
        guard let issuer = try map.string("issuer"), !issuer.isEmpty else {
            throw map.problem("issuer", "is required: the trusted issuer (trust.issuers[].issuer, with login) the person signs in through, which exchanges their token")
        }
        let form: ExchangeTarget.Form
        if let name = try map.string("form") {
            guard let value = ExchangeTarget.Form(rawValue: name) else {
                throw map.problem("form", "must be rfc8693 (the default) or entra_on_behalf_of, not \"\(name)\"")
            }
            form = value
        } else {
            form = .rfc8693
        }
        let scopes = try map.strings("scopes") ?? []
        for scope in scopes where scope.isEmpty || scope.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F || $0 == 0x22 || $0 == 0x5C }) {
            throw map.problem("scopes", "names \"\(scope)\", which is not a scope (printable ASCII without spaces, quotes or backslashes)")
        }
        let audience = try map.string("audience") ?? ""
        if audience.isEmpty, form == .rfc8693 || scopes.isEmpty {
            throw map.problem("audience", "is required: the audience (RFC 8693 audience; Entra: the API's application ID URI) the exchanged token is for")
        }
        guard !audience.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw map.problem("audience", "must not hold control characters")
        }
        return ExchangeTarget(issuer: issuer, audience: audience, scopes: scopes, form: form)
    }

    /// A route's `identity_headers`: which field carries the user, email, groups and tenant.
    static func identityFields(reading map: ConfigurationMap) throws(ConfigurationError) -> IdentityFieldNames {
        if let unknown = map.names.subtracting(identityFieldKeys).sorted().first {
            throw map.problem(unknown, "is not an identity field (known: \(identityFieldKeys.sorted().joined(separator: ", ")))")
        }
        var names = IdentityFieldNames()
        var seen: Set<String> = []
        func checked(_ name: String, key: String, in map: ConfigurationMap) throws(ConfigurationError) -> String {
            guard IdentityFieldNames.isConfigurable(name) else {
                throw map.problem(
                    key, "must be a header name of letters, digits and -, not one the gateway sets or frames requests by (Host, Authorization, Cookie, X-Forwarded-*, X-Portcullis-*, hop-by-hop), not \"\(name)\"")
            }
            guard seen.insert(HeaderScreen.folded(name)).inserted else { throw map.problem(key, "names \(name), which another identity field of this route names too") }
            return name
        }
        for key in ["user", "email", "groups", "tenant", "username", "subject", "name"] {
            guard let text = try map.string(key) else { continue }
            let name = try checked(text, key: key, in: map)
            switch key {
            case "user": names.user = name
            case "email": names.email = name
            case "groups": names.groups = name
            case "tenant": names.tenant = name
            case "username": names.username = name
            case "subject": names.subject = name
            default: names.name = name
            }
        }
        if let claims = try map.map("claims") {
            guard !claims.names.isEmpty else { throw map.problem("claims", "names no claim; map a claim to a field (claims: {department: X-Department}) or leave claims out") }
            for claim in claims.names.sorted() {
                let path = claim.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
                guard (1...8).contains(path.count), path.allSatisfy({ !$0.isEmpty }) else {
                    throw claims.problem(claim, "must be a claim path of 1-8 names joined by dots, none empty")
                }
                guard let text = try claims.string(claim) else { continue }
                names.claims.append(.init(path: path, field: try checked(text, key: claim, in: claims)))
            }
        }
        guard !names.names.isEmpty else { throw map.problem("user", "is missing: identity_headers names no field; name one (user: X-Remote-User) or leave identity_headers out") }
        return names
    }

    static func policy(reading map: ConfigurationMap) throws(ConfigurationError) -> RoutePolicy {
        if let unknown = map.names.subtracting(requirementNames).sorted().first {
            throw map.problem(unknown, "is not a requirement of a route (known: \(requirementNames.sorted().joined(separator: ", ")))")
        }
        guard !map.names.isEmpty else { throw map.problem("scopes", "is missing: a require with no rule; leave require out for any valid token") }
        var policy = RoutePolicy()
        if let scopes = try map.strings("scopes") {
            guard !scopes.isEmpty, scopes.allSatisfy({ !$0.isEmpty && !$0.contains(" ") && !$0.contains("\"") && !$0.contains("\\") }) else {
                throw map.problem("scopes", "must list one or more scopes, each without spaces or quotes")
            }
            policy.scopes = scopes
        }
        if let rules = try map.maps("any_of") {
            guard !rules.isEmpty else { throw map.problem("any_of", "must list at least one rule") }
            policy.anyOf = try rules.map { rule throws(ConfigurationError) in
                if let unknown = rule.names.subtracting(claimRuleNames).sorted().first {
                    throw rule.problem(unknown, "is not part of a claim rule (known: claim, contains)")
                }
                guard let claim = try rule.string("claim") else { throw rule.problem("claim", "is required: a dotted path into the token's claims, such as realm_access.roles") }
                guard let value = try rule.string("contains") else { throw rule.problem("contains", "is required: the value the claim must hold") }
                guard let compiled = RoutePolicy.ClaimRule(path: claim, contains: value) else {
                    throw rule.problem("claim", "must be 1-8 claim names joined by dots, none empty, not \"\(claim)\"")
                }
                return compiled
            }
        }
        if let tenants = try map.strings("tenants") {
            guard !tenants.isEmpty else { throw map.problem("tenants", "must list at least one tenant") }
            policy.tenants = Set(tenants)
        }
        if let issuers = try map.strings("issuers") {
            guard !issuers.isEmpty else { throw map.problem("issuers", "must list at least one issuer (local for the gateway's own accounts)") }
            policy.issuers = Set(issuers)
        }
        if let domains = try map.strings("email_domains") {
            guard let compiled = EmailDomains(domains) else {
                throw map.problem("email_domains", "must list one or more domains (example.com), each may start with *. for its subdomains, or be * for any verified address")
            }
            policy.emailDomains = compiled
        }
        switch try map.string("session") {
        case nil: break
        case "live"?: policy.requiresLiveSession = true
        case let other?: throw map.problem("session", "must be live (X-Session-Id naming a live session the caller owns), not \"\(other)\"")
        }
        return policy
    }


    /// A route's `mcp` map: its rules per tool, prompt and resource, the methods it passes besides
    /// the standard ones, and the largest body it reads to decide.
    static func mcpPolicy(reading map: ConfigurationMap) throws(ConfigurationError) -> MCPCallPolicy {
        if let unknown = map.names.subtracting(mcpSettingNames).sorted().first {
            throw map.problem(unknown, "is not a setting of an MCP route (known: \(mcpSettingNames.sorted().joined(separator: ", ")))")
        }
        var policy = MCPCallPolicy()
        policy.tools = try mcpRules(map, "tools", naming: "name", what: "tool")
        policy.prompts = try mcpRules(map, "prompts", naming: "name", what: "prompt")
        policy.resources = try mcpRules(map, "resources", naming: "uri", what: "resource")
        for text in try map.strings("methods") ?? [] {
            guard let pattern = NamePattern(text), text.utf8.count <= 256 else { throw map.problem("methods", "must list method names (or globs such as x-acme/*), none empty") }
            if MCPMessage.nameMember(of: text) != nil || MCPCallPolicy.standardMethods.contains(text) {
                throw map.problem("methods", "lists \(text), which the gateway decides already (by tools, prompts or resources, or as a standard method); list only methods beyond those")
            }
            policy.methods.append(pattern)
        }
        if let bytes = try map.int("max_body_bytes", in: 1024...(16 << 20)) { policy.maximumBodyBytes = bytes }
        return policy
    }

    /// A route's `mcp.name` (1-100 characters a page shows as they are) and `mcp.scope_descriptions`
    /// (a sentence of at most 200 characters for each scope the route or its rules use).
    static func mcpWords(reading map: ConfigurationMap, scopes: [String]) throws(ConfigurationError) -> (String?, [String: String]) {
        func readable(_ text: String, _ limit: Int) -> Bool {
            (1...limit).contains(text.count) && !text.unicodeScalars.contains { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }
        }
        let name = try map.string("name")
        if let name, !readable(name, 100) {
            throw map.problem("name", "must be 1-100 characters without control characters: what the consent page calls this MCP server, such as GitHub tools")
        }
        var descriptions: [String: String] = [:]
        if let described = try map.map("scope_descriptions") {
            for scope in described.names.sorted() {
                guard scopes.contains(scope) else {
                    throw described.problem(scope, "describes a scope this route does not use (its require.scopes and its rules' scopes: \(scopes.isEmpty ? "none" : scopes.joined(separator: ", ")))")
                }
                guard let text = try described.string(scope), readable(text, 200) else {
                    throw described.problem(scope, "must be one sentence of 1-200 characters: what a client may do with the scope, as the consent page says it")
                }
                descriptions[scope] = text
            }
        }
        return (name, descriptions)
    }

    /// One kind of `mcp` rules, in order; `nil` when the kind is not listed (every name goes through).
    private static func mcpRules(_ map: ConfigurationMap, _ key: String, naming member: String, what: String) throws(ConfigurationError) -> [MCPRule]? {
        switch map.values[key] {
        case nil: return nil
        case .list(let items)? where items.isEmpty: return []  // `tools: []`: no tool is open
        default: break
        }
        guard let entries = try map.maps(key) else { return nil }
        let known = mcpRuleNames.subtracting(["name"]).union([member])
        var rules: [MCPRule] = []
        for entry in entries {
            if let unknown = entry.names.subtracting(known).sorted().first {
                throw entry.problem(unknown, "is not a setting of an MCP \(what) rule (known: \(known.sorted().joined(separator: ", ")))")
            }
            guard let text = try entry.string(member), let pattern = NamePattern(text), text.utf8.count <= 1024 else {
                throw entry.problem(member, "is required: the \(what)'s \(member), exactly or as a glob whose * stands for any characters")
            }
            var policy: RoutePolicy?
            if let require = try entry.map("require") {
                if require.names.contains("scopes") {
                    throw require.problem(
                        "scopes", "belongs beside require, as the rule's own scopes: a client without them is asked to step up (403 insufficient_scope), not refused")
                }
                policy = try Self.policy(reading: require)
            }
            let scopes = try entry.strings("scopes") ?? []
            for scope in scopes where scope.isEmpty || !scope.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
                throw entry.problem("scopes", "must list scope names of visible ASCII without quotes or backslashes, not \"\(scope)\"")
            }
            if let earlier = rules.first(where: { $0.pattern.covers(pattern) }) {
                throw entry.problem(
                    member, "\(text) can never decide anything: the earlier rule for \(earlier.pattern.text) matches every \(what) it names (the first rule that matches decides); reorder or remove one")
            }
            rules.append(MCPRule(pattern: pattern, policy: policy, scopes: scopes))
        }
        return rules
    }
}
