import JOSE

/// A configured client's secret (`client_secret_file`): compared in constant time, never printed.
///
/// Kept as its SHA-256, so that a comparison takes the same time whatever the presented secret's length.
public struct ClientSecret: Sendable, Equatable, CustomStringConvertible {
    let digest: [UInt8]

    /// The secret `bytes` (read from its owner-only file, trailing newline left out).
    public init(_ bytes: [UInt8]) throws {
        digest = try Digest.sha256(bytes)
    }

    /// Whether `presented` is this secret.
    public func isMatched(by presented: String) -> Bool {
        guard let other = try? Digest.sha256(Array(presented.utf8)) else { return false }
        return Scrypt.constantTimeEquals(other, digest)
    }

    public var description: String { "ClientSecret(redacted)" }
}
