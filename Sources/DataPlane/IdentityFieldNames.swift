import EdgeHTTP
import JOSE
import SecurityGuard
import TrafficCop

/// The fields a route sends its upstream about the caller besides the signed assertion
/// (`gateway.routes[].identity_headers`), for apps that trust a proxy's user header
/// (Grafana's `X-WEBAUTH-USER`, Radicale's `X-Remote-User`).
///
/// Every name any route configures is stripped from what every client sends, in each
/// spelling a framework folds together (see `HeaderScreen.folded`), whether or not the
/// route serving the request sets it.
package struct IdentityFieldNames: Sendable, Equatable {
    /// The caller's user id (the same value as forward-auth's `X-Auth-Request-User`): the stable key.
    package var user: String?
    /// The `email` claim, when the token carries one.
    package var email: String?
    /// The `groups` claim's strings, joined with `,`.
    package var groups: String?
    /// The caller's tenant.
    package var tenant: String?
    /// The `preferred_username` claim: a provider's user name, or the gateway's own account name.
    package var username: String?
    /// The `sub` claim: the provider's subject (the gateway's user id for its own accounts).
    package var subject: String?
    /// The `name` claim: the person's full name.
    package var name: String?
    /// Claims of the route's choosing, each into a field of its own (`claims: {department: X-Department}`).
    package var claims: [ClaimField]

    /// One claim sent in a field: the dotted path into the claims, and the field's name.
    package struct ClaimField: Sendable, Equatable {
        package let path: [String]
        package let field: String

        package init(path: [String], field: String) {
            self.path = path
            self.field = field
        }
    }

    package init(
        user: String? = nil, email: String? = nil, groups: String? = nil, tenant: String? = nil, username: String? = nil, subject: String? = nil,
        name: String? = nil, claims: [ClaimField] = []
    ) {
        self.user = user
        self.email = email
        self.groups = groups
        self.tenant = tenant
        self.username = username
        self.subject = subject
        self.name = name
        self.claims = claims
    }

    /// The configured names, in the order they are written upstream.
    package var names: [String] { [user, email, groups, tenant, username, subject, name].compactMap { $0 } + claims.map(\.field) }

    /// Each configured field and its value for `caller`, those with a value, in `names`' order.
    package func forEach(of caller: AuthenticatedCaller, _ emit: (String, String) -> Void) {
        let values = IdentityFieldValues(caller)
        for (name, value) in [
            (user, values.user), (email, values.email), (groups, values.groups), (tenant, values.tenant), (username, values.username),
            (subject, values.subject), (self.name, values.name),
        ] {
            if let name, !value.isEmpty { emit(name, value) }
        }
        for claim in claims {
            if let value = IdentityFieldValues.claimText(caller.claims, path: claim.path) { emit(claim.field, value) }
        }
    }

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
    package var username = ""
    package var subject = ""
    package var name = ""

    package init() {}

    /// The values for `caller`. An identifier (email, a group, the subject) that is not printable
    /// ASCII of 1-512 bytes (one a proxy or an app could read another way) is left out, as is a
    /// group holding `,` (the separator); a name (`preferred_username`, `name`) may be UTF-8.
    ///
    /// `email` is there only when the caller's claims say it is verified (`email_verified` true):
    /// an unverified address proves nothing about who holds it, and an app that keys accounts by
    /// it would hand one person's account to another (oauth2-proxy refuses them too).
    package init(_ caller: AuthenticatedCaller) {
        user = caller.userID
        tenant = caller.tenantID
        if let claimed = caller.claims["email"]?.stringValue, EmailDomains.isVerified(caller.claims), Self.isFieldSafe(claimed) { email = claimed }
        if case .array(let values)? = caller.claims["groups"] {
            groups = values.compactMap(\.stringValue).filter { Self.isFieldSafe($0) && !$0.contains(",") }.joined(separator: ",")
        }
        if let claimed = caller.claims["preferred_username"]?.stringValue, Self.isFieldText(claimed) { username = claimed }
        if let claimed = caller.claims["sub"]?.stringValue, Self.isFieldSafe(claimed) { subject = claimed }
        if let claimed = caller.claims["name"]?.stringValue, Self.isFieldText(claimed) { name = claimed }
    }

    /// Whether `value` can be sent as a field value as it is: 1-512 bytes of printable ASCII.
    package static func isFieldSafe(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 512 && value.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }

    /// Whether `value` can be sent as a field value of text: 1-512 bytes, no control character
    /// (C0, DEL or C1: UTF-8 beyond ASCII goes as it is, RFC 9110's obs-text, but never one a
    /// terminal showing it would act on), no format character (a bidi override or isolate, a
    /// zero-width joiner: a name that shows as another, `admin` spelled backwards in a log or an
    /// app's user list), no space at either end (a field value's ends are trimmed, so it would not
    /// arrive as it was).
    package static func isFieldText(_ value: String) -> Bool {
        guard !value.isEmpty, value.utf8.count <= 512, value.utf8.first != 0x20, value.utf8.last != 0x20 else { return false }
        if value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return true }
        return value.unicodeScalars.allSatisfy { $0.properties.generalCategory != .control && $0.properties.generalCategory != .format }
    }

    /// A claim's value at `path` as field text: a string, a number (whole numbers without a
    /// fraction), `true`/`false`, or an array of those joined with `,` (an element holding `,` is
    /// left out); `nil` for a map, an absent path, or a value `isFieldText` refuses.
    package static func claimText(_ claims: JSONObject, path: [String]) -> String? {
        let current = claims.value(atPath: path)
        func scalar(_ value: JSONValue) -> String? {
            switch value {
            case .string(let text): return text
            case .bool(let flag): return flag ? "true" : "false"
            case .number(let number):
                if number.rounded() == number, abs(number) < 1e15 { return String(Int64(number)) }
                return String(number)
            default: return nil
            }
        }
        let text: String?
        switch current {
        case .array(let items)?: text = items.compactMap(scalar).filter { !$0.contains(",") && isFieldText($0) }.joined(separator: ",")
        case let value?: text = scalar(value)
        case nil: text = nil
        }
        guard let text, isFieldText(text) else { return nil }
        return text
    }
}
