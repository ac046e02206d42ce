import NIOCore
import NIOHTTP2

/// Closes an HTTP/2 connection on an error swift-nio-http2 reports for the connection as a whole.
///
/// On a connection error (a protocol violation, a CONTINUATION or control-frame flood, a header
/// list past the limit, too many resets) swift-nio-http2 sends `GOAWAY` and reports the error,
/// leaving the close to the pipeline: without this handler the connection stayed open, and a
/// flooding client went on being read (160 MB of CONTINUATION frames read after the `GOAWAY`).
/// Last in the connection's pipeline. A stream's error (`NIOHTTP2Errors.StreamError`, its stream
/// reset already) comes here too, and leaves the connection alone: the rule grpc-swift's server follows.
final class HTTP2ConnectionErrorHandler: ChannelInboundHandler {
    typealias InboundIn = Any

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is NIOHTTP2Errors.StreamError { return }
        context.close(promise: nil)
    }
}
