import EdgeHTTP
import RuntimeAPI
import SecurityGuard

/// What an access decision answers: the request admitted, with what goes upstream beside it, or
/// refused as the route itself would refuse it.
package enum AccessVerdict: Sendable {
    case allowed(AccessGrant)
    /// `signIn`: where a navigation without a session is sent (the asker answers it in its own
    /// terms: a 302, or nginx's 401 with `X-Portcullis-Sign-In`).
    case denied(GatewayError, signIn: String?)
}

/// An admitted request: who it is, and the fields for the upstream.
package struct AccessGrant: Sendable {
    package let route: DataPlane.Route
    /// `nil` on an `auth: none` route asked without a token.
    package let caller: AuthenticatedCaller?
    package let sessionID: String?
    /// The assertion and every identity field (`ForwardAuthAnswer.fields`), each present, empty
    /// when it has no value, so a field the client forged is replaced, never passed on.
    package let fields: [(name: String, value: String)]
}
