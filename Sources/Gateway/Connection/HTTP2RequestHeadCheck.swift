import EdgeHTTP
import JOSE
import NIOCore
import NIOHPACK
import NIOHTTP2

/// Answers an HTTP/2 request whose pseudo-headers the gateway does not serve, before the HTTP/1
/// codec reads them: 400 `invalid_request` (in gRPC's terms for a gRPC call), and the stream closed
/// once the answer is out.
///
/// - `CONNECT`: the gateway is no forward proxy (as on HTTP/1.1).
/// - No `:authority`, `:scheme` or `:path`: swift-nio-http2's HTTP/1 codec needs all three, and
///   its error reached no handler that answered, so such a stream was never answered nor reset
///   (thousands of them held memory, and their connection never idled).
/// - A `:path` that does not start with `/` (but `*` for `OPTIONS`): the absolute form
///   (`https://host/p`) would pick the route by its host over `:authority` (RFC 9113 §8.3.1 leaves
///   it to `CONNECT` and `OPTIONS`).
/// - A `host` field naming another authority than `:authority` (§8.3.1): the codec keeps `host`
///   and drops `:authority`, so routes by host would follow the one a proxy in front did not check.
final class HTTP2RequestHeadCheck: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private var checked = false
    private var refused = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refused { return }
        guard !checked, case .headers(let headers) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        checked = true
        guard let refusal = Self.refusal(headers.headers) else { return context.fireChannelRead(data) }
        refused = true
        refuse(refusal, grpc: GRPCRequest.contentType(headers.headers.first(name: "content-type")), context: context)
    }

    /// Why a request's header block is not served, or `nil` when it may go on.
    static func refusal(_ headers: HPACKHeaders) -> GatewayError? {
        let method = headers.first(name: ":method")
        if method == "CONNECT" { return .invalidRequest("CONNECT is not served here: the gateway is not a forward proxy") }
        guard let authority = headers.first(name: ":authority") else {
            return .invalidRequest("an HTTP/2 request names its host in :authority; send it")
        }
        guard let path = headers.first(name: ":path"), headers.first(name: ":scheme") != nil else {
            return .invalidRequest("an HTTP/2 request carries :scheme and :path; send both")
        }
        guard path.utf8.first == UInt8(ascii: "/") || (path == "*" && method == "OPTIONS") else {
            return .invalidRequest("an HTTP/2 :path starts with /; send the path alone and the host in :authority")
        }
        if let host = headers.first(name: "host"), !authority.utf8.elementsEqual(host.utf8, by: { Self.folded($0) == Self.folded($1) }) {
            return .invalidRequest("the host field names another authority than :authority; send one, or the same in both")
        }
        return nil
    }

    /// Writes the refusal (a JSON body, or a gRPC trailers-only answer) and closes the stream after
    /// it: `HTTP2StreamEarlyAnswer` holds the close until the answer's last frame is out.
    private func refuse(_ error: GatewayError, grpc: String?, context: ChannelHandlerContext) {
        var fields = HPACKHeaders()
        if let grpc {
            fields.add(name: ":status", value: "200")
            fields.add(name: "content-type", value: grpc)
            fields.add(name: "grpc-status", value: String(GRPCRequest.status(for: error)))
            fields.add(name: "grpc-message", value: GRPCRequest.percentEncoded(error.code + ": " + error.message))
            context.write(wrapOutboundOut(.headers(.init(headers: fields, endStream: true))), promise: nil)
        } else {
            let body = ByteBuffer(bytes: JSONWriter.bytes(error.json))
            fields.add(name: ":status", value: String(error.status.code))
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
