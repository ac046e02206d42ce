/// Why the data plane's front handed an HTTP/1 connection on to NIO's pipeline, for good.
///
/// The front serves plain route requests from the bytes; the first other request builds NIO's
/// pipeline and every later request on that connection takes the slower path. Counted so an
/// operator (and a test) can see how many connections leave the front, and for which part.
package enum ConnectionHandOnReason: String, Sendable {
    /// The head is outside the plain subset: an upgrade, a chunked body, HTTP/1.0, an unusual
    /// `Connection` or `Content-Length`, a field too long, a byte the front does not read.
    case head
    /// A plain head whose target the front does not serve: under no route, not in its normalised
    /// spelling, or forward-auth's decision asked with a body.
    case target
}
