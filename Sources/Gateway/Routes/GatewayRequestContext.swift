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

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
        eventLoop = source.channel.eventLoop
    }

    /// Bodies are read with an explicit limit by each route.
    public var maxUploadSize: Int { 1 << 20 }
}
