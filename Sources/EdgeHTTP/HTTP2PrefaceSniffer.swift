import NIOCore

/// Tells an HTTP/2 client from an HTTP/1 one by a connection's first bytes, has the
/// connection's pipeline built for what it speaks, then makes way.
///
/// An HTTP/2 client opens with the connection preface (RFC 9113 §3.4), whether it
/// negotiated `h2` by ALPN or knows the gateway speaks it (h2c with prior knowledge, what a
/// load balancer in front does). Any other first byte is HTTP/1: the decision is made at
/// the first byte that differs from the preface, so an HTTP/1 request waits for nothing.
/// The bytes read meanwhile go on to the handlers just built, as they came. The head
/// timeout before this handler bounds a client that sends part of the preface and stops; since
/// that handler leaves at the preface's first blank line (byte 18), this one closes a connection
/// still undecided at `timeout` itself.
package final class HTTP2PrefaceSniffer: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer

    /// `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`.
    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private let configure: (_ isHTTP2: Bool) throws -> Void
    private let abandoned: () -> Void
    private var buffered: ByteBuffer?
    private var decided = false
    /// How long the preface may take (`limits.request_head_timeout_seconds`).
    private let timeout: TimeAmount
    private var deadlineCheck: Scheduled<Void>?

    /// - Parameters:
    ///   - configure: builds the pipeline after this handler, for HTTP/2 or HTTP/1; on the event loop.
    ///   - abandoned: the connection ended (or `configure` threw) before it was decided.
    ///   - timeout: how long the client may take to be told apart; then the connection closes.
    package init(timeout: TimeAmount, configure: @escaping (_ isHTTP2: Bool) throws -> Void, abandoned: @escaping () -> Void) {
        self.timeout = timeout
        self.configure = configure
        self.abandoned = abandoned
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        deadlineCheck = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [weak self] in
            guard let self, !self.decided else { return }
            // While the head timeout is still ahead of this handler, it answers (408) and closes.
            guard (try? context.pipeline.syncOperations.context(handlerType: RequestHeadTimeoutHandler.self)) == nil else { return }
            self.decided = true
            self.buffered = nil
            self.abandoned()
            context.close(promise: nil)
        }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        deadlineCheck?.cancel()
        deadlineCheck = nil
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !decided else { return context.fireChannelRead(data) }
        var incoming = unwrapInboundIn(data)
        var bytes = incoming
        if var earlier = buffered {
            earlier.writeBuffer(&incoming)
            bytes = earlier
        }
        buffered = bytes
        guard let isHTTP2 = Self.decision(bytes) else { return }
        decided = true
        do {
            try configure(isHTTP2)
        } catch {
            abandoned()
            context.close(promise: nil)
            return
        }
        buffered = nil
        context.fireChannelRead(wrapInboundOut(bytes))
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// `true` for the whole preface, `false` at the first byte that differs from it, `nil` while
    /// what came so far is the start of the preface.
    static func decision(_ bytes: ByteBuffer) -> Bool? {
        let count = min(bytes.readableBytes, preface.count)
        let matches = bytes.withUnsafeReadableBytes { raw in
            (0..<count).allSatisfy { raw[$0] == preface[$0] }
        }
        if !matches { return false }
        return count == preface.count ? true : nil
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        if decided { return context.fireChannelReadComplete() }
        // Part of the preface so far: ask for the rest.
        context.read()
    }

    /// The client closed its side before it could be told apart: nothing to answer, the connection closes.
    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if !decided, case ChannelEvent.inputClosed = event {
            decided = true
            abandoned()
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        if !decided {
            decided = true
            abandoned()
        }
        context.fireChannelInactive()
    }
}
