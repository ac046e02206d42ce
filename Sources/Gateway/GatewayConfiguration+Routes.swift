import ConfigurationReading
import ConnectedAccounts
import DataPlane
import Foundation
import MCPResource
import TrafficCop
import TrustedIssuers

extension GatewayConfiguration {
    /// The host of the public URL, lower case: where the API, the sign-in and the callback are served.
    public var publicHost: String? {
        URL(string: effectivePublicURL)?.host?.lowercased()
    }

    /// Checks `routes` as a whole against this gateway's public host and `cookie_domain`, at
    /// start and at every reload (neither of those two changes without a restart).
    ///
    /// - Throws: `ConfigurationError` naming `gateway.routes[N]` for an `auth: browser` route
    ///   while the public URL is plain http off loopback, two routes serving the same
    ///   host and prefix, a route host that is neither the public host nor under `cookie_domain`
    ///   (at a dot: `example.com` never covers `badexample.com`), a route on the public host
    ///   over one of the gateway's own paths, or two routes, one of them WebDAV, that reach one
    ///   upstream folder at different paths (`UpstreamNamespace`).
    func checkRoutes(_ routes: [ProxyRoute]) throws(ConfigurationError) {
        if let index = routes.firstIndex(where: \.acceptsSessionCookie), !servesBrowsersOverHTTPS, !(publicHost.map(LoopbackHost.contains) ?? false) {
            throw ConfigurationError(
                fileKey: "gateway.routes[\(index)].auth",
                "is browser while gateway.public_url (\(effectivePublicURL)) is plain http on a host that is not loopback: the session cookie would travel in the clear; serve https (gateway.tls, or a TLS proxy in front and an https public_url)")
        }
        // Each check below looks up what it compares (a set of hosts and prefixes, the routes on one
        // server), so that checking 10,000 routes takes a moment, not the square of their number.
        var served: [ServedPrefix: Int] = [:]
        served.reserveCapacity(routes.count)
        let sharedFolders = UpstreamNamespace.sharedFolders(in: routes)
        for (index, route) in routes.enumerated() {
            let key = "gateway.routes[\(index)]"
            if let problem = route.problem { throw ConfigurationError(fileKey: key, problem) }
            let servedPrefix = ServedPrefix(route)
            if let earlier = served[servedPrefix] {
                throw ConfigurationError(
                    fileKey: key,
                    "serves \(route.host.map { "host \($0), " } ?? "")prefix \(route.prefix) as an earlier route (\(routes[earlier].upstream)) does; give each upstream a prefix or host of its own")
            }
            served[servedPrefix] = index
            if let (earlierIndex, folder) = sharedFolders[index] {
                let earlier = routes[earlierIndex]
                throw ConfigurationError(
                    fileKey: key,
                    "reaches the upstream folder \(folder) that the route with prefix \(earlier.prefix) reaches too, at another path: a WebDAV route acts on folders, so a caller admitted on one would reach the other's files past its policy; give each route a folder of its own upstream, or map the outer route so that the inner folder is reached at the inner route's prefix")
            }
            guard let host = route.host else { continue }
            if let publicHost, host.matches(publicHost[...]) {
                // On the public host (named, or covered by a wildcard) the gateway's own paths stay the gateway's: only a catch-all `/` may cover them.
                if !route.pathPrefix.isEmpty, let reserved = ReservedPaths.overlap(with: route.pathPrefix) {
                    throw ConfigurationError(
                        fileKey: key + ".prefix",
                        "is \(route.prefix) on \(host), which serves the public host \(publicHost), and overlaps the gateway's own \(reserved) there; pick a prefix outside \(ReservedPaths.prefixes.joined(separator: ", ")), or /")
                }
                if case .exact = host { continue }
            }
            guard let cookieDomain, RouteHost.isUnder(host.domain, domain: cookieDomain) else {
                let under = cookieDomain.map { "lie under gateway.cookie_domain (\($0))" } ?? "lie under gateway.cookie_domain, which is not set"
                throw ConfigurationError(
                    fileKey: key + ".host",
                    "is \(host), which must be the public host (\(publicHost ?? "gateway.public_url's host")) or \(under): a browser signed in on the public host carries its session there only then")
            }
        }
    }

    /// `routes` with each MCP route's resource made from this gateway's public URL: its canonical
    /// URL is the public URL's scheme and authority (the route's host instead, when it has one)
    /// and its prefix. Done at start and at every reload, against the running public URL, which
    /// changes only on a restart.
    ///
    /// - Throws: `ConfigurationError` naming `gateway.routes[N].mcp` when the public URL is no
    ///   absolute http(s) URL.
    func resolvingMCPResources(_ routes: [ProxyRoute]) throws(ConfigurationError) -> [ProxyRoute] {
        var resolved = routes
        for index in resolved.indices where resolved[index].servesMCP {
            let route = resolved[index]
            let host: String? = if case .exact(let name)? = route.host { name } else { nil }
            guard let resource = MCPResource(
                publicURL: effectivePublicURL, host: host, pathPrefix: route.pathPrefix, scopes: route.policy?.scopes ?? [],
                ruleScopes: route.mcpPolicy?.ruleScopes ?? [], name: route.mcpName, scopeDescriptions: route.mcpScopeDescriptions)
            else {
                throw ConfigurationError(
                    fileKey: "gateway.routes[\(index)].mcp",
                    "needs gateway.public_url to be an absolute http(s) URL (\(effectivePublicURL) is not): an MCP server's canonical URL is made from it")
            }
            resolved[index].mcp = resource
        }
        return resolved
    }

    /// Checks that no MCP route's canonical URL is an audience the gateway takes elsewhere:
    /// `gateway.audience` (its API tokens) or a trusted issuer's `audiences`. A token whose `aud`
    /// is only the MCP server's would otherwise pass as an API token too. (A provider token for an
    /// MCP server names the server beside one of its issuer's audiences.)
    /// Checks each route's `upstream_credential` names a configured connection, or a provider people sign in through.
    func checkUpstreamCredentials() throws(ConfigurationError) {
        for (index, route) in routes.enumerated() {
            if case .exchange(let target)? = route.upstreamCredential {
                guard trust.issuers.contains(where: { $0.issuer == target.issuer && $0.login != nil }) else {
                    let known = trust.issuers.filter { $0.login != nil }.map(\.issuer)
                    throw ConfigurationError(
                        fileKey: "gateway.routes[\(index)].upstream_credential.exchange.issuer",
                        "names \(target.issuer), which is not a trusted issuer people sign in through (\(known.isEmpty ? "no trust.issuers entry has login" : "known: " + known.joined(separator: ", "))): the exchange presents the token of the person's sign-in there")
                }
                continue
            }
            guard case .connection(let name)? = route.upstreamCredential else { continue }
            guard connections.connection(named: name) != nil else {
                let known = connections.connections.map(\.name)
                throw ConfigurationError(
                    fileKey: "gateway.routes[\(index)].upstream_credential.connection",
                    "names \(name), which is not a connection (\(known.isEmpty ? "none is configured under connections" : "known: " + known.joined(separator: ", ")))")
            }
        }
    }

    func checkMCPAudiences() throws(ConfigurationError) {
        for (index, route) in routes.enumerated() {
            guard let resource = route.mcp?.identifier else { continue }
            if resource == audience {
                throw ConfigurationError(
                    fileKey: "gateway.routes[\(index)].mcp",
                    "names \(resource), which is gateway.audience too: the gateway's API tokens would pass as this MCP server's; give the route another prefix or the gateway another audience")
            }
            if let issuer = trust.issuers.firstIndex(where: { $0.audiences.contains(resource) }) {
                throw ConfigurationError(
                    fileKey: "trust.issuers[\(issuer)].audiences",
                    "lists \(resource), gateway.routes[\(index)]'s MCP server: its tokens would be taken everywhere the issuer's are; leave it out (a provider token for the server names it beside one of these audiences)")
            }
        }
    }

    /// Checks each route's `require.issuers` against `trust.issuers`: an issuer that is neither
    /// configured there nor `local` could never match, and the route would refuse everyone it meant.
    /// With `require.tenants` beside it and `local` not listed, the tenants those issuers' users
    /// can belong to (each issuer's `tenant`, or the `tenants` its `tenant_claim` may name) must
    /// meet the route's: if none does, the rule could never match either.
    func checkRouteIssuers() throws(ConfigurationError) {
        let known = Set(trust.issuers.map(\.issuer)).union([RoutePolicy.localIssuer])
        for (index, route) in routes.enumerated() {
            guard let issuers = route.policy?.issuers else { continue }
            if let unknown = issuers.subtracting(known).sorted().first {
                throw ConfigurationError(
                    fileKey: "gateway.routes[\(index)].require.issuers",
                    "names \(unknown), which is neither in trust.issuers nor local: the rule could never match; add the issuer under trust.issuers or correct its name")
            }
            // The gateway's own accounts may be in any tenant: only issuers' fixed sets can rule a tenant out.
            guard !issuers.contains(RoutePolicy.localIssuer), let tenants = route.policy?.tenants else { continue }
            var reachable = Set<String>()
            for issuer in trust.issuers where issuers.contains(issuer.issuer) {
                switch issuer.tenant {
                case .fixed(let tenant): reachable.insert(tenant)
                case .claim(_, let named): reachable.formUnion(named)
                }
            }
            if reachable.isDisjoint(with: tenants) {
                throw ConfigurationError(
                    fileKey: "gateway.routes[\(index)].require.tenants",
                    "lists \(tenants.sorted().joined(separator: ", ")), but the users of require.issuers belong to \(reachable.sorted().joined(separator: ", ")) only (their trust.issuers tenant or tenants): the rule could never match; correct the tenants or the issuers")
            }
        }
    }

    /// Checks each route's assertions' `aud` (its `audience`, or its upstream URL): never the
    /// Runtime's name (`runtime.name`) nor the gateway's own tokens' `aud` (`gateway.audience`). An app given assertions with either could present
    /// them where the gateway's own are taken, as each user who visited it.
    func checkRouteAudiences() throws(ConfigurationError) {
        for (index, route) in routes.enumerated() {
            let audience = route.audience
            guard audience == runtimeName || audience == self.audience else { continue }
            throw ConfigurationError(
                fileKey: "gateway.routes[\(index)]." + (route.configuredAudience == nil ? "upstream" : "audience"),
                "is \(audience), which names the gateway's own (runtime.name or gateway.audience): the app would get assertions the gateway itself takes; name the app instead, such as https://app.example.com")
        }
    }

    /// Checks `gateway.cookie_domain`: a domain of two labels or more that the public host lies under.
    func checkCookieDomain() throws(ConfigurationError) {
        guard let cookieDomain else { return }
        guard RouteHost.isName(cookieDomain), cookieDomain.contains("."), cookieDomain.first?.isNumber != true else {
            throw ConfigurationError(key: "gateway.cookie_domain", "must be a domain of two labels or more, such as example.com (no scheme, port or leading dot), not \"\(cookieDomain)\"")
        }
        guard let publicHost, RouteHost.isUnder(publicHost, domain: cookieDomain) else {
            throw ConfigurationError(
                key: "gateway.cookie_domain",
                "is \(cookieDomain), which gateway.public_url's host (\(publicHost ?? "none")) does not lie under: the sign-in's cookie is set there, so it must")
        }
    }
}
