import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The agent socket's WebSocket upgrade: NIO's handshake (its checks of the request and the
/// 101's `Sec-WebSocket-Accept`), then the socket's own pipeline.
///
/// NIO's upgrader would add its frame encoder, decoder and protocol-error handler before handing
/// over; the agent socket reads and writes its frames with `AgentFrameCodec` instead (one handler
/// for an idle socket to hold, not four), so `upgrade` builds the pipeline with `upgradePipeline` alone.
struct AgentSocketUpgrader<UpgradeResult: Sendable>: NIOTypedHTTPServerProtocolUpgrader {
    /// Answers the handshake; its own pipeline handler is never called.
    let handshake: NIOTypedWebSocketServerUpgrader<UpgradeResult>
    /// Adds the socket's handlers once the 101 has been written.
    let upgradePipeline: @Sendable (any Channel, HTTPRequestHead) -> EventLoopFuture<UpgradeResult>

    init(
        handshake: NIOTypedWebSocketServerUpgrader<UpgradeResult>,
        upgradePipeline: @escaping @Sendable (any Channel, HTTPRequestHead) -> EventLoopFuture<UpgradeResult>
    ) {
        self.handshake = handshake
        self.upgradePipeline = upgradePipeline
    }

    var supportedProtocol: String { handshake.supportedProtocol }
    var requiredUpgradeHeaders: [String] { handshake.requiredUpgradeHeaders }

    func buildUpgradeResponse(channel: any Channel, upgradeRequest: HTTPRequestHead, initialResponseHeaders: HTTPHeaders) -> EventLoopFuture<HTTPHeaders> {
        handshake.buildUpgradeResponse(channel: channel, upgradeRequest: upgradeRequest, initialResponseHeaders: initialResponseHeaders)
    }

    func upgrade(channel: any Channel, upgradeRequest: HTTPRequestHead) -> EventLoopFuture<UpgradeResult> {
        upgradePipeline(channel, upgradeRequest)
    }
}
