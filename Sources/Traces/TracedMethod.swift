/// A request's method as a span carries it: as written when the gateway knows it, `_OTHER` in
/// `http.request.method` and `HTTP` in the span's name otherwise (OpenTelemetry's HTTP
/// conventions), since the client chooses it and HTTP/2 lets it be any token: names and values
/// at the collector may not grow without bound.
public struct TracedMethod: Sendable {
    /// `http.request.method`'s value.
    public let attribute: String
    /// The span name's first word.
    public let name: String

    public init(_ method: String, known: Bool) {
        (attribute, name) = known ? (method, method) : ("_OTHER", "HTTP")
    }
}
