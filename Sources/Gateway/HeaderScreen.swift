import NIOHTTP1

/// Which headers may cross the proxy, decided without a folded copy of every name.
///
/// Names are compared lower-cased, with `_` and `.` folded to `-` (so a spoofing
/// attempt such as `X_Portcullis_Assertion` is caught as `x-portcullis-assertion`);
/// a name already in that form is compared as it is.
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
    /// Written in place, with no intermediate array: a name of up to 15 bytes (most) stays a
    /// small string, with no allocation at all.
    static func folded(_ name: String) -> String {
        var needsWork = false
        for byte in name.utf8 where byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || (byte >= 0x41 && byte <= 0x5A) {
            needsWork = true
            break
        }
        guard needsWork else { return name }
        let utf8 = name.utf8
        return String(unsafeUninitializedCapacity: utf8.count) { buffer in
            var index = 0
            for byte in utf8 {
                if byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") {
                    buffer[index] = UInt8(ascii: "-")
                } else {
                    buffer[index] = (byte >= 0x41 && byte <= 0x5A) ? byte + 32 : byte
                }
                index += 1
            }
            return index
        }
    }

    /// The names a message's `Connection` header lists (they are hop-by-hop for it), except
    /// `keep-alive` and `close`, which are hop-by-hop anyway: for the usual message nothing is allocated.
    static func connectionListed(_ headers: HTTPHeaders) -> Set<String> {
        var listed = Set<String>()
        for (name, value) in headers where equalsLowercased(name.utf8[...], "connection") {
            insertListed(value, into: &listed)
        }
        return listed
    }

    /// The names an upstream answer's `Connection` header lists, as `connectionListed(_:)` does for NIO's headers.
    static func connectionListed(_ response: UpstreamResponseHead) -> Set<String> {
        var listed = Set<String>()
        for field in response.fields where response.name(of: field, is: "connection") {
            insertListed(response.valueString(of: field), into: &listed)
        }
        return listed
    }

    /// The tokens of one `Connection` value, folded, into `listed`.
    private static func insertListed(_ value: String, into listed: inout Set<String>) {
        do {
            // Comma-separated tokens, each trimmed of spaces and tabs.
            var rest = value.utf8[...]
            while !rest.isEmpty {
                let comma = rest.firstIndex(of: UInt8(ascii: ",")) ?? rest.endIndex
                var token = rest[..<comma]
                while let first = token.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { token = token.dropFirst() }
                while let last = token.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { token = token.dropLast() }
                if !token.isEmpty, !equalsLowercased(token, "keep-alive"), !equalsLowercased(token, "close") {
                    listed.insert(folded(String(Substring(token))))
                }
                rest = comma == rest.endIndex ? rest[comma...] : rest[rest.index(after: comma)...]
            }
        }
    }

    /// Whether `bytes`, lower-cased (ASCII), are `lowercased`.
    static func equalsLowercased(_ bytes: Substring.UTF8View, _ lowercased: StaticString) -> Bool {
        guard bytes.count == lowercased.utf8CodeUnitCount else { return false }
        return lowercased.withUTF8Buffer { word in
            zip(bytes, word).allSatisfy { (($0 >= 0x41 && $0 <= 0x5A) ? $0 + 32 : $0) == $1 }
        }
    }

    /// Whether a client header, named as it came, may go upstream.
    static func isForwardable(_ name: String, connectionListed: Set<String>) -> Bool {
        let canonical = folded(name)
        return !neverForwarded.contains(canonical) && !identityHeaders.contains(canonical) && !canonical.hasPrefix("x-portcullis-")
            && (connectionListed.isEmpty || !connectionListed.contains(canonical))
    }

    /// Whether an upstream response header may go back to the client.
    static func isReturnable(_ name: String, connectionListed: Set<String>) -> Bool {
        let canonical = folded(name)
        return !neverForwarded.contains(canonical) && (connectionListed.isEmpty || !connectionListed.contains(canonical))
    }

    /// The longest name in `neverForwarded`: a longer one is returnable unless its answer's `Connection` lists it.
    static let longestNeverForwarded = neverForwarded.map(\.utf8.count).max() ?? 0

    /// Whether a field of an upstream's answer may go back to the client; a long name is decided
    /// without making a string of it.
    static func isReturnable(_ response: UpstreamResponseHead, _ field: UpstreamResponseHead.Field, connectionListed: Set<String>) -> Bool {
        if field.name.count > longestNeverForwarded && connectionListed.isEmpty { return true }
        return isReturnable(response.nameString(of: field), connectionListed: connectionListed)
    }
}

extension HTTPHeaders {
    /// Every value of `name` as one field value (RFC 9110 §5.3: joined with ", "), as HTTPTypes
    /// reads a repeated field; `nil` when there is none. One value is returned as it is.
    /// Allocates nothing for a field that appears at most once (the usual case).
    func combined(_ name: StaticString) -> String? {
        var found: String?
        var joined: String?
        for (field, value) in self where HeaderScreen.equalsLowercased(field.utf8[...], name) {
            if let first = found {
                joined = (joined ?? first) + ", " + value
            } else {
                found = value
            }
        }
        return joined ?? found
    }
}
