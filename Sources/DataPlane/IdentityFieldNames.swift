import EdgeHTTP
import JOSE
import SecurityGuard

/// The fields a route sends its upstream about the caller besides the signed assertion
/// (`gateway.routes[].identity_headers`), for apps that trust a proxy's user header
/// (Grafana's `X-WEBAUTH-USER`, Radicale's `X-Remote-User`).
///
/// Every name any route configures is stripped from what every client sends, in each
/// spelling a framework folds together (see `HeaderScreen.folded`), whether or not the
/// route serving the request sets it.
package struct IdentityFieldNames: Sendable, Equatable {
    /// The caller's user id (the same value as forward-auth's `X-Auth-Request-User`).
    package var user: String?
    /// The `email` claim, when the token carries one.
    package var email: String?
    /// The `groups` claim's strings, joined with `,`.
    package var groups: String?
    /// The caller's tenant.
    package var tenant: String?

    package init(user: String? = nil, email: String? = nil, groups: String? = nil, tenant: String? = nil) {
        self.user = user
        self.email = email
        self.groups = groups
        self.tenant = tenant
    }

    /// The configured names, in the order they are written upstream.
    package var names: [String] { [user, email, groups, tenant].compactMap { $0 } }

    /// Whether `name` may be configured: an HTTP field name (RFC 9110 token characters) that
    /// the gateway does not own or frame by (`Host`, `Authorization`, hop-by-hop, the
    /// identity fields it sets itself, `Cookie`, `Content-*`).
    package static func isConfigurable(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 128, name.utf8.allSatisfy(isTokenByte) else { return false }
        guard HeaderScreen.verdict(name) != .neverForwarded else { return false }
        let folded = HeaderScreen.folded(name)
        if folded.hasPrefix("x-portcullis-") || folded.hasPrefix("x-forwarded-") || folded.hasPrefix("content-") { return false }
        return !["cookie", "set-cookie", "x-session-id", "x-request-id", "forwarded", "origin"].contains(folded)
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."): true
        default: false
        }
    }
}

/// What a caller's identity fields say: the values forward-auth answers and a route's
/// `identity_headers` carry, each empty when there is none.
package struct IdentityFieldValues: Sendable, Equatable {
    package var user = ""
    package var tenant = ""
    package var email = ""
    package var groups = ""

    package init() {}

    /// The values for `caller`. A claim value that is not printable ASCII of 1-512 bytes (one a
    /// proxy or an app could read another way) is left out, as is a group holding `,` (the separator).
    package init(_ caller: AuthenticatedCaller) {
        user = caller.userID
        tenant = caller.tenantID
        if let claimed = caller.claims["email"]?.stringValue, Self.isFieldSafe(claimed) { email = claimed }
        if case .array(let values)? = caller.claims["groups"] {
            groups = values.compactMap(\.stringValue).filter { Self.isFieldSafe($0) && !$0.contains(",") }.joined(separator: ",")
        }
    }

    /// Whether `value` can be sent as a field value as it is: 1-512 bytes of printable ASCII.
    package static func isFieldSafe(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 512 && value.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }
}
