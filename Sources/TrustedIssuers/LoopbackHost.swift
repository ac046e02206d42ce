/// Host names that are loopback by their spelling alone: `localhost`, 127.0.0.0/8, `::1`.
package enum LoopbackHost {
    /// Whether `host` (bracketed or not) is `localhost`, `::1`, or four decimal octets beginning 127
    /// (never a name such as `127.example.com`).
    package static func contains(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if bare.lowercased() == "localhost" || bare == "::1" { return true }
        let octets = bare.split(separator: ".", omittingEmptySubsequences: false)
        // Decimal digits only: `Int` would also read `+1`.
        guard octets.count == 4,
            octets.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } && (Int($0) ?? 256) <= 255 })
        else { return false }
        return octets[0] == "127"
    }
}
