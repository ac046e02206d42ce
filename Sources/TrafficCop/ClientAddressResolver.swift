#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 network: an address and a prefix length (`10.0.0.0/8`,
/// `::1/128`; a bare address is a single host).
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    public let bytes: [UInt8]
    public let prefixLength: Int

    /// Parses `a.b.c.d[/n]` or an IPv6 address with an optional `/n`; `nil` if it is neither.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let address = IPNetwork.parseAddress(String(parts[0])) else { return nil }
        let maximum = address.count * 8
        var length = maximum
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...maximum).contains(value) else { return nil }
            length = value
        }
        bytes = address
        prefixLength = length
    }

    /// The 4 or 16 bytes of a textual IP address (IPv4-mapped IPv6 becomes IPv4); `nil` otherwise.
    public static func parseAddress(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let raw = withUnsafeBytes(of: &v6) { Array($0) }
        if raw[0..<10].allSatisfy({ $0 == 0 }), raw[10] == 0xFF, raw[11] == 0xFF { return Array(raw[12...]) }
        return raw
    }

    /// True if `address` (4 or 16 bytes) lies in this network.
    public func contains(_ address: [UInt8]) -> Bool {
        guard address.count == bytes.count else { return false }
        var remaining = prefixLength
        for index in 0..<bytes.count where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if address[index] & mask != bytes[index] & mask { return false }
            remaining -= bits
        }
        return true
    }

    init(bytes: [UInt8], prefixLength: Int) {
        self.bytes = bytes
        self.prefixLength = prefixLength
    }

    /// The network's address as text (`10.0.0.0`, `2001:db8::`).
    public var address: String {
        var text = [CChar](repeating: 0, count: 64)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        _ = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        let end = text.firstIndex(of: 0) ?? text.count
        return String(decoding: text[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var description: String { address + "/\(prefixLength)" }
}

/// Finds the client address a request is keyed by for rate limits.
///
/// The socket peer, unless the peer is a configured trusted proxy: then
/// `X-Forwarded-For` is read from the right, skipping trusted proxies, and
/// the first address that is not one is the client. A header from anybody
/// else is ignored, so a client cannot choose its own rate-limit key.
public struct ClientAddressResolver: Sendable {
    public let trustedProxies: [IPNetwork]

    public init(trustedProxies: [IPNetwork] = []) {
        self.trustedProxies = trustedProxies
    }

    /// Whether `address` is one of `trustedProxies` (never, when the list is empty).
    public func isTrustedProxy(_ address: String) -> Bool {
        guard !trustedProxies.isEmpty, let bytes = IPNetwork.parseAddress(address) else { return false }
        return trustedProxies.contains { $0.contains(bytes) }
    }

    /// - Parameters:
    ///   - peer: the socket peer's IP address, if known.
    ///   - forwardedFor: every `X-Forwarded-For` value, in order; read only when the peer is a
    ///     trusted proxy (no header lookup for anybody else, on every request).
    public func clientAddress(peer: String?, forwardedFor: @autoclosure () -> [String]) -> String {
        guard let peer else { return "unknown" }
        guard isTrustedProxy(peer) else { return peer }
        var hops: [String] = []
        for value in forwardedFor() {
            for hop in value.split(separator: ",") { hops.append(String(hop).trimmingCharacters(in: " \t")) }
        }
        var client = peer
        for hop in hops.reversed() {
            guard IPNetwork.parseAddress(hop) != nil else { break }  // junk ends the trusted chain
            client = hop
            if !isTrustedProxy(hop) { break }
        }
        return client
    }
}

extension ClientAddressResolver {
    /// The key a client address counts under in a per-client rate limit: an IPv4 address as it
    /// is, an IPv6 address by its /64.
    ///
    /// One IPv6 host is usually given a whole /64 (RFC 6177), so keying by address would give it
    /// 2^64 buckets. An IPv4-mapped address, or one under the NAT64 prefix `64:ff9b::/96`, counts
    /// as its IPv4 address. Hosts that share a /64 (an office's VLAN) share its buckets.
    public static func rateLimitKey(_ address: String) -> String {
        guard let bytes = IPNetwork.parseAddress(address) else { return address }
        guard bytes.count == 16 else { return IPNetwork(bytes: bytes, prefixLength: 32).address }
        // The well-known NAT64 prefix (64:ff9b::/96) carries an IPv4 client: counted as that address.
        if bytes[0..<12] == [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] { return IPNetwork(bytes: Array(bytes[12...]), prefixLength: 32).address }
        return IPNetwork(bytes: Array(bytes[0..<8]) + [UInt8](repeating: 0, count: 8), prefixLength: 64).description
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        let characters = Set(set)
        var slice = Substring(self)
        while let first = slice.first, characters.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, characters.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }
}
