/// How the gateway speaks to a route's upstream (`protocol` on a `gateway.routes` entry).
public enum UpstreamProtocol: String, Sendable, Hashable, CaseIterable {
    /// HTTP/1.1 on pooled keep-alive connections, one request at a time on each (the default).
    case http1
    /// HTTP/2 with prior knowledge over plain TCP (an `http://` upstream): one connection per
    /// event loop carries every stream; trailers are relayed (gRPC).
    case h2c
    /// HTTP/2 over TLS, negotiated by ALPN (an `https://` upstream).
    case h2
}
