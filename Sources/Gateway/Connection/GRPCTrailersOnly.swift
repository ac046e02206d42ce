import NIOCore
import NIOHTTP2

/// Sends a gRPC answer that has no message as one `HEADERS` frame ending the stream (gRPC's
/// trailers-only form), as gRPC servers do, instead of a head and an empty `DATA` frame.
///
/// A refusal is written as NIO's HTTP/1 parts, a head holding `grpc-status` and an end, which
/// the HTTP/2 codec turns into two frames; this handler, after the codec, holds such a head
/// until the next frame: an empty last `DATA` joins it, anything else follows it as it came.
final class GRPCTrailersOnly: ChannelOutboundHandler {
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// The answer's head, held; `nil` when none is.
    private var held: (headers: HTTP2Frame.FramePayload.Headers, promise: EventLoopPromise<Void>?)?
    /// Only an answer's first `HEADERS` can be a trailers-only head.
    private var sawHead = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = unwrapOutboundIn(data)
        if let head = held {
            held = nil
            if case .data(let body) = frame, body.endStream, case .byteBuffer(let bytes) = body.data, bytes.readableBytes == 0 {
                var headers = head.headers
                headers.endStream = true
                return context.write(wrapOutboundOut(.headers(headers)), promise: Self.joined(head.promise, promise, on: context.eventLoop))
            }
            context.write(wrapOutboundOut(.headers(head.headers)), promise: head.promise)
            return context.write(data, promise: promise)
        }
        if !sawHead, case .headers(let headers) = frame {
            sawHead = true
            if !headers.endStream, headers.headers.contains(name: "grpc-status") {
                held = (headers, promise)
                return
            }
        }
        context.write(data, promise: promise)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if let head = held {
            held = nil
            context.write(wrapOutboundOut(.headers(head.headers)), promise: head.promise)
            context.flush()
        }
        context.close(mode: mode, promise: promise)
    }

    /// One promise completing both.
    private static func joined(_ first: EventLoopPromise<Void>?, _ second: EventLoopPromise<Void>?, on eventLoop: any EventLoop) -> EventLoopPromise<Void>? {
        guard let first else { return second }
        guard let second else { return first }
        let both = eventLoop.makePromise(of: Void.self)
        both.futureResult.cascade(to: first)
        both.futureResult.cascade(to: second)
        return both
    }
}
