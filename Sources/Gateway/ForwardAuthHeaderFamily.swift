/// Which proxy's header names carry the original request to `/api/auth/verify`
/// (`gateway.forward_auth.headers`).
///
/// One family, never both: a proxy that copies the client's headers into its auth request
/// (Caddy's `forward_auth`, Traefik without `authRequestHeaders`) would otherwise let a
/// client name the request decided on in the family the proxy does not set. A request
/// carrying the other family's fields is refused, not read.
public enum ForwardAuthHeaderFamily: String, Sendable, Equatable, CaseIterable {
    /// `X-Original-URI` and `X-Original-Method`, as nginx's `auth_request` examples set them.
    case nginx
    /// `X-Forwarded-Uri` and `X-Forwarded-Method`, as Caddy's `forward_auth` and Traefik's `forwardAuth` set them.
    case forwarded

    /// The field naming the original request target.
    var uriField: String { self == .nginx ? "X-Original-URI" : "X-Forwarded-Uri" }
    /// The field naming the original method.
    var methodField: String { self == .nginx ? "X-Original-Method" : "X-Forwarded-Method" }
    /// The other family.
    var other: ForwardAuthHeaderFamily { self == .nginx ? .forwarded : .nginx }
}
