import NIOCore
import NIOPosix

/// One client connection's keep-alive upstream connection, for the floors that write requests
/// upstream as bytes: what is written before it is connected waits, then goes in one write.
final class UpstreamLink {
    private let address: SocketAddress
    private var channel: Channel?
    private var connecting = false
    private var queued = ByteBuffer()

    init(address: SocketAddress) { self.address = address }

    /// Writes `request` upstream (unflushed), connecting first on `client`'s event loop with the
    /// handler `makeHandler` gives.
    func forward(_ request: ByteBuffer, client: Channel, _ makeHandler: @escaping () -> ChannelHandler) {
        if let channel {
            channel.write(request, promise: nil)
            return
        }
        var request = request
        queued.writeBuffer(&request)
        guard !connecting else { return }
        connecting = true
        connectUpstream(address, for: client, { pipeline in try pipeline.addHandler(makeHandler()) }) { channel in
            self.channel = channel
            channel.writeAndFlush(self.queued, promise: nil)
            self.queued = ByteBuffer()
        }
    }

    func flush() { channel?.flush() }

    func close() { channel?.close(promise: nil) }
}
