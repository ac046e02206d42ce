import NIOHTTP1

/// Which headers may cross the proxy, decided without a folded copy of every name.
///
/// Names are compared lower-cased, with `_` and `.` folded to `-` (so a spoofing
/// attempt such as `X_Portcullis_Assertion` is caught as `x-portcullis-assertion`);
/// a name already in that form is compared as it is.
package enum HeaderScreen {
    /// Hop-by-hop headers (RFC 9110 7.6.1) and those the client may not choose; `Expect`
    /// because the gateway answers `100-continue` itself once the request is admitted.
    package static let neverForwarded: Set<String> = [
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
        "transfer-encoding", "upgrade", "host", "authorization", "content-length", "expect",
    ]

    /// Identity headers the gateway sets or a service might trust; anything starting with one of
    /// `identityPrefixes` too (every `X-Auth-Request-*` field forward-auth answers, and any it may add).
    package static let identityHeaders: Set<String> = [
        "x-portcullis-assertion", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "x-forwarded-prefix",
        "x-forwarded-user", "x-forwarded-email", "x-forwarded-groups", "forwarded", "x-real-ip", "x-client-ip", "true-client-ip",
        "x-request-id", "x-session-id", "x-user-id", "x-user", "x-tenant-id", "x-tenant", "x-remote-user", "remote-user",
        "x-authenticated-user", "x-authenticated-userid", "x-auth-user", "x-auth-request-user", "x-auth-request-email",
        "x-original-user", "x-subject", "x-scope", "x-forwarded-preferred-username", "x-forwarded-access-token",
    ]

    /// Name prefixes that are identity fields whatever follows: the gateway's own, and oauth2-proxy's
    /// `X-Auth-Request-*` family, which forward-auth answers (`-User`, `-Tenant`, `-Email`, `-Groups`).
    package static let identityPrefixes = ["x-portcullis-", "x-auth-request-"]

    /// `name` lower-cased with `_` and `.` as `-`; the same string when there is nothing to fold.
    /// Written in place, with no intermediate array: a name of up to 15 bytes (most) stays a
    /// small string, with no allocation at all.
    package static func folded(_ name: String) -> String {
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
                buffer[index] = fold(byte)
                index += 1
            }
            return index
        }
    }

    /// What the screen makes of a header name.
    package enum Verdict: Equatable {
        /// In `neverForwarded`: crosses the proxy in neither direction.
        case neverForwarded
        /// In `identityHeaders` or starting with one of `identityPrefixes`: never taken from a client.
        case identity
        /// Neither: crosses unless the message's `Connection` header lists it.
        case ordinary
    }

    /// The names of both sets as bytes, grouped by length (index = length): a name is compared,
    /// folded byte by byte, with the few of its own length, with no string made and nothing hashed.
    private static let namesByLength: [[(name: [UInt8], verdict: Verdict)]] = {
        let all = neverForwarded.map { (Array($0.utf8), Verdict.neverForwarded) } + identityHeaders.map { (Array($0.utf8), Verdict.identity) }
        var table = Array(repeating: [(name: [UInt8], verdict: Verdict)](), count: (all.map(\.0.count).max() ?? 0) + 1)
        for (name, verdict) in all { table[name.count].append((name, verdict)) }
        return table
    }()

    private static let prefixBytes = identityPrefixes.map { Array($0.utf8) }

    /// The screen's verdict on a name, given as the bytes it came as (any case, `_` or `.` for `-`).
    package static func verdict(_ name: UnsafeRawBufferPointer) -> Verdict {
        if name.count < namesByLength.count {
            for candidate in namesByLength[name.count] where equalsFolded(name, candidate.name) { return candidate.verdict }
        }
        for prefix in prefixBytes where name.count >= prefix.count && equalsFolded(UnsafeRawBufferPointer(rebasing: name[..<prefix.count]), prefix) {
            return .identity
        }
        return .ordinary
    }

    /// The screen's verdict on a name held as a string.
    package static func verdict(_ name: String) -> Verdict {
        if let verdict = name.utf8.withContiguousStorageIfAvailable({ verdict(UnsafeRawBufferPointer($0)) }) { return verdict }
        return Array(name.utf8).withUnsafeBytes { verdict($0) }
    }

    /// Whether `bytes`, folded as `folded(_:)` folds a name, are `folded` (already in that form).
    private static func equalsFolded(_ bytes: UnsafeRawBufferPointer, _ folded: [UInt8]) -> Bool {
        guard bytes.count == folded.count else { return false }
        for index in 0..<bytes.count where fold(bytes[index]) != folded[index] { return false }
        return true
    }

    /// One byte of a name as `folded(_:)` writes it.
    @inline(__always)
    private static func fold(_ byte: UInt8) -> UInt8 {
        if byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") { return UInt8(ascii: "-") }
        return (byte >= 0x41 && byte <= 0x5A) ? byte + 32 : byte
    }

    /// The tokens of one `Connection` value, folded, into `listed`; a string is made only for a
    /// token other than `keep-alive` and `close`.
    static func insertListedBytes<Bytes: BidirectionalCollection<UInt8>>(_ value: Bytes, into listed: inout Set<String>)
    where Bytes.SubSequence == Bytes {
        forEachListToken(value) { token in
            if !equalsLowercasedBytes(token, "keep-alive"), !equalsLowercasedBytes(token, "close") {
                listed.insert(folded(String(decoding: token, as: UTF8.self)))
            }
            return true
        }
    }

    /// Each comma-separated token of a field value (RFC 9110 §5.6.1), trimmed of spaces and tabs,
    /// empty ones passed over, until `body` returns `false`.
    static func forEachListToken<Bytes: BidirectionalCollection<UInt8>>(_ value: Bytes, _ body: (Bytes) -> Bool) where Bytes.SubSequence == Bytes {
        var rest = value
        while !rest.isEmpty {
            let comma = rest.firstIndex(of: UInt8(ascii: ",")) ?? rest.endIndex
            var token = rest[..<comma]
            while let first = token.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { token = token.dropFirst() }
            while let last = token.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { token = token.dropLast() }
            if !token.isEmpty, !body(token) { return }
            rest = comma == rest.endIndex ? rest[comma...] : rest[rest.index(after: comma)...]
        }
    }

    /// Whether a comma-separated field value lists `lowercased` (in any case), or `*` when `orStar`.
    static func listsTokenBytes<Bytes: BidirectionalCollection<UInt8>>(_ value: Bytes, _ lowercased: StaticString, orStar: Bool = false) -> Bool
    where Bytes.SubSequence == Bytes {
        var found = false
        forEachListToken(value) { token in
            found = equalsLowercasedBytes(token, lowercased) || (orStar && token.count == 1 && token.first == UInt8(ascii: "*"))
            return !found
        }
        return found
    }

    /// Whether `bytes`, lower-cased (ASCII), are `lowercased`.
    static func equalsLowercasedBytes<Bytes: Collection<UInt8>>(_ bytes: Bytes, _ lowercased: StaticString) -> Bool {
        guard bytes.count == lowercased.utf8CodeUnitCount else { return false }
        return lowercased.withUTF8Buffer { word in
            zip(bytes, word).allSatisfy { (($0 >= 0x41 && $0 <= 0x5A) ? $0 + 32 : $0) == $1 }
        }
    }

    /// Whether a client header, named as it came, may go upstream.
    package static func isForwardable(_ name: String, connectionListed: Set<String>) -> Bool {
        verdict(name) == .ordinary && (connectionListed.isEmpty || !connectionListed.contains(folded(name)))
    }

    // The same, concrete, for the types other modules pass: a generic called across the module
    // boundary runs unspecialised, with a metadata lookup on every call (11% of the data plane's
    // CPU when the data plane became a module of its own, before these).

    /// Whether `bytes`, lower-cased (ASCII), are `lowercased`.
    package static func equalsLowercased(_ bytes: String.UTF8View, _ lowercased: StaticString) -> Bool {
        equalsLowercasedBytes(bytes[...], lowercased)
    }

    /// Whether `bytes`, lower-cased (ASCII), are `lowercased`.
    package static func equalsLowercased(_ bytes: Substring.UTF8View, _ lowercased: StaticString) -> Bool {
        equalsLowercasedBytes(bytes, lowercased)
    }

    /// The tokens of one `Connection` value, folded, into `listed` (see the generic form).
    package static func insertListed(_ value: Substring.UTF8View, into listed: inout Set<String>) {
        insertListedBytes(value, into: &listed)
    }

    /// The tokens of one `Connection` value, folded, into `listed` (see the generic form).
    package static func insertListed(_ value: ArraySlice<UInt8>, into listed: inout Set<String>) {
        insertListedBytes(value, into: &listed)
    }

    /// Whether a comma-separated field value lists `lowercased` (in any case), or `*` when `orStar`.
    package static func listsToken(_ value: ArraySlice<UInt8>, _ lowercased: StaticString, orStar: Bool = false) -> Bool {
        listsTokenBytes(value, lowercased, orStar: orStar)
    }

    /// Whether a comma-separated field value lists `lowercased` (in any case), or `*` when `orStar`.
    package static func listsToken(_ value: Substring.UTF8View, _ lowercased: StaticString, orStar: Bool = false) -> Bool {
        listsTokenBytes(value, lowercased, orStar: orStar)
    }
}
