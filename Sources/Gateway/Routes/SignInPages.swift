import AuthorizationServer
import EdgeHTTP
import HTTPTypes
import Hummingbird
import ProviderLogin

/// The HTML the browser sign-in shows: the gateway's own account form (when no provider is
/// configured), the choice of providers, and a failure. Everything interpolated is escaped; the
/// pages load nothing, may not be framed, and post only to the gateway.
enum SignInPages {
    /// Fields every page carries: nothing cached, nothing loaded, never framed (a sign-in form in
    /// another site's frame is clickjacking), a referrer for the gateway's own origin only.
    ///
    /// `same-origin`, not `no-referrer`: under `no-referrer` a browser posts the account form with
    /// `Origin: null` (Fetch, "serializing a request origin"), which the sign-in's cross-site rule
    /// cannot tell from another site's. The page's address (its `rd`) then goes nowhere but the gateway.
    static let headers: HTTPFields = [
        .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
        .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
        HTTPField.Name("X-Frame-Options")!: "DENY", HTTPField.Name("Referrer-Policy")!: "same-origin",
    ]

    static func response(_ status: HTTPResponse.Status, title: String, body: String) -> Response {
        let page = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
            <title>\(RefusalPage.escaped(title))</title>
            <style>body{font:16px/1.5 system-ui,sans-serif;max-width:28em;margin:4em auto;padding:0 1em;color:#222}
            h1{font-size:1.4em}label{display:block;margin:.8em 0 .2em}input{width:100%;padding:.4em;box-sizing:border-box}
            button{margin-top:1.2em;padding:.5em 1.2em}.error{color:#a00}</style>
            </head><body><h1>\(RefusalPage.escaped(title))</h1>
            \(body)
            </body></html>

            """
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: page)))
    }

    /// The gateway's own account form, posting to `/.portcullis/sign_in` with `rd`.
    ///
    /// `form-action` names `rd`'s origin too: browsers hold a form's redirect to it (the signed-in
    /// browser sent back to the app on its own host), and `rd` was checked before the form was made.
    static func accountForm(rd: String, error: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        let message = error.map { "<p class=\"error\" role=\"alert\">\(RefusalPage.escaped($0))</p>" } ?? ""
        var page = response(
            status, title: "Sign in",
            body: """
                \(message)<form method="post" action="/.portcullis/sign_in">
                <input type="hidden" name="rd" value="\(RefusalPage.escaped(rd))">
                <label for="username">Username</label><input id="username" name="username" autocomplete="username" required autofocus>
                <label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
                <button type="submit">Sign in</button>
                </form>
                """)
        let targets = formTargets(rd: rd)
        if !targets.isEmpty {
            page.headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' \(targets.joined(separator: " ")); frame-ancestors 'none'"
        }
        return page
    }

    /// Where the sign-in form's redirects may end, beyond the gateway: `rd`'s origin (an app on its
    /// own host); for an `rd` that is the authorization endpoint, the client's `redirect_uri`, where
    /// a consent already given sends the browser next (browsers hold a form's whole redirect chain
    /// to `form-action`, and Chromium stopped the second day of every agent there). That endpoint
    /// checks the `redirect_uri` against the client's registration before anything goes to it.
    static func formTargets(rd: String) -> [String] {
        if let origin = ReturnTarget.origin(of: rd) { return [origin] }
        let authorize = AuthorizationServerMetadata.authorizationPath + "?"
        // An https redirect only: a consent remembered is taken without a page for no other (a
        // loopback or app-scheme redirect gets the consent page, the gateway's own).
        guard rd.hasPrefix(authorize), let query = FormEncoding.fields(rd.dropFirst(authorize.utf8.count)), let redirect = query["redirect_uri"],
            redirect.utf8.count > 8, redirect.prefix(8).lowercased() == "https://"
        else { return [] }
        return ConsentPage.formTarget(redirect).map { [$0] } ?? []
    }

    /// The providers to choose from, each a link that starts its sign-in.
    static func providerChoice(_ providers: [(name: String, displayName: String)], rd: String) -> Response {
        let links = providers.map { provider in
            let href = "/.portcullis/sign_in?rd=" + BrowserSessionRoutes.queryEncoded(rd) + "&provider=" + BrowserSessionRoutes.queryEncoded(provider.name)
            return "<li><a href=\"\(RefusalPage.escaped(href))\">\(RefusalPage.escaped(provider.displayName))</a></li>"
        }
        return response(.ok, title: "Sign in", body: "<ul>" + links.joined() + "</ul>")
    }

    /// A sign-in that did not happen: why, and where to start again.
    static func failure(_ status: HTTPResponse.Status, code: String, message: String) -> Response {
        refusal(status, title: "Sign-in failed", code: code, message: message, more: "<p><a href=\"/.portcullis/sign_in\">Sign in again</a></p>")
    }

    /// A page that says why something was refused: the sentence, its code under it and in
    /// `X-Portcullis-Error` (for scripts and tests), then `more` (HTML, already escaped).
    static func refusal(_ status: HTTPResponse.Status, title: String, code: String, message: String, more: String = "") -> Response {
        var response = response(status, title: title, body: "<p>\(RefusalPage.escaped(message))</p><p><small>\(RefusalPage.escaped(code))</small></p>" + more)
        response.headers[HTTPField.Name("X-Portcullis-Error")!] = code
        return response
    }
}
