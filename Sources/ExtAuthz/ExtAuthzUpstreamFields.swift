import DataPlane
import EdgeHTTP
import NIOHTTP1
import SecurityGuard

/// What Envoy is told to do to the original request once it is allowed, so that the upstream sees
/// what the gateway's own proxy would send it: the identity fields set, and every field the
/// client may have forged, the gateway's credentials, removed.
package struct ExtAuthzUpstreamFields: Sendable, Equatable {
    /// Fields to set on the original request (replacing any of the same name).
    package var set: [Field]
    /// Field names to remove from it, lower-cased (Envoy's `headers_to_remove`).
    package var remove: [String]

    package struct Field: Sendable, Equatable {
        package let name: String
        package let value: String
    }

    /// Identity fields oauth2-proxy, Pomerium and common apps trust, beyond the families the gateway
    /// answers with (`x-auth-request-*`, `x-portcullis-*`): a client's copy never reaches the upstream.
    /// Envoy's own fields (`x-forwarded-for`, `x-request-id`, ...) are not among them: Envoy sets those.
    static let trustedByApps: Set<String> = [
        "x-forwarded-user", "x-forwarded-email", "x-forwarded-groups", "x-forwarded-preferred-username", "x-forwarded-access-token",
        "x-user", "x-user-id", "x-tenant", "x-tenant-id", "x-remote-user", "remote-user", "x-authenticated-user", "x-authenticated-userid",
        "x-auth-user", "x-original-user", "x-subject", "x-scope", "x-session-id", "x-pomerium-jwt-assertion", "x-pomerium-claim-email",
    ]

    /// The fields for `grant`, given the original request's `headers` (as much of it as Envoy sent)
    /// and every route's configured identity field names (`identity_headers`, folded).
    ///
    /// Removed: each field the client sent whose name folds (`HeaderScreen.folded`: case, `_`, `.`)
    /// to an identity field but is not spelled as the gateway sets it; each field the gateway sets,
    /// spelled with `_` or `.` (Envoy may not have sent those); `Authorization` when it carried the
    /// gateway's token (the upstream trusts the assertion, as behind the gateway's own proxy); and
    /// `Cookie` when it held nothing but the gateway's cookies (else it is set without them).
    package init(grant: AccessGrant, headers: HTTPHeaders, identityFieldNames: Set<String>) {
        var set: [Field] = []
        set.reserveCapacity(grant.fields.count + 1)
        var setNames: Set<String> = []
        // The app's cookie goes as `Cookie` itself (below), and `Cache-Control` is the answer's own.
        for field in grant.fields where !["cache-control", "x-portcullis-app-cookie"].contains(field.name.lowercased()) {
            set.append(Field(name: field.name.lowercased(), value: field.value))
            setNames.insert(field.name.lowercased())
        }
        var remove: [String] = []
        func add(_ name: String) {
            if !setNames.contains(name), !remove.contains(name) { remove.append(name) }
        }
        for name in setNames.sorted() {
            add(name.replacingOccurrences(of: "-", with: "_"))
            add(name.replacingOccurrences(of: "-", with: "."))
        }
        for (name, _) in headers {
            let lowered = name.lowercased()
            let folded = HeaderScreen.folded(lowered)
            let identity =
                HeaderScreen.identityPrefixes.contains { folded.hasPrefix($0) } || Self.trustedByApps.contains(folded) || identityFieldNames.contains(folded)
                || setNames.contains(folded)
            if identity { add(lowered) }
        }
        if grant.caller != nil, headers["authorization"].contains(where: { $0.lowercased().hasPrefix("bearer ") }) { add("authorization") }
        let cookies = headers["cookie"]
        if !cookies.isEmpty {
            let appCookie = ForwardAuthAnswer.appCookie(cookies)
            if appCookie != cookies.joined(separator: "; ") {
                if appCookie.isEmpty {
                    add("cookie")
                } else {
                    set.append(Field(name: "cookie", value: appCookie))
                }
            }
        }
        self.set = set
        self.remove = remove
    }
}
