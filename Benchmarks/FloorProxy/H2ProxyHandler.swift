import NIOCore
import NIOHPACK
import NIOHTTP2

/// `--codec h2-proxy`: the least a proxy from HTTP/2 to an HTTP/1.1 upstream can cost on
/// swift-nio-http2. Its connection handler alone (no stream channels): each stream's request
/// HEADERS become an HTTP/1.1 head written as bytes (with the 200-byte added header), on an
/// upstream connection of the client connection's own set that carries one request at a time (as
/// nginx's kept-alive upstreams do); the answer's head becomes HPACK headers, its body DATA frames.
/// No authentication, no limits, no logging: the floor a gateway on swift-nio-http2 stands on.
final class H2ProxyHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let address: SocketAddress
    private var idle: [H2UpstreamConnection] = []
    private var opened: [H2UpstreamConnection] = []
    private var context: ChannelHandlerContext?
    private var owesFlush = false

    init(upstream: SocketAddress) { address = upstream }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard case .headers(let request) = frame.payload else { return }
        guard request.endStream else {
            let refusal: HPACKHeaders = [":status": "501", "content-length": "0"]
            context.write(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .headers(.init(headers: refusal, endStream: true)))), promise: nil)
            owesFlush = true
            return
        }
        var head = ByteBuffer()
        head.reserveCapacity(512)
        var method = "GET", path = "/", authority = ""
        for (name, value, _) in request.headers where name.utf8.first == UInt8(ascii: ":") {
            switch name {
            case ":method": method = value
            case ":path": path = value
            case ":authority": authority = value
            default: break
            }
        }
        head.writeString(method)
        head.writeStaticString(" ")
        head.writeString(path)
        head.writeStaticString(" HTTP/1.1\r\nhost: ")
        head.writeString(authority)
        head.writeStaticString("\r\n")
        for (name, value, _) in request.headers where name.utf8.first != UInt8(ascii: ":") {
            head.writeString(name)
            head.writeStaticString(": ")
            head.writeString(value)
            head.writeStaticString("\r\n")
        }
        head.writeString("\(assertionHeaderName): \(assertionHeaderValue)\r\n\r\n")
        let upstream: H2UpstreamConnection
        if let reused = idle.popLast() {
            upstream = reused
        } else {
            upstream = H2UpstreamConnection(address: address, client: context.channel, owner: self)
            opened.append(upstream)
        }
        upstream.send(head, for: frame.streamID)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        for upstream in opened { upstream.flush() }
        flushIfOwed()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        for upstream in opened { upstream.close() }
        context.fireChannelInactive()
    }

    /// An answer's part for the client, from an upstream connection (on the same event loop).
    func relay(_ payload: HTTP2Frame.FramePayload, stream: HTTP2StreamID) {
        context?.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: payload)), promise: nil)
        owesFlush = true
    }

    func finished(_ upstream: H2UpstreamConnection) { idle.append(upstream) }

    func flushIfOwed() {
        guard owesFlush else { return }
        owesFlush = false
        context?.flush()
    }
}

/// One kept-alive upstream connection of an `H2ProxyHandler`, one request at a time: it parses
/// each answer's head into HPACK headers (the connection-specific fields dropped) and relays its
/// body, counted by Content-Length, as DATA frames.
final class H2UpstreamConnection: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private var channel: Channel?
    private var queued: ByteBuffer?
    private unowned let owner: H2ProxyHandler
    private var stream: HTTP2StreamID = .rootStream
    private var head = ByteBuffer()
    private var remainingBody = -1

    init(address: SocketAddress, client: Channel, owner: H2ProxyHandler) {
        self.owner = owner
        connectUpstream(address, for: client, { pipeline in try pipeline.addHandler(self) }) { channel in
            self.channel = channel
            if let queued = self.queued { channel.writeAndFlush(queued, promise: nil) }
            self.queued = nil
        }
    }

    func send(_ request: ByteBuffer, for stream: HTTP2StreamID) {
        self.stream = stream
        remainingBody = -1
        if let channel { channel.write(request, promise: nil) } else { queued = request }
    }

    func flush() { channel?.flush() }
    func close() { channel?.close(promise: nil) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if remainingBody < 0 {
            head.writeBuffer(&bytes)
            guard let headLength = HeadScan.headLength(head), let slice = head.readSlice(length: headLength) else { return }
            bytes = head
            head = ByteBuffer()
            let (headers, length) = Self.headers(slice)
            remainingBody = length
            owner.relay(.headers(.init(headers: headers, endStream: length == 0)), stream: stream)
            if length == 0 { return finish() }
        }
        guard let part = bytes.readSlice(length: min(remainingBody, bytes.readableBytes)), part.readableBytes > 0 else { return }
        remainingBody -= part.readableBytes
        owner.relay(.data(.init(data: .byteBuffer(part), endStream: remainingBody == 0)), stream: stream)
        if remainingBody == 0 { finish() }
    }

    func channelReadComplete(context: ChannelHandlerContext) { owner.flushIfOwed() }

    private func finish() {
        remainingBody = -1
        owner.finished(self)
    }

    /// The answer head's status and fields as HPACK headers, and its Content-Length (0 when absent):
    /// one pass over the bytes, names lower-cased as they are copied.
    static func headers(_ head: ByteBuffer) -> (HPACKHeaders, Int) {
        var headers = HPACKHeaders()
        var length = 0
        head.withUnsafeReadableBytes { bytes in
            var lineStart = 0
            var first = true
            while lineStart < bytes.count {
                var lineEnd = lineStart
                while lineEnd < bytes.count && bytes[lineEnd] != 0x0D { lineEnd += 1 }
                defer { lineStart = lineEnd + 2 }
                guard lineEnd > lineStart else { continue }
                if first {
                    first = false
                    // "HTTP/1.1 200 OK": the three digits after the first space.
                    let status = lineStart + 9
                    headers.add(name: ":status", value: status + 3 <= lineEnd ? String(decoding: bytes[status..<(status + 3)], as: UTF8.self) : "502")
                    continue
                }
                var colon = lineStart
                while colon < lineEnd && bytes[colon] != UInt8(ascii: ":") { colon += 1 }
                guard colon < lineEnd else { continue }
                var valueStart = colon + 1
                while valueStart < lineEnd && bytes[valueStart] == UInt8(ascii: " ") { valueStart += 1 }
                let name = String(unsafeUninitializedCapacity: colon - lineStart) { out in
                    for index in lineStart..<colon { out[index - lineStart] = bytes[index] | (bytes[index] >= 0x41 && bytes[index] <= 0x5A ? 0x20 : 0) }
                    return colon - lineStart
                }
                switch name {
                case "connection", "keep-alive", "transfer-encoding": continue
                case "content-length":
                    length = 0
                    for byte in bytes[valueStart..<lineEnd] where byte >= 0x30 && byte <= 0x39 { length = length * 10 + Int(byte - 0x30) }
                default: break
                }
                headers.add(name: name, value: String(decoding: bytes[valueStart..<lineEnd], as: UTF8.self))
            }
        }
        return (headers, length)
    }
}
