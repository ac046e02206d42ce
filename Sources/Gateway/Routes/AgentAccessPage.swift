import ConnectedAccounts
import EdgeHTTP
import Foundation
import HTTPTypes
import Hummingbird
import JOSE
import StateSurface

/// `/.portcullis/agents`: the clients (agents) a person let act for them at MCP servers, each
/// with a button that withdraws the access at once.
enum AgentAccessPage {
    static let path = "/.portcullis/agents"
    static let revokePath = "/.portcullis/agents/revoke"

    /// One consent as the page lists it.
    struct Entry {
        let grant: OAuthGrantRecord
        /// The MCP server's name, when the route is still configured.
        let serverName: String?
    }

    /// - Parameters:
    ///   - signOut: what the page's sign-out control says it ends (`SignOutControl.consequences`),
    ///     and where its redirects go (the page's `form-action`).
    /// One connected account as the page lists it.
    struct Connected {
        let account: ConnectedAccountRecord
        /// The connection's display name, when it is still configured.
        let displayName: String?
    }

    /// The page's section of connected accounts, each with a Disconnect button (left out when no
    /// connection is configured).
    static func connectionsSection(_ connected: [Connected], nonce: String) -> String {
        let rows =
            connected.isEmpty
            ? "<p>You have connected no service.</p>"
            : connected.map { entry in
                let account = entry.account
                let scopes = account.scope.isEmpty ? "<em>the service's default</em>" : account.scope.split(separator: " ").map { "<code>\(RefusalPage.escaped(String($0)))</code>" }.joined(separator: " ")
                return """
                    <section class="connection">
                    <h3>\(RefusalPage.escaped(entry.displayName ?? account.connection))</h3>
                    <p>Scopes: \(scopes)</p>
                    <p>Connected <time>\(timestamp(account.createdAt))</time>; last used <time>\(account.lastUsedAt.map(timestamp) ?? "never")</time></p>
                    <form method="post" action="\(RefusalPage.escaped(ConnectRoutes.prefix + "/" + account.connection + "/disconnect"))">
                    <input type="hidden" name="nonce" value="\(RefusalPage.escaped(nonce))">
                    <button type="submit">Disconnect</button>
                    </form>
                    </section>
                    """
            }.joined(separator: "\n")
        return "<h2>Connected services</h2>\n<p>Tools you use through this gateway act as you at these services. Disconnecting one forgets its tokens at once, and tells the service where it can.</p>\n" + rows
    }

    static func page(
        _ entries: [Entry], person: String, nonce: String, notice: String? = nil, signOut: SignOutControl.Shape, connections: String = ""
    ) -> Response {
        let rows: String
        if entries.isEmpty {
            rows = "<p>No agent holds access for you.</p>"
        } else {
            rows = entries.map { entry in
                let grant = entry.grant
                let host = grant.clientID.hasPrefix("https://") ? URL(string: grant.clientID)?.host.map { " <small>(described by \(RefusalPage.escaped($0)))</small>" } ?? "" : ""
                let scopes = grant.scope.isEmpty ? "<em>no scope</em>" : grant.scope.split(separator: " ").map { "<code>\(RefusalPage.escaped(String($0)))</code>" }.joined(separator: " ")
                let server = entry.serverName.map { "\(RefusalPage.escaped($0)) <small>(\(RefusalPage.escaped(grant.resource)))</small>" } ?? RefusalPage.escaped(grant.resource)
                return """
                    <section class="agent">
                    <h2>\(RefusalPage.escaped(grant.clientName))\(host)</h2>
                    <p>Client <code>\(RefusalPage.escaped(grant.clientID))</code> at the MCP server \(server)</p>
                    <p>Scopes: \(scopes)</p>
                    <p>Granted <time>\(timestamp(grant.createdAt))</time>\(grant.byAssertion ? " by your organisation's identity provider" : ""); last used <time>\(grant.lastUsedAt.map(timestamp) ?? "never")</time></p>
                    <form method="post" action="\(revokePath)">
                    <input type="hidden" name="client_id" value="\(RefusalPage.escaped(grant.clientID))">
                    <input type="hidden" name="resource" value="\(RefusalPage.escaped(grant.resource))">
                    <input type="hidden" name="nonce" value="\(RefusalPage.escaped(nonce))">
                    <button type="submit">Revoke</button>
                    </form>
                    </section>
                    """
            }.joined(separator: "\n")
        }
        let message = notice.map { "<p role=\"status\">\(RefusalPage.escaped($0))</p>" } ?? ""
        var response = SignInPages.response(
            .ok, title: "Agents with access",
            body: """
                <p>Signed in as <strong>\(RefusalPage.escaped(person))</strong>. These agents may call MCP servers for you.
                Revoking one ends its tokens and its open streams at once; it must ask you again.</p>
                \(message)
                \(rows)
                \(connections)
                <h2>Sign out</h2>
                <p>\(RefusalPage.escaped(SignOutControl.consequences(agents: signOut.agents, provider: signOut.provider))) To stop one agent and stay signed in, revoke it above instead.</p>
                \(SignOutControl.form(rd: signOut.returnTo))
                """)
        response.headers[.contentSecurityPolicy] = SignOutControl.policy(formTargets: signOut.formTargets)
        return response
    }

    /// `2026-11-27 14:03 UTC`.
    static func timestamp(_ seconds: Double) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(format: "%04d-%02d-%02d %02d:%02d UTC", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min))
    }
}

extension AuthorizationServerRoutes {
    func registerAgentAccess(on router: Router<GatewayRequestContext>) {
        router.get(RouterPath(AgentAccessPage.path)) { request, context in try await agents(request, context) }
        router.post(RouterPath(AgentAccessPage.revokePath)) { request, context in try await revokeAgent(request, context) }
    }

    /// The page's nonce: bound to the browser session's cookie, as the consent form's is.
    static func agentsNonce(cookieValue: String) throws -> String {
        String(try Digest.sha256Base64URL("portcullis agents\n" + cookieValue).prefix(32))
    }

    /// `GET /.portcullis/agents`: the signed-in person's consents; an unsigned browser signs in first.
    func agents(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        guard let (session, cookieValue) = try await browser.session(request, context) else {
            return Response(
                status: .seeOther, headers: [.location: "/.portcullis/sign_in?rd=" + BrowserSessionRoutes.queryEncoded(AgentAccessPage.path), .cacheControl: "no-store"])
        }
        let person = Self.person(session)
        let grants = try await store.oauthGrants(userID: person.userID).filter { $0.tenantID == person.tenantID }
        let entries = grants.map { AgentAccessPage.Entry(grant: $0, serverName: resource($0.resource)?.name) }
        let who = BrowserSessionRoutes.shownName(session.caller)
        let control = try await browser.signOutControl(for: session, rd: SignOutControl.signedOutTarget)
        let notice: String? =
            switch request.uri.queryParameters.get("done") {
            case "revoked": "Access withdrawn: its tokens are revoked and its open streams ended."
            case "gone": "That access was already withdrawn."
            case "disconnected": "Disconnected: the gateway no longer holds or sends its tokens."
            default: nil
            }
        let nonce = try Self.agentsNonce(cookieValue: cookieValue)
        var connectionsSection = ""
        if !connections.directory.isEmpty {
            let connected = try await connections.accounts(userID: person.userID).filter { $0.tenantID == person.tenantID }.map { account in
                AgentAccessPage.Connected(account: account, displayName: connections.directory.connection(named: account.connection)?.settings.displayName)
            }
            connectionsSection = AgentAccessPage.connectionsSection(connected, nonce: nonce)
        }
        return AgentAccessPage.page(entries, person: who, nonce: nonce, notice: notice, signOut: control, connections: connectionsSection)
    }

    /// `POST /.portcullis/agents/revoke`: withdraws one consent (its refresh and access tokens
    /// revoked, its streams ended on every instance), from the gateway's own page only.
    func revokeAgent(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        guard isFromConsentPage(request) else {
            return Self.errorPage(.forbidden, code: "csrf_refused", message: "access is revoked on the gateway's own page only; open /.portcullis/agents and use its button")
        }
        guard let form = try? await BrowserSessionRoutes.form(request), let clientID = form["client_id"], let resource = form["resource"] else {
            return Self.errorPage(.badRequest, code: "request_invalid", message: "the form could not be read; open /.portcullis/agents again")
        }
        guard let (session, cookieValue) = try await browser.session(request, context) else {
            return Self.errorPage(.unauthorized, code: "not_signed_in", message: "this browser is no longer signed in; sign in and open /.portcullis/agents again")
        }
        guard FormNonce.matches(form["nonce"], try? Self.agentsNonce(cookieValue: cookieValue)) else {
            return Self.errorPage(.forbidden, code: "csrf_refused", message: "this revocation did not come from this browser's own page; open /.portcullis/agents again")
        }
        let person = Self.person(session)
        let removed = try await store.deleteOAuthGrant(userID: person.userID, tenantID: person.tenantID, clientID: clientID, resource: resource, now: tokens.now)
        logger.info("consent withdrawn", metadata: ["user_id": .string(person.userID), "client_id": .string(clientID), "resource": .string(resource)])
        // Back to the page, which says what happened (`done`): a reload never posts again.
        return Response(status: .seeOther, headers: [.location: AgentAccessPage.path + "?done=" + (removed > 0 ? "revoked" : "gone"), .cacheControl: "no-store"])
    }
}
