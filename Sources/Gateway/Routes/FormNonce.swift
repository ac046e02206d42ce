import JOSE

/// The gateway's pages' form nonces (consent, connect, agents), compared in constant time.
///
/// A nonce is a digest bound to the browser's session cookie; comparing it with `==` would let the
/// time taken say how many of its first characters a guess had right.
enum FormNonce {
    /// Whether `given` is `expected`, in constant time for equal lengths (a nonce's length is no secret).
    static func matches(_ given: String?, _ expected: String?) -> Bool {
        guard let given, let expected else { return false }
        return Scrypt.constantTimeEquals(Array(given.utf8), Array(expected.utf8))
    }
}
