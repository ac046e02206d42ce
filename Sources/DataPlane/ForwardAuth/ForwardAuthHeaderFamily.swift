import HTTPTypes

/// Which proxy's header names carry the original request to `/api/auth/verify`
/// (`gateway.forward_auth.headers`).
///
/// One family, never both: a proxy that copies the client's headers into its auth request
/// (Caddy's `forward_auth`, Traefik without `authRequestHeaders`) would otherwise let a
/// client name the request decided on in the family the proxy does not set. A request
/// carrying the other family's fields is refused, not read.
public enum ForwardAuthHeaderFamily: String, Sendable, Equatable, CaseIterable {
    /// `X-Original-URI`, `X-Original-Method` (and `X-Original-Host`), as nginx's `auth_request` examples set them.
    case nginx
    /// `X-Forwarded-Uri`, `X-Forwarded-Method` (and `X-Forwarded-Host`), as Caddy's `forward_auth` and Traefik's `forwardAuth` set them.
    case forwarded

    /// The field naming the original request target.
    package var uriField: HTTPField.Name { self == .nginx ? Self.originalURI : Self.forwardedURI }
    /// The field naming the original method.
    package var methodField: HTTPField.Name { self == .nginx ? Self.originalMethod : Self.forwardedMethod }
    /// The field naming the original host, read when a route is bound to a host: `X-Original-Host`
    /// (which the shipped nginx configuration sets from `$host`), or `X-Forwarded-Host`.
    package var hostField: HTTPField.Name { self == .nginx ? Self.originalHost : Self.forwardedHost }
    /// The other family.
    package var other: ForwardAuthHeaderFamily { self == .nginx ? .forwarded : .nginx }

    // Valid field names: the unwraps cannot fail, and each name is made once.
    private static let originalURI = HTTPField.Name("X-Original-URI")!
    private static let originalMethod = HTTPField.Name("X-Original-Method")!
    private static let originalHost = HTTPField.Name("X-Original-Host")!
    private static let forwardedHost = HTTPField.Name("X-Forwarded-Host")!
    private static let forwardedURI = HTTPField.Name("X-Forwarded-Uri")!
    private static let forwardedMethod = HTTPField.Name("X-Forwarded-Method")!
}
