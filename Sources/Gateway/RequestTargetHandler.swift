import HTTPTypes
import JOSE
import Logging
import NIOCore
import NIOHTTPTypes
import TrafficCop

/// The first step of every HTTP request on the public listener: the request
/// target in its one normalised spelling (`RequestTarget`), and request
/// framing the gateway can forward faithfully.
///
/// Sits right after the HTTP/1 codec, before Hummingbird's connection handler
/// and the data plane, so the router, `gateway.routes` and every upstream see
/// the same path. A head it refuses is answered 400 `invalid_request` in turn
/// (after the answers to requests already passed on) and the connection is
/// closed: nothing more is read from it.
///
/// Refused: a path `RequestTarget` will not route, a `Transfer-Encoding`
/// other than exactly `chunked` (`gzip, chunked` would reach an upstream
/// re-framed as plain `chunked`, its bytes read as something they are not),
/// and `CONNECT` (the gateway is no forward proxy).
final class RequestTargetHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let logger: Logger
    /// Requests passed on whose answers have not ended yet.
    private var unanswered = 0
    /// A refusal waiting for the answers before it; once set, nothing more is read or passed on.
    private var refusal: GatewayError?

    init(logger: Logger) {
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard refusal == nil else { return }
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        do {
            try Self.screen(&head)
        } catch {
            refusal = error
            if unanswered == 0 { refuse(context: context) }
            return
        }
        unanswered += 1
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    func read(context: ChannelHandlerContext) {
        guard refusal == nil else { return }
        context.read()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        unanswered = max(0, unanswered - 1)
        context.write(data, promise: promise)
        if unanswered == 0, refusal != nil { refuse(context: context) }
    }

    /// Writes the refusal and closes the connection.
    private func refuse(context: ChannelHandlerContext) {
        guard let error = refusal else { return }
        var fields = error.headers
        let body = ByteBuffer(bytes: JSONWriter.bytes(error.json))
        fields[.contentLength] = String(body.readableBytes)
        fields[.connection] = "close"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: error.status, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        logger.info("request", metadata: ["route": "-", "status": "\(error.status.code)", "error": "\(error.code)", "message": "\(error.message)"])
    }

    /// Puts `head`'s path in its normalised spelling (untouched when it is already),
    /// or throws the 400 that refuses the request.
    static func screen(_ head: inout HTTPRequest) throws(GatewayError) {
        // The HTTP parser stops reading a connection after CONNECT (the rest is a tunnel), and an
        // answer to it has no body: refused here, the connection closed, rather than left hanging.
        if head.method == .connect {
            throw .invalidRequest("CONNECT is not served here: the gateway is not a forward proxy")
        }
        let codings = head.headerFields[values: .transferEncoding]
        if !codings.isEmpty, !Self.isChunkedOnly(codings) {
            throw .invalidRequest("the only transfer coding accepted in a request is chunked; send the body with Content-Length or Transfer-Encoding: chunked")
        }
        guard let target = head.path else { throw .invalidRequest(RequestTargetError.notOriginForm.message) }
        let (path, query) = RequestTarget.split(target[...])
        let normalized: Substring
        do {
            normalized = try RequestTarget.normalizedPath(path)
        } catch {
            throw .invalidRequest(error.message)
        }
        // Unchanged (the common case): the head is left as it is, nothing allocated.
        guard normalized != path else { return }
        head.path = query.map { normalized + "?" + $0 } ?? String(normalized)
    }

    /// Exactly one coding, `chunked` (in any case, with optional whitespace).
    static func isChunkedOnly(_ values: [String]) -> Bool {
        var count = 0
        for value in values {
            for coding in value.split(separator: ",", omittingEmptySubsequences: false) {
                count += 1
                var text = coding
                while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
                while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
                guard text.lowercased() == "chunked" else { return false }
            }
        }
        return count == 1
    }
}
