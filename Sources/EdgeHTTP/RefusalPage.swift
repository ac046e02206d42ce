/// The page a browser is shown when the gateway refuses a signed-in user (a policy's 403) or a
/// sign-in fails: plain HTML of the gateway's own, escaped, with nothing to load.
package enum RefusalPage {
    /// A whole page with `title` and `message` (both escaped).
    ///
    /// - Parameter signOutLink: for a signed-in person refused, the gateway's sign-out page (an
    ///   address the gateway made), so that they can sign in as someone else.
    package static func html(title: String, message: String, signOutLink: String? = nil) -> String {
        let signOut = signOutLink.map { "<p><a href=\"\(escaped($0))\">Sign out</a> to sign in as someone else.</p>" } ?? ""
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
            <title>\(escaped(title))</title>
            <style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#222}h1{font-size:1.4em}</style>
            </head><body><h1>\(escaped(title))</h1><p>\(escaped(message))</p>\(signOut)</body></html>

            """
    }

    /// `text` with `&`, `<`, `>`, `"` and `'` as character references.
    package static func escaped(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        // By scalar, never by Character: a `"` or `>` followed by a combining mark is one grapheme
        // cluster that equals neither, yet the browser's HTML parser reads the quote alone.
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
