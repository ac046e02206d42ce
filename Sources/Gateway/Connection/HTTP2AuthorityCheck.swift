import EdgeHTTP
import JOSE
import NIOCore
import NIOHPACK
import NIOHTTP2

/// Refuses an HTTP/2 request whose `host` field names another authority than its `:authority`
/// (RFC 9113 §8.3.1): 400 `invalid_request`, in gRPC's terms for a gRPC call.
///
/// swift-nio-http2's HTTP/1 codec keeps a `host` field when there is one and drops `:authority`;
/// routes by host and `X-Forwarded-Host` would then follow the one a proxy in front did not check.
/// Before the codec in a stream's pipeline, it reads the request's first `HEADERS` frame as it came.
final class HTTP2AuthorityCheck: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private var checked = false
    private var refused = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refused { return }
        guard !checked, case .headers(let headers) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        checked = true
        guard let authority = headers.headers.first(name: ":authority"), let host = headers.headers.first(name: "host"),
            !authority.utf8.elementsEqual(host.utf8, by: { Self.folded($0) == Self.folded($1) })
        else { return context.fireChannelRead(data) }
        refused = true
        let error = GatewayError.invalidRequest("the host field names another authority than :authority; send one, or the same in both")
        var fields = HPACKHeaders()
        if let grpc = GRPCRequest.contentType(headers.headers.first(name: "content-type")) {
            fields.add(name: ":status", value: "200")
            fields.add(name: "content-type", value: grpc)
            fields.add(name: "grpc-status", value: String(GRPCRequest.status(for: error)))
            fields.add(name: "grpc-message", value: GRPCRequest.percentEncoded(error.code + ": " + error.message))
            context.write(wrapOutboundOut(.headers(.init(headers: fields, endStream: true))), promise: nil)
        } else {
            let body = ByteBuffer(bytes: JSONWriter.bytes(error.json))
            fields.add(name: ":status", value: "400")
            fields.add(name: "content-type", value: "application/json")
            fields.add(name: "cache-control", value: "no-store")
            fields.add(name: "content-length", value: String(body.readableBytes))
            context.write(wrapOutboundOut(.headers(.init(headers: fields))), promise: nil)
            context.write(wrapOutboundOut(.data(.init(data: .byteBuffer(body), endStream: true))), promise: nil)
        }
        context.flush()
        context.close(promise: nil)
    }

    private static func folded(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}
