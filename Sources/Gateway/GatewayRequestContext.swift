import Hummingbird
import NIOCore

/// The per-request context: Hummingbird's core storage plus the socket peer.
public struct GatewayRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The TCP peer's IP address (before any trusted-proxy header is considered).
    public let peerAddress: String?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
    }

    /// Bodies are read with an explicit limit by each route.
    public var maxUploadSize: Int { 1 << 20 }
}
