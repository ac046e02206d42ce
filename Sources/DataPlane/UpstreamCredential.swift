import NIOCore
import SecurityGuard

/// What a route sends its upstream as the caller's own credential there (`upstream_credential`),
/// in place of nothing: the client's credential is never passed on.
public enum UpstreamCredential: Sendable, Equatable {
    /// `{connection: NAME}`: the person's token at that connected service, as `Authorization: Bearer`.
    case connection(String)

    /// The connected service it sends the token of.
    public var connection: String? {
        switch self {
        case .connection(let name): name
        }
    }
}

/// Where the data plane gets a caller's token at a connected service: from memory on the event
/// loop when it is there (no hop), else by a read it waits for.
package protocol UpstreamCredentialSource: Sendable {
    /// The token `caller` holds at `connection`; `.known(nil)`: they have not connected it.
    func token(for caller: AuthenticatedCaller, connection: String, on eventLoop: any EventLoop) -> UpstreamCredentialLookup
    /// Where the person connects `connection` (the gateway's connect page), for the refusal that asks them to.
    func connectURL(connection: String) -> String
    /// The id of a URL elicitation kept for `caller` to connect `connection` (bound to them; the
    /// connect page opens its link for them only).
    func elicitation(for caller: AuthenticatedCaller, connection: String, on eventLoop: any EventLoop) -> EventLoopFuture<String>
}

/// A credential lookup's answer.
package enum UpstreamCredentialLookup {
    case known(String?)
    case asking(EventLoopFuture<String?>)
}
