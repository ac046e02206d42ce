import NIOCore
import NIOHTTP1

/// The last of an HTTP/2 stream's handlers until a request gets past the data plane: then it
/// has the router's part of the pipeline built (`start`), hands the request on, and leaves.
///
/// A stream the data plane answers never reaches it, so such a stream costs no task and no
/// conversion to HTTPTypes: the router's task starts for the streams it serves alone.
final class HTTP2StreamHandoff: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    private let start: (any Channel) throws -> Void

    init(start: @escaping (any Channel) throws -> Void) {
        self.start = start
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        do {
            try start(context.channel)
        } catch {
            context.close(promise: nil)
            return
        }
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// An error no handler before it answered (the HTTP/1 codec's, say) ends the stream: left
    /// open, it would be neither answered nor reset, and would keep its connection from idling.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
