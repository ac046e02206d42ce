import EdgeHTTP
import HTTPTypes
import Hummingbird

/// The sign-out control on the gateway's signed-in pages (the agents page, the consent page, a
/// policy's refusal), and its own page at `GET /.portcullis/sign_out`: what signing out ends, and a
/// button that posts the sign-out. A GET never signs out; the POST stays same-origin only.
enum SignOutControl {
    static let path = "/.portcullis/sign_out"
    /// Where a sign-out from the gateway's own pages lands: the page that says the browser is signed out.
    static let signedOutTarget = path

    /// What a page's control says and does for one person's session (`BrowserSessionRoutes.signOutControl`).
    struct Shape {
        /// How many agents hold access through the person's consents.
        var agents: Int
        /// The provider they are signed out at too (its display name).
        var provider: String?
        /// Where the browser goes after signing out.
        var returnTo: String
        /// The origins the sign-out's redirects reach, beyond the page's own.
        var formTargets: [String]
    }

    /// A form whose button signs out, then sends the browser to `rd` (checked when the page was made).
    static func form(rd: String, label: String = "Sign out") -> String {
        """
        <form method="post" action="\(RefusalPage.escaped(path + "?rd=" + BrowserSessionRoutes.queryEncoded(rd)))">
        <button type="submit" id="sign-out">\(RefusalPage.escaped(label))</button>
        </form>
        """
    }

    /// A page's `Content-Security-Policy` with the control's redirects allowed: CSP3's
    /// `form-action` holds a form's whole redirect chain, and the sign-out's goes to the provider's
    /// end-session page, then to `rd`.
    static func policy(formTargets: [String]) -> String {
        let targets = formTargets.isEmpty ? "" : " " + formTargets.joined(separator: " ")
        return "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'\(targets); frame-ancestors 'none'"
    }

    /// What signing out ends, in sentences for the pages that offer it.
    ///
    /// An agent's access hangs on the sign-in it was authorized through: signing out ends those,
    /// and an agent authorized while signed in elsewhere (another browser) keeps its own.
    static func consequences(agents: Int, provider: String?) -> String {
        let agentsPart =
            agents == 0
            ? ""
            : " It ends the access of every agent you authorized while signed in here: their tokens and open streams end at once, and each must be authorized again."
                + " Agents you authorized from another sign-in keep theirs; revoke those on the agents page."
        let providerPart = provider.map { " You are signed out at \($0) too." } ?? ""
        return "Signing out ends this browser's session everywhere." + agentsPart + providerPart
    }

    /// `GET /.portcullis/sign_out` for a signed-in browser: who is signed in, what signing out ends,
    /// the button, and the agents page for withdrawing one agent instead.
    static func confirmation(person: String, _ shape: Shape) -> Response {
        let instead = shape.agents == 0 ? "" : "<p>To withdraw one agent's access and stay signed in, use <a href=\"\(AgentAccessPage.path)\">the agents page</a>.</p>"
        var response = SignInPages.response(
            .ok, title: "Sign out?",
            body: """
                <p>Signed in as <strong>\(RefusalPage.escaped(person))</strong>.</p>
                <p>\(RefusalPage.escaped(consequences(agents: shape.agents, provider: shape.provider)))</p>
                \(form(rd: shape.returnTo))
                \(instead)
                """)
        response.headers[.contentSecurityPolicy] = policy(formTargets: shape.formTargets)
        return response
    }

    /// `GET /.portcullis/sign_out` without a session: it says so, with the way back in.
    static func signedOut(rd: String) -> Response {
        let back = rd == signedOutTarget ? "/" : rd
        return SignInPages.response(
            .ok, title: "Signed out",
            body: """
                <p>This browser is not signed in to the gateway.</p>
                <p><a href="/.portcullis/sign_in?rd=\(RefusalPage.escaped(BrowserSessionRoutes.queryEncoded(back)))">Sign in</a></p>
                """)
    }
}
