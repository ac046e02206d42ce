import HTTPTypes
import NIOHTTP1

/// Which headers may cross the proxy, decided without a folded copy of every name.
///
/// Names are compared in their canonical (lower-case) form, which `HTTPField.Name`
/// already holds; only a name containing `_` or `.` (rare: a spoofing attempt
/// such as `X_Portcullis_Assertion`) is folded to `-` before the comparison.
enum HeaderScreen {
    /// Hop-by-hop headers (RFC 9110 7.6.1) and those the client may not choose; `Expect`
    /// because the gateway answers `100-continue` itself once the request is admitted.
    static let neverForwarded: Set<String> = [
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
        "transfer-encoding", "upgrade", "host", "authorization", "content-length", "expect",
    ]

    /// Identity headers the gateway sets or a service might trust; anything starting `x-portcullis-` too.
    static let identityHeaders: Set<String> = [
        "x-portcullis-assertion", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "x-forwarded-prefix",
        "x-forwarded-user", "x-forwarded-email", "x-forwarded-groups", "forwarded", "x-real-ip", "x-client-ip", "true-client-ip",
        "x-request-id", "x-session-id", "x-user-id", "x-user", "x-tenant-id", "x-tenant", "x-remote-user", "remote-user",
        "x-authenticated-user", "x-authenticated-userid", "x-auth-user", "x-auth-request-user", "x-auth-request-email",
        "x-original-user", "x-subject", "x-scope",
    ]

    /// `name` lower-cased with `_` and `.` as `-`; the same string when there is nothing to fold.
    static func folded(_ name: String) -> String {
        var needsWork = false
        for byte in name.utf8 where byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || (byte >= 0x41 && byte <= 0x5A) {
            needsWork = true
            break
        }
        guard needsWork else { return name }
        return String(decoding: name.utf8.map { byte -> UInt8 in
            if byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") { return UInt8(ascii: "-") }
            return (byte >= 0x41 && byte <= 0x5A) ? byte + 32 : byte
        }, as: UTF8.self)
    }

    /// The names a `Connection` header lists (they are hop-by-hop for this message).
    static func connectionListed(_ fields: HTTPFields) -> Set<String> {
        var listed = Set<String>()
        for value in fields[values: .connection] {
            for token in value.split(separator: ",") {
                let trimmed = token.trimmingCharacters(in: .whitespaces)
                if !trimmed.isEmpty { listed.insert(folded(trimmed)) }
            }
        }
        return listed
    }

    /// The names an upstream response's `Connection` header lists.
    static func connectionListed(_ headers: HTTPHeaders) -> Set<String> {
        Set(headers[canonicalForm: "connection"].map { folded(String($0)) })
    }

    /// Whether a client header may go upstream.
    static func isForwardable(_ name: HTTPField.Name, connectionListed: Set<String>) -> Bool {
        let canonical = folded(name.canonicalName)
        return !neverForwarded.contains(canonical) && !identityHeaders.contains(canonical) && !canonical.hasPrefix("x-portcullis-")
            && (connectionListed.isEmpty || !connectionListed.contains(canonical))
    }

    /// Whether an upstream response header may go back to the client.
    static func isReturnable(_ name: String, connectionListed: Set<String>) -> Bool {
        let canonical = folded(name)
        return !neverForwarded.contains(canonical) && (connectionListed.isEmpty || !connectionListed.contains(canonical))
    }
}
