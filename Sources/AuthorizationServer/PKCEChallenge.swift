import JOSE

/// A PKCE S256 code challenge (RFC 7636): the only method the server takes (OAuth 2.1 §4.1.1).
public struct PKCEChallenge: Sendable, Equatable {
    /// 43 base64url characters: the SHA-256 of the verifier.
    public let value: String

    /// The challenge of an authorization request, or the error to redirect with.
    public init(challenge: String?, method: String?) throws(OAuthError) {
        guard let challenge else { throw .invalidRequest("code_challenge is required (PKCE with S256)") }
        guard method == "S256" else {
            throw .invalidRequest(method == nil ? "code_challenge_method is required and must be S256" : "code_challenge_method must be S256; plain is not taken")
        }
        guard challenge.utf8.count == 43, Base64URL.decode(challenge)?.count == 32 else {
            throw .invalidRequest("code_challenge must be the 43-character base64url SHA-256 of the code verifier")
        }
        value = challenge
    }

    /// A stored challenge.
    public init(stored: String) { value = stored }

    /// Whether `verifier` hashes to this challenge. A verifier is 43-128 unreserved characters (RFC 7636 §4.1).
    public func isMatched(by verifier: String) -> Bool {
        let bytes = verifier.utf8
        guard (43...128).contains(bytes.count), bytes.allSatisfy(Self.isUnreserved) else { return false }
        guard let digest = try? Digest.sha256(Array(bytes)) else { return false }
        return Base64URL.encode(digest) == value
    }

    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
    }
}
