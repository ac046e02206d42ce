import NIOCore
import SecurityGuard

/// What a route sends its upstream as the caller's own credential there (`upstream_credential`),
/// in place of nothing: the client's credential is never passed on.
public enum UpstreamCredential: Sendable, Equatable {
    /// `{connection: NAME}`: the person's token at that connected service, as `Authorization: Bearer`.
    case connection(String)
    /// `{exchange: {...}}`: a token for the upstream's audience, exchanged at the company's provider
    /// for the person (RFC 8693, or Entra's on-behalf-of), as `Authorization: Bearer`.
    case exchange(ExchangeTarget)

    /// The connected service it sends the token of.
    public var connection: String? {
        switch self {
        case .connection(let name): name
        case .exchange: nil
        }
    }
}

/// What a route's token exchange asks the provider for: one cache entry a person.
public struct ExchangeTarget: Sendable, Hashable {
    /// How the exchange is spelled at the provider.
    public enum Form: String, Sendable, Hashable, CaseIterable {
        /// RFC 8693 token exchange: `subject_token` with `audience` and `scope`.
        case rfc8693
        /// Microsoft Entra's on-behalf-of flow: a jwt-bearer `assertion` with
        /// `requested_token_use=on_behalf_of` and `scope` (the audience is named by the scopes).
        case entraOnBehalfOf = "entra_on_behalf_of"
    }

    /// The trusted issuer (with `login`) the person signed in through, whose token endpoint exchanges.
    public let issuer: String
    /// The audience the exchanged token is for (RFC 8693 `audience`).
    public let audience: String
    /// The scopes asked for, in order.
    public let scopes: [String]
    public let form: Form

    public init(issuer: String, audience: String, scopes: [String], form: Form) {
        self.issuer = issuer
        self.audience = audience
        self.scopes = scopes
        self.form = form
    }
}

/// Where the data plane gets a token exchanged for the caller: from memory on the event loop when
/// it is there (no hop), else by an exchange it waits for. A failed exchange fails the future with
/// the `GatewayError` the caller is answered (`exchange_refused`, `exchange_unavailable`,
/// `exchange_requires_sign_in`).
package protocol ExchangedCredentialSource: Sendable {
    func token(for caller: AuthenticatedCaller, target: ExchangeTarget, on eventLoop: any EventLoop) -> UpstreamCredentialLookup
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
