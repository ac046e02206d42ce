import DataPlane
import Hummingbird
import NIOCore

/// The per-request context: Hummingbird's core storage plus the socket peer.
public struct GatewayRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The TCP peer's IP address (before any trusted-proxy header is considered).
    public let peerAddress: String?
    /// The event loop of the request's connection.
    public let eventLoop: any EventLoop
    /// The protocol the request came in (`HTTP/2` on a stream of an HTTP/2 connection), for the access log.
    public let httpVersion: String

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
        eventLoop = source.channel.eventLoop
        // A connection's parent is the listening socket; an HTTP/2 stream's is its connection.
        httpVersion = source.channel.parent?.parent == nil ? "HTTP/1.1" : "HTTP/2"
    }

    /// Bodies are read with an explicit limit by each route.
    public var maxUploadSize: Int { 1 << 20 }
}
