import HTTPTypes
import RuntimeAPI
import SecurityGuard

/// The fields of forward-auth's 200, for the proxy in front to pass on: made here for both ways
/// a decision is made (the event loop's and Hummingbird's), so they answer alike.
package enum ForwardAuthAnswer {
    /// The assertion and every identity field, in oauth2-proxy's names (so that existing proxy
    /// configurations carry over), each present, empty when there is no value; then the route's
    /// own identity fields (`identity_headers`), each present too, replacing a field of the same name.
    ///
    /// Every field is present because a proxy that copies a field the answer lacks may send its
    /// own placeholder, or the client's copy, upstream instead (Caddy 2.6).
    package static func fields(assertion: String, caller: AuthenticatedCaller?, route: DataPlane.Route?, appCookie: String) -> [(name: String, value: String)] {
        let values = caller.map(IdentityFieldValues.init) ?? IdentityFieldValues()
        var fields: [(name: String, value: String)] = [
            ("Cache-Control", "no-store"), (AssertionHeader.name, assertion), ("X-Auth-Request-User", values.user),
            ("X-Auth-Request-Tenant", values.tenant), ("X-Auth-Request-Email", values.email), ("X-Auth-Request-Groups", values.groups),
            // oauth2-proxy's name for `preferred_username`.
            ("X-Auth-Request-Preferred-Username", values.username),
            // The browser's cookies without the gateway's, for the proxy to send the app.
            ("X-Portcullis-App-Cookie", appCookie),
        ]
        func set(_ name: String, _ value: String) {
            guard HTTPField.Name(name) != nil else { return }
            if let index = fields.firstIndex(where: { $0.name.lowercased() == name.lowercased() }) {
                fields[index].value = value
            } else {
                fields.append((name, value))
            }
        }
        if let names = route?.identityFields {
            for name in names.names { set(name, "") }
            if let caller { names.forEach(of: caller) { name, value in set(name, value) } }
        }
        return fields
    }

    /// The request's `Cookie` values without the gateway's cookies (the gateway's own parser, every
    /// one of them in any spelling), for the proxy to send the app instead of the browser's: a
    /// proxy's pattern would miss a second copy or a flow cookie. Empty when nothing is left.
    package static func appCookie(_ values: [String]) -> String {
        guard !values.isEmpty else { return "" }
        return SessionCookie.withoutGatewayCookies(values.joined(separator: "; ")) ?? ""
    }
}
