import HTTPTypes
import JOSE
import Logging
import NIOCore
import NIOHTTP1
import TrafficCop

/// The first step of every HTTP request on the public listener: the request
/// target in its one normalised spelling (`RequestTarget`), and request
/// framing the gateway can forward faithfully.
///
/// Sits right after NIO's HTTP/1 decoder, before the data plane and the
/// conversion to HTTPTypes for Hummingbird, so the router, `gateway.routes`
/// and every upstream see the same path. A head it refuses is answered 400
/// `invalid_request` in turn (after the answers to requests already passed
/// on) and the connection is closed: nothing more is read from it.
///
/// Refused: a path `RequestTarget` will not route, more than one `Host`
/// (RFC 9112 §3.2), a `Transfer-Encoding` other than exactly `chunked`
/// (`gzip, chunked` would reach an upstream re-framed as plain `chunked`, its
/// bytes read as something they are not), and `CONNECT` (the gateway is no
/// forward proxy). An absolute-form target (`http://host/path`) is served as
/// its path, as before this handler moved ahead of the HTTPTypes conversion.
///
/// It also keeps the connection's books of owed answers (`OwedAnswers`): each
/// answer is framed for its own request, whoever writes it. An answer to a
/// `HEAD` that passes through here (Hummingbird's, a gateway-made refusal)
/// loses its body and its chunked terminator, keeping the head's framing
/// fields (RFC 9110 §9.3.2); a relayed answer, framed by `ProxyExchange` and
/// written past NIO's encoder, settles its request with `AnswerEnded`. A head
/// NIO's decoder cannot parse is answered (431 or 400) like a refused head: in
/// turn, after the answers owed before it.
package final class RequestTargetHandler: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = HTTPServerRequestPart
    package typealias OutboundIn = HTTPServerResponsePart
    package typealias OutboundOut = HTTPServerResponsePart

    let logger: Logger
    /// Requests passed on whose answers have not ended yet, oldest first.
    private var owed = OwedAnswers()
    /// The answer being written answers a `HEAD`: its body parts are dropped.
    private var suppressingBody = false
    /// A refusal waiting for the answers before it; once set, nothing more is read or passed on.
    private var refusal: GatewayError?
    /// The refused request was a `HEAD`: its refusal goes without a body.
    private var refusalAnswersHEAD = false
    /// The refused request was a gRPC call (its content type): its refusal is gRPC's (`GRPCRequest`).
    private var refusalGRPCContentType: String?
    /// A request passed on closes the connection after its answer (`Connection: close`): what
    /// follows it is not read, answered or refused (RFC 9112 §9.6; NIO's parser reads nothing after it).
    private var closingAfterOwed = false
    /// The request being read asked to close after its answer; `closingAfterOwed` from its end.
    private var requestAsksClose = false
    /// A head was passed on and its `.end` has not come yet: a parse error now is in that request's
    /// body, and that request has its answer (or will have it) from whoever it was passed to.
    private var readingBody = false
    /// A parse error in a passed-on request's body: nothing more is read, and the connection closes
    /// once the answers owed have ended, with no answer of its own (one request, one answer).
    private var abandoned = false

    package init(logger: Logger) {
        self.logger = logger
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard refusal == nil, !closingAfterOwed, !abandoned else { return }
        guard case .head(var head) = unwrapInboundIn(data) else {
            if case .end = unwrapInboundIn(data) {
                readingBody = false
                if requestAsksClose { closingAfterOwed = true }
            }
            context.fireChannelRead(data)
            return
        }
        do {
            try Self.screen(&head)
        } catch {
            refusalGRPCContentType = GRPCRequest.contentType(head.headers.first(name: "content-type"))
            refuse(error, answeringHEAD: head.method == .HEAD, context: context)
            return
        }
        owed.owe(isHEAD: head.method == .HEAD)
        requestAsksClose = head.version.major == 1 && !head.isKeepAlive  // an HTTP/2 stream carries one request, its connection others
        readingBody = true
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    /// A head NIO's decoder could not parse: answered in turn, then closed. The decoder reads no
    /// further; what comes after (the rest of that read) is reported as `dataReceivedInErrorState`,
    /// which must not reach the handlers behind: they would close the connection on it, before the
    /// answers owed were written (and under an exchange still in flight).
    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if case ByteToMessageDecoderError.dataReceivedInErrorState = error { return }
        guard let parseError = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        guard refusal == nil, !closingAfterOwed, !abandoned else { return }
        if readingBody {
            // The malformed bytes are in the body of a request already passed on: its answer is its
            // own (perhaps written already). A 400 now would be a second answer to that request.
            abandoned = true
            logger.info("request body malformed; connection closed", metadata: ["error": "\(parseError)"])
            if owed.count == 0 { context.close(promise: nil) }
            return
        }
        refuse(HTTPParseErrorResponder.answer(to: parseError), answeringHEAD: false, context: context)
    }

    /// Refuses the request being read: at once when no answer is owed, else once the owed ones have ended.
    private func refuse(_ error: GatewayError, answeringHEAD: Bool, context: ChannelHandlerContext) {
        refusal = error
        refusalAnswersHEAD = answeringHEAD
        if owed.count == 0 { writeRefusal(context: context) }
    }

    package func read(context: ChannelHandlerContext) {
        guard refusal == nil, !closingAfterOwed, !abandoned else { return }
        context.read()
    }

    /// An answer written as bytes past NIO's encoder (a relayed upstream answer, `ProxyExchange`)
    /// has ended: it counts as the `.end` this handler would otherwise have seen go by.
    package struct AnswerEnded {
        package init() {}
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            // An interim answer (100 Continue) is followed by the final one, which the request still awaits.
            if head.status.code >= 200 || head.status == .switchingProtocols { suppressingBody = owed.currentAnswersHEAD }
            context.write(data, promise: promise)
        case .body where suppressingBody:
            // Nothing goes out; an empty write completes the promise in order.
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer()))), promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            if suppressingBody {
                // Not `.end`: NIO's encoder would end a chunked head with the last chunk, a body a HEAD answer has none of.
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer()))), promise: promise)
                suppressingBody = false
            } else {
                context.write(data, promise: promise)
            }
            answerEnded(context: context)
        }
    }

    package func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is AnswerEnded else { return context.triggerUserOutboundEvent(event, promise: promise) }
        promise?.succeed(())
        answerEnded(context: context)
    }

    private func answerEnded(context: ChannelHandlerContext) {
        owed.settle()
        guard owed.count == 0 else { return }
        if refusal != nil {
            writeRefusal(context: context)
        } else if abandoned {
            context.close(promise: nil)
        }
    }

    /// Writes the refusal and closes the connection.
    private func writeRefusal(context: ChannelHandlerContext) {
        guard let error = refusal else { return }
        let body = ByteBuffer(bytes: JSONWriter.bytes(error.json))
        if let grpc = refusalGRPCContentType {
            context.write(wrapOutboundOut(.head(error.grpcResponseHead(contentType: grpc) { $0.add(name: "Connection", value: "close") })), promise: nil)
        } else {
            context.write(wrapOutboundOut(.head(error.responseHead(contentLength: body.readableBytes, close: true))), promise: nil)
            if !refusalAnswersHEAD { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        logger.info("request", metadata: ["route": "-", "status": "\(error.status.code)", "error": "\(error.code)", "message": "\(error.message)"])
    }

    /// Puts `head`'s target in its normalised spelling (untouched when it is already),
    /// or throws the 400 that refuses the request.
    package static func screen(_ head: inout HTTPRequestHead) throws(GatewayError) {
        // The HTTP parser stops reading a connection after CONNECT (the rest is a tunnel), and an
        // answer to it has no body: refused here, the connection closed, rather than left hanging.
        if head.method == .CONNECT {
            throw .invalidRequest("CONNECT is not served here: the gateway is not a forward proxy")
        }
        var hosts = 0
        var codings: [String] = []
        var proxyConnectionClose = false
        for header in head.headers {
            // The length first: most names are none of these, and are passed over after one comparison.
            switch header.name.utf8.count {
            case 4 where HeaderScreen.equalsLowercased(header.name.utf8, "host"): hosts += 1
            case 17 where HeaderScreen.equalsLowercased(header.name.utf8, "transfer-encoding"): codings.append(header.value)
            case 16 where HeaderScreen.equalsLowercased(header.name.utf8, "proxy-connection"):
                proxyConnectionClose = proxyConnectionClose || HeaderScreen.listsToken(header.value.utf8[...], "close")
            default: break
            }
        }
        // NIO's parser (llhttp) reads `Proxy-Connection: close` as `Connection: close` and parses nothing
        // after that request: so does everything after this handler, which reads `Connection` alone.
        if proxyConnectionClose { head.headers.add(name: "Connection", value: "close") }
        if hosts > 1 {
            throw .invalidRequest("a request has one Host header; send it once")
        }
        if !codings.isEmpty, !Self.isChunkedOnly(codings) {
            throw .invalidRequest("the only transfer coding accepted in a request is chunked; send the body with Content-Length or Transfer-Encoding: chunked")
        }
        let target = Self.originForm(head.uri)
        if target.utf8.count != head.uri.utf8.count, let authority = Self.authority(ofAbsoluteForm: head.uri) {
            // The target's host is the request's, whatever Host says (RFC 9112 §3.2.2), as a proxy in front reads it:
            // routes are chosen by it, and the upstream's X-Forwarded-Host names it.
            guard !authority.isEmpty else { throw .invalidRequest("an absolute-form request target names no host; send the path alone") }
            head.headers.replaceOrAdd(name: "Host", value: String(authority))
        }
        let (path, query) = RequestTarget.split(target)
        let normalized: Substring
        do {
            normalized = try RequestTarget.normalizedPath(path)
            try RequestTarget.checkQuery(query)
        } catch {
            throw .invalidRequest(error.message)
        }
        // Unchanged (the common case): the head is left as it is, nothing allocated.
        guard !normalized.utf8.elementsEqual(path.utf8) || target.utf8.count != head.uri.utf8.count else { return }
        head.uri = query.map { normalized + "?" + $0 } ?? String(normalized)
    }

    /// The path and query of an absolute-form target (`http://host/p?q` is `/p?q`, `http://host` is `/`);
    /// any other target as it is (a target that is neither is refused by `RequestTarget`).
    static func originForm(_ uri: String) -> Substring {
        let target = uri[...]
        guard target.utf8.first != UInt8(ascii: "/") else { return target }
        let lowered = target.prefix(8).lowercased()
        let scheme = lowered.hasPrefix("http://") ? 7 : lowered.hasPrefix("https://") ? 8 : 0
        guard scheme > 0 else { return target }
        let rest = target.utf8.dropFirst(scheme)
        guard let start = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) else { return "/" }
        let tail = target[start...]
        return tail.utf8.first == UInt8(ascii: "/") ? tail : Substring("/" + tail)
    }

    /// The authority of an absolute-form target (`http://Host:1/p` is `Host:1`); `nil` for an origin-form one.
    static func authority(ofAbsoluteForm uri: String) -> Substring? {
        let lowered = uri.prefix(8).lowercased()
        let scheme = lowered.hasPrefix("http://") ? 7 : lowered.hasPrefix("https://") ? 8 : 0
        guard scheme > 0 else { return nil }
        let rest = uri.dropFirst(scheme)
        return rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
    }

    /// Exactly one coding, `chunked` (in any case, with optional whitespace).
    static func isChunkedOnly(_ values: [String]) -> Bool {
        var count = 0
        for value in values {
            for coding in value.split(separator: ",", omittingEmptySubsequences: false) {
                count += 1
                guard HeaderScreen.equalsLowercased(coding.trimmingWhitespace.utf8, "chunked") else { return false }
            }
        }
        return count == 1
    }
}

extension Substring {
    /// Without the spaces and tabs at either end (a field value's optional whitespace, RFC 9110 §5.6.3).
    var trimmingWhitespace: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}
