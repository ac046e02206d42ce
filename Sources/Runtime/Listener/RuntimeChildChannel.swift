import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore

/// A connection to the Runtime's listener: Hummingbird's HTTP/1 channel with the agent
/// link's WebSocket upgrade, behind a `QuiesceRelay` so that a graceful stop reaches it
/// however far its first request has come.
struct RuntimeChildChannel: ServerChildChannel {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value

    let upgradeChannel: HTTP1WebSocketUpgradeChannel
    /// How long into a graceful stop a connection may stay open (`limits.shutdown_timeout_seconds`).
    let shutdownTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(QuiesceRelay(closeAfter: shutdownTimeout), position: .first)
        }.flatMap {
            upgradeChannel.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await upgradeChannel.handle(value: value, logger: logger)
    }
}
