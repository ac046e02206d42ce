/// Why a key could not be loaded, generated or used.
public struct KeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable codes for the kinds of key failure.
    public enum Code: String, Sendable {
        /// The bytes are not a key of any kind this module reads.
        case invalidKey = "invalid_key"
        /// The key is of a kind or size JOSE refuses (short HMAC secret, RSA < 2048).
        case weakKey = "weak_key"
        /// The key cannot be used with the algorithm it is bound to.
        case algorithmMismatch = "algorithm_mismatch"
        /// The key type, curve or algorithm is not supported.
        case unsupported = "unsupported_key"
        /// The PEM is password-protected; Portcullis reads only unencrypted PKCS#8.
        case encrypted = "encrypted_key"
        /// The key has no private part but was asked to sign.
        case notPrivate = "not_private"
        /// The `kid` is not 1-128 characters of `[A-Za-z0-9_-]`.
        case invalidKeyID = "invalid_kid"
        /// libcrypto failed (out of memory, say); the message carries its reason.
        case libcrypto = "libcrypto"
    }

    public let code: Code
    /// One sentence a person can act on. Never contains key material.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// Rules for key identifiers.
///
/// Any printable `kid` is accepted from a JWKS (RFC 7520 uses e-mail
/// addresses); kids of keys in `keys/` name files there, so they are
/// restricted to a safe set.
public enum KeyID {
    /// True if `kid` is 1-256 bytes with no control characters: what a JWKS may use.
    public static func isAcceptable(_ kid: String) -> Bool {
        (1...256).contains(kid.utf8.count) && !kid.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    /// True if `kid` is 1-128 characters of `[A-Za-z0-9_-]`: what `keys/` uses.
    public static func isValid(_ kid: String) -> Bool {
        let utf8 = kid.utf8
        guard (1...128).contains(utf8.count) else { return false }
        return utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
    }
}
