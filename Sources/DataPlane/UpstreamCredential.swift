/// What a route sends its upstream as the caller's own credential there (`upstream_credential`),
/// in place of nothing: the client's credential is never passed on.
public enum UpstreamCredential: Sendable, Equatable {
    /// `{connection: NAME}`: the person's token at that connected service, as `Authorization: Bearer`.
    case connection(String)
}
