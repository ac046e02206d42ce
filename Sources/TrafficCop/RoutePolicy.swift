import JOSE

/// Who may reach one `gateway.routes` upstream: the `require` of a route, compiled when the
/// configuration is read and evaluated against a verified token's claims on every request.
///
/// Every rule given must hold: all of `scopes`, at least one of `anyOf`, the tenant in
/// `tenants`, the issuer in `issuers`, and a live owned session when `requiresLiveSession`.
/// A claim that is absent or of another type fails its rule; nothing here throws.
public struct RoutePolicy: Sendable, Equatable {
    /// Scopes the token's space-separated `scope` claim must all hold.
    public var scopes: [String]
    /// At least one must hold (empty: no such rule).
    public var anyOf: [ClaimRule]
    /// The tenants allowed (`nil`: any).
    public var tenants: Set<String>?
    /// The issuers allowed, `local` standing for the gateway's own accounts (`nil`: any).
    public var issuers: Set<String>?
    /// `X-Session-Id` must name a live session the caller owns.
    public var requiresLiveSession: Bool
    /// The caller's `email` must be verified and under one of these domains (`nil`: no such rule).
    public var emailDomains: EmailDomains?

    /// The issuer name of the gateway's own accounts in `issuers`.
    public static let localIssuer = "local"

    public init(
        scopes: [String] = [], anyOf: [ClaimRule] = [], tenants: Set<String>? = nil, issuers: Set<String>? = nil, requiresLiveSession: Bool = false,
        emailDomains: EmailDomains? = nil
    ) {
        self.emailDomains = emailDomains
        self.scopes = scopes
        self.anyOf = anyOf
        self.tenants = tenants
        self.issuers = issuers
        self.requiresLiveSession = requiresLiveSession
    }

    /// One claim rule: the value at a dotted `path` into the claims holds `value`.
    public struct ClaimRule: Sendable, Equatable {
        /// The claim names along the path (`realm_access.roles` is `["realm_access", "roles"]`).
        public let path: [String]
        public let value: String

        /// - Returns: `nil` for a path with an empty segment or more than 8 segments.
        public init?(path text: String, contains value: String) {
            let segments = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard (1...8).contains(segments.count), segments.allSatisfy({ !$0.isEmpty }) else { return nil }
            path = segments
            self.value = value
        }

        /// The path as written.
        public var claim: String { path.joined(separator: ".") }

        /// Whether `claims` hold the value at the path: an array with an equal element, a string
        /// equal to it or listing it among its space-separated items (as `scope`), or a boolean or
        /// number equal to it as YAML writes one (`email_verified: true` holds for `true`, `2` for
        /// `2`; a boolean only for `true` or `false` in any case, never YAML 1.1's `yes` or `on`).
        public func holds(in claims: JSONObject) -> Bool {
            switch claims.value(atPath: path) {
            case .array(let items)?: return items.contains { scalarEquals($0) }
            case .string(let text)?: return RoutePolicy.spaceSeparated(text, holds: value)
            case let scalar?: return scalarEquals(scalar)
            case nil: return false
            }
        }

        /// Whether a scalar claim is the rule's value: a string equal to it, `true` or `false` as
        /// YAML spells them, or a number of the same value.
        private func scalarEquals(_ item: JSONValue) -> Bool {
            switch item {
            case .string(let text): return text == value
            case .bool(let flag): return value.lowercased() == (flag ? "true" : "false")
            case .number(let number): return Double(value).map { $0 == number } ?? false
            default: return false
            }
        }
    }

    /// Why a caller was refused: the requirement that failed, never the caller's claims.
    public struct Refusal: Error, Sendable, Equatable {
        /// `scopes`, `any_of`, `tenants`, `issuers` or `session`.
        public let requirement: String
        /// For `scopes`: the route's scopes (RFC 6750 3.1's `scope=`).
        public let scopes: [String]
        /// What the caller is told.
        public let message: String
        /// What would have passed, for the operator's log alone: a claim rule's claims and values
        /// (told to the caller they would teach anyone the rule to forge for); `nil` when `message` says it all.
        public let detail: String?

        public init(requirement: String, scopes: [String], message: String, detail: String? = nil) {
            self.requirement = requirement
            self.scopes = scopes
            self.message = message
            self.detail = detail
        }
    }

    /// Whether the space-separated `list` has `item` as one of its items, read over the bytes in
    /// place (on every proxied request: no array of the items is made).
    static func spaceSeparated(_ list: String, holds item: String) -> Bool {
        let bytes = list.utf8
        let wanted = item.utf8
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: " ")) ?? bytes.endIndex
            if bytes[start..<end].elementsEqual(wanted) { return true }
            start = end < bytes.endIndex ? bytes.index(after: end) : end
        }
        return false
    }

    /// The first rule the caller fails, or `nil` when every rule holds.
    ///
    /// - Parameters:
    ///   - claims: the verified token's claims.
    ///   - issuer: the caller's identity provider's issuer, `nil` for the gateway's own accounts.
    ///   - hasSession: whether the request names a session (its ownership is the data plane's check).
    public func refusal(claims: JSONObject, tenantID: String, issuer: String?, hasSession: Bool) -> Refusal? {
        if !scopes.isEmpty {
            let granted = claims["scope"]?.stringValue ?? ""
            if !scopes.allSatisfy({ Self.spaceSeparated(granted, holds: $0) }) {
                return Refusal(requirement: "scopes", scopes: scopes, message: "this route needs the scopes \(scopes.joined(separator: " ")) in the token")
            }
        }
        if !anyOf.isEmpty, !anyOf.contains(where: { $0.holds(in: claims) }) {
            return Refusal(
                requirement: "any_of", scopes: [],
                message: "this route is not open to you through this gateway; its operator can say why (the answer's X-Request-Id)",
                detail: "this route needs one of: " + anyOf.map { "\($0.claim) containing \($0.value)" }.joined(separator: ", "))
        }
        if let tenants, !tenants.contains(tenantID) {
            return Refusal(requirement: "tenants", scopes: [], message: "this route is not open to the token's tenant")
        }
        if let issuers, !issuers.contains(issuer ?? Self.localIssuer) {
            return Refusal(requirement: "issuers", scopes: [], message: "this route is not open to users of the token's issuer")
        }
        if let emailDomains, !emailDomains.admits(claims) {
            return Refusal(requirement: "email_domains", scopes: [], message: "this route needs a verified email address under \(emailDomains.description)")
        }
        if requiresLiveSession, !hasSession {
            return Refusal(requirement: "session", scopes: [], message: "this route needs X-Session-Id naming a live session of the caller's")
        }
        return nil
    }
}
