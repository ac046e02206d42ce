import AuthorizationServer
import EdgeHTTP
import HTTPTypes
import ProviderLogin
import Hummingbird
import SecurityGuard

/// The page where a person lets a client act for them at an MCP server: who asks, for which
/// server, with which scopes. Its form posts the request back with the answer; the page is never
/// framed and posts only to the gateway (and its redirect goes only to the client's `redirect_uri`).
enum ConsentPage {
    /// - Parameter remembered: the scopes this person allowed this client at this server before
    ///   (shown, since the page is asked again where the redirect does not identify the client).
    ///   - returnTo: this authorization's own path and query: its "Not you? Sign out" link comes back
    ///     to it, so that the next person signs in first.
    static func page(
        for request: AuthorizationRequest, parameters: [String: String], person: AuthenticatedCaller, remembered: [String] = [], nonce: String,
        returnTo: String
    ) -> Response {
        let hidden = (parameters.sorted { $0.key < $1.key } + [("consent_nonce", nonce)]).map { name, value in
            "<input type=\"hidden\" name=\"\(RefusalPage.escaped(name))\" value=\"\(RefusalPage.escaped(value))\">"
        }.joined(separator: "\n")
        let described = request.resource.scopeDescriptions
        let scopes =
            request.scopes.isEmpty
            ? "<li><em>no scope</em></li>"
            : request.scopes.map { scope in
                "<li><code>\(RefusalPage.escaped(scope))</code>" + (described[scope].map { ": " + RefusalPage.escaped($0) } ?? "") + "</li>"
            }.joined()
        let who = BrowserSessionRoutes.shownName(person)
        let source: String
        switch request.client.source {
        case .configured: source = "registered by this gateway's operator"
        case .dynamic: source = "registered itself: unverified"
        case .metadataDocument: source = "described by \(RefusalPage.escaped(request.client.metadataHost ?? "its host")): its name is that host's claim"
        }
        var response = SignInPages.response(
            .ok, title: "Allow access?",
            body: """
                <p><strong>\(RefusalPage.escaped(request.client.name))</strong> <small>(\(RefusalPage.escaped(request.client.clientID)), \(source))</small>
                asks to act for <strong>\(RefusalPage.escaped(who))</strong> at the MCP server
                <strong>\(RefusalPage.escaped(request.resource.name))</strong> <small>(\(RefusalPage.escaped(request.resource.identifier)))</small> with:</p>
                <ul>\(scopes)</ul>
                <p>It will be sent back to <code>\(RefusalPage.escaped(request.redirectURI))</code>.</p>
                \(Self.rememberedNote(request, remembered))
                <form method="post" action="\(AuthorizationServerMetadata.consentPath)">
                \(hidden)
                <button type="submit" name="decision" value="allow">Allow</button>
                <button type="submit" name="decision" value="deny">Deny</button>
                </form>
                <p><small>Not \(RefusalPage.escaped(who))? <a href="\(RefusalPage.escaped(SignOutControl.path + "?rd=" + BrowserSessionRoutes.queryEncoded(returnTo)))">Sign out</a> and sign in as yourself.</small></p>
                """)
        // CSP3's form-action holds the form's redirect too: the answer goes to the client's redirect URI.
        let target = formTarget(request.redirectURI).map { " " + $0 } ?? ""
        response.headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'\(target); frame-ancestors 'none'"
        return response
    }

    /// A redirect URI as a CSP source: its origin, or an app's own scheme (`com.example.app:`);
    /// `nil` for anything else, or anything a CSP header could not carry as one source.
    static func formTarget(_ redirectURI: String) -> String? {
        guard RedirectURI.isAcceptable(redirectURI) else { return nil }
        if let origin = ReturnTarget.origin(of: redirectURI) { return origin }
        guard let colon = redirectURI.firstIndex(of: ":") else { return nil }
        return String(redirectURI[...colon])
    }

    /// What the person allowed before, and why they are asked again.
    static func rememberedNote(_ request: AuthorizationRequest, _ remembered: [String]) -> String {
        guard !remembered.isEmpty else { return "" }
        let scopes = remembered.map { "<code>\(RefusalPage.escaped($0))</code>" }.joined(separator: " ")
        let why: String
        if request.prompt.contains("consent") {
            why = "The application asked for this page again."
        } else if request.redirectIdentifiesClient {
            why = "It now asks for more."
        } else {
            why = "You are asked each time, since any program on your computer, or any app, could receive an answer sent to that address: allow only if you just started this in that application."
        }
        return "<p>You allowed it before: \(scopes). \(why)</p>"
    }
}
