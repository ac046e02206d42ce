import DataPlane
import EdgeHTTP
import NIOHTTP1
import SecurityGuard

/// What Envoy is told to do to the original request once it is allowed, so that the upstream sees
/// what the gateway's own proxy would send it: the identity fields set, and every field the
/// client may have forged, and the gateway's credentials, removed.
package struct ExtAuthzUpstreamFields: Sendable, Equatable {
    /// Fields to set on the original request (replacing any of the same name), each with a value.
    package var set: [Field]
    /// Field names to remove from it, lower-cased (Envoy's `headers_to_remove`); never a name in `set`.
    package var remove: [String]

    package struct Field: Sendable, Equatable {
        package let name: String
        package let value: String
    }

    /// The gateway's credentials, never forwarded by its own proxy either.
    static let credentials = ["authorization", "proxy-authorization"]

    /// The fields for `grant`, given the original request's `headers` (as much of it as Envoy sent)
    /// and the identity fields to remove (`ExtAuthzRemovalList`, made once per route table).
    ///
    /// Removed, whether or not Envoy passed the client's copy: every identity field the gateway
    /// knows (`HeaderScreen.identityHeaders`, `trustedByApps`, every route's `identity_headers`,
    /// the assertion and `X-Auth-Request-*` fields) in its `-`, `_` and `.` spellings, but the exact
    /// names the gateway sets with a value; `Authorization` and `Proxy-Authorization`. Removed when
    /// the client sent it: any other field whose name folds (`HeaderScreen.folded`: case, `_`, `.`)
    /// to an identity field (`X-Auth_Request-User`). An identity field without a value is removed,
    /// not set empty (Envoy's ext_authz drops a field set to nothing). `Cookie` is set without the
    /// gateway's cookies when it carried them beside the app's, and removed when it held nothing else.
    package init(grant: AccessGrant, headers: HTTPHeaders, removals: ExtAuthzRemovalList) {
        var set: [Field] = []
        set.reserveCapacity(grant.fields.count + 1)
        var setNames: Set<String> = []
        // The app's cookie goes as `Cookie` itself (below), and `Cache-Control` is the answer's own.
        for field in grant.fields where !field.value.isEmpty {
            let name = field.name.lowercased()
            guard name != "cache-control", name != "x-portcullis-app-cookie" else { continue }
            set.append(Field(name: name, value: field.value))
            setNames.insert(name)
        }
        var remove = removals.names.filter { !setNames.contains($0) }
        var added: Set<String> = []
        func add(_ name: String) {
            if !setNames.contains(name), !removals.nameSet.contains(name), added.insert(name).inserted { remove.append(name) }
        }
        for name in Self.credentials { add(name) }
        for (name, _) in headers {
            let lowered = name.lowercased()
            let folded = HeaderScreen.folded(lowered)
            guard lowered != folded || !ExtAuthzRemovalList.setByEnvoy.contains(lowered) else { continue }
            if HeaderScreen.identityPrefixes.contains(where: { folded.hasPrefix($0) }) || removals.identity.contains(folded) { add(lowered) }
        }
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

    /// Whether the removal list is past what Envoy takes in one field (its headers are bounded at
    /// 60 KiB): a client that sent hundreds of identity-like fields is refused (431), never let
    /// through on an answer Envoy cannot read.
    package var isOversized: Bool {
        remove.reduce(0) { $0 + $1.utf8.count + 1 } > Self.maximumRemovalBytes
    }

    static let maximumRemovalBytes = 16_384

    /// The refusal for `isOversized`.
    package static let tooManyFields = GatewayError(
        .requestHeaderFieldsTooLarge, "identity_fields_too_many", "the request carries too many identity-like header fields to remove them all; send fewer")
}
