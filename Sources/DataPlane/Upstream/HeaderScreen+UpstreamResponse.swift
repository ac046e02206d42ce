import EdgeHTTP
import SecurityGuard

extension HeaderScreen {
    /// The names an upstream answer's `Connection` header lists (they are hop-by-hop for it), except
    /// `keep-alive` and `close`, which are hop-by-hop anyway: for the usual answer nothing is allocated.
    static func connectionListed(_ response: UpstreamResponseHead) -> Set<String> {
        var listed = Set<String>()
        for field in response.fields where response.name(of: field, is: "connection") {
            insertListed(response.bytes[field.value], into: &listed)
        }
        return listed
    }

    /// Whether a field of an upstream's answer may go back to the client, decided over its bytes.
    /// Identity fields never do: an upstream that echoes the assertion or an `X-Forwarded-*` it was
    /// sent would hand the client what the gateway vouched for upstream.
    static func isReturnable(_ response: UpstreamResponseHead, _ field: UpstreamResponseHead.Field, connectionListed: Set<String>) -> Bool {
        let screened = response.bytes.withUnsafeBytes { verdict(UnsafeRawBufferPointer(rebasing: $0[field.name])) }
        guard screened == .ordinary else { return false }
        // An upstream never sets the gateway's cookies: a planted session or flow cookie would sign
        // the browser in as someone else (session fixation), or shadow the real one.
        if response.name(of: field, is: "set-cookie"), SessionCookie.setsGatewayCookie(response.bytes[field.value]) { return false }
        return connectionListed.isEmpty || !connectionListed.contains(folded(response.nameString(of: field)))
    }
}
