import JOSE

/// A route's `require.email_domains` (as oauth2-proxy's `--email-domain`): the caller's `email`
/// claim must be verified (`email_verified` is `true`) and its domain one of these.
///
/// An entry is a domain, matched whole and without regard to case (`example.com` admits
/// `ann@example.com`, never `ann@sub.example.com` nor `ann@evilexample.com`); `*.example.com`
/// admits its subdomains only; `*` admits any verified address. An address is read at its last
/// `@`, with something before it. `email_verified` may be the string `"true"` too (Amazon
/// Cognito sends it so); absent, or anything else, the rule fails: an unverified address
/// proves nothing about who holds it.
public struct EmailDomains: Sendable, Equatable, CustomStringConvertible {
    /// The entries as configured, lower-cased.
    public let entries: [String]

    /// - Returns: `nil` when an entry is not a domain name, `*.` before one, or `*`.
    public init?(_ entries: [String]) {
        guard !entries.isEmpty else { return nil }
        var lowered: [String] = []
        for entry in entries {
            guard entry.utf8.allSatisfy({ $0 < 0x80 }) else { return nil }
            let entry = entry.lowercased()
            let domain = entry.hasPrefix("*.") ? String(entry.dropFirst(2)) : entry
            guard entry == "*" || Self.isDomainName(domain) else { return nil }
            lowered.append(entry)
        }
        self.entries = lowered
    }

    public var description: String { entries.joined(separator: ", ") }

    /// Whether `claims` say their `email` is verified: `email_verified` is `true` (or the string
    /// `"true"`, as Amazon Cognito sends it); absent or anything else, it is not.
    public static func isVerified(_ claims: JSONObject) -> Bool {
        switch claims["email_verified"] {
        case .bool(true)?, .string("true")?: true
        default: false
        }
    }

    /// Whether `claims` hold a verified email address under one of the entries.
    public func admits(_ claims: JSONObject) -> Bool {
        guard Self.isVerified(claims) else { return false }
        guard let email = claims["email"]?.stringValue, let at = email.lastIndex(of: "@"), at != email.startIndex else { return false }
        // ASCII before case folding: Unicode's would fold a look-alike (U+212A KELVIN SIGN) into `k`.
        let part = email[email.index(after: at)...]
        guard part.utf8.allSatisfy({ $0 < 0x80 }) else { return false }
        let domain = part.lowercased()
        guard Self.isDomainName(domain) else { return false }
        return entries.contains { entry in
            if entry == "*" { return true }
            if entry.hasPrefix("*.") { return domain.hasSuffix(entry.dropFirst(1)) }
            return domain == entry
        }
    }

    /// Letters, digits and `-` in labels of 1-63 bytes joined by dots, at most 253 bytes, lower case.
    static func isDomainName(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 253 else { return false }
        return text.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            (1...63).contains(label.utf8.count) && label.utf8.first != UInt8(ascii: "-") && label.utf8.last != UInt8(ascii: "-")
                && label.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "-") }
        }
    }
}
