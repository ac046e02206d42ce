import JOSE
import NIOCore
import NIOHTTP1

/// The client connection a `ProxyExchange` answers on: what the exchange needs of the channel
/// handler that started it.
///
/// Two handlers host exchanges: `ProxyFrontHandler`, which reads plain requests straight from the
/// socket's bytes, and `ProxyChannelHandler`, which takes every other request from NIO's decoder.
/// Both live on the connection's event loop, as the exchange does.
protocol ProxyExchangeHost: AnyObject {
    var plane: DataPlane { get }
    /// The handler's context while it is in the pipeline.
    var context: ChannelHandlerContext? { get }
    /// This event loop's upstream connections.
    var pool: UpstreamPool? { get }
    var metricHandles: ProxyMetricHandles? { get }
    /// This event loop's storage for request and answer heads.
    var headBuffers: HeadBuffers? { get }
    /// The client's address as text (for `X-Forwarded-For`).
    var peerAddress: String? { get }
    var clientIsWritable: Bool { get }
    /// Relayed answers go to the client as NIO's HTTP/1 parts, framed by the codec after the host
    /// (an HTTP/2 stream's), rather than as HTTP/1.1 bytes written past the encoder.
    var relaysAnswerParts: Bool { get }
    /// The next request id on this connection.
    func nextRequestID() -> String
    /// Writes a part of a gateway-made answer (a refusal, 100 Continue).
    func writeToClient(_ part: HTTPServerResponsePart, flush: Bool)
    /// Writes a relayed answer's head (a host that `relaysAnswerParts`): the fields
    /// `exchange.addClientHeadFields` gives, in the host's own form.
    func writeAnswerHead(_ response: UpstreamResponseHead, of exchange: ProxyExchange)
    /// Writes bytes of a relayed answer, framed already.
    func writeBytesToClient(_ buffer: ByteBuffer)
    /// The answer written with `writeBytesToClient` has ended.
    func bytesAnswerEnded()
    func flushClient()
    /// Stops reading the client (the upstream cannot take more yet), until `resumeReads`.
    func holdReads()
    func resumeReads()
    /// The exchange in flight on this connection, if any.
    var currentExchange: ProxyExchange? { get }
    /// Makes sure a check runs by the current exchange's upstream deadline (`ProxyExchange.deadline`).
    func watchDeadline()
    /// The exchange's answer has ended (or failed).
    func exchangeFinished(requestEnded: Bool, closeConnection: Bool)
    /// The upstream answered a WebSocket's handshake with 101: from now on the client's bytes go
    /// to `exchange` raw, read by the returned `TunnelInboundHandler`; `nil` when the connection cannot be switched.
    func beginTunnel(_ exchange: ProxyExchange) -> TunnelInboundHandler?
}

extension ProxyExchangeHost {
    func writeToClient(_ part: HTTPServerResponsePart) { writeToClient(part, flush: false) }

    /// As NIO's HTTP/1 head, which the host's codec frames.
    func writeAnswerHead(_ response: UpstreamResponseHead, of exchange: ProxyExchange) {
        writeToClient(.head(exchange.clientHeadParts(for: response)))
    }
}

/// A scheduled check of upstream deadlines, and the deadline it was armed for.
///
/// One per connection: armed for the earliest deadline known, re-armed when it fires (a later
/// request's deadline is later) and armed again sooner only when a request's own deadline comes
/// before it (its `grpc-timeout`). A request answered in time schedules and cancels nothing.
struct UpstreamDeadlineCheck {
    let at: NIODeadline
    let task: Scheduled<Void>

    /// The check that runs by `deadline`: `current` when it already does, else a new one running
    /// `check` (and `current` cancelled); `nil` without an event loop.
    static func arm(
        _ current: UpstreamDeadlineCheck?, by deadline: NIODeadline, on eventLoop: (any EventLoop)?, _ check: @escaping () -> Void
    ) -> UpstreamDeadlineCheck? {
        if let current, current.at <= deadline { return current }
        current?.task.cancel()
        guard let eventLoop else { return nil }
        return UpstreamDeadlineCheck(at: deadline, task: eventLoop.assumeIsolated().scheduleTask(deadline: deadline, check))
    }
}

/// A host with one exchange at a time (an HTTP/1 connection, a stream channel), and one check of
/// its upstream deadline.
protocol SerialProxyExchangeHost: ProxyExchangeHost {
    /// The scheduled check of the current exchange's upstream deadline (`watchDeadline`); `nil` when none is.
    var upstreamDeadlineCheck: UpstreamDeadlineCheck? { get set }
}

extension SerialProxyExchangeHost {
    /// Makes sure a check runs by the current exchange's upstream deadline (`UpstreamDeadlineCheck`).
    func watchDeadline() {
        guard let deadline = currentExchange?.deadline else { return }
        upstreamDeadlineCheck = UpstreamDeadlineCheck.arm(upstreamDeadlineCheck, by: deadline, on: context?.eventLoop) { [weak self] in
            guard let self else { return }
            self.upstreamDeadlineCheck = nil
            guard let exchange = self.currentExchange, let deadline = exchange.deadline else { return }
            if deadline <= .now() {
                exchange.timedOut()
            } else {
                self.watchDeadline()
            }
        }
    }
}

/// One HTTP/2 connection's request ids, shared by its streams' handlers: the CSPRNG is read once
/// per connection, as for HTTP/1, not once per request (a `getpid` and a libcrypto call each).
package final class SharedRequestIDs {
    private var ids = ConnectionRequestIDs()

    package init() {}

    func next() -> String { ids.next() }
}

/// Request ids of one connection: 8 characters drawn from the CSPRNG once per connection, then a
/// counter; 12 base64url characters like the API's, without a libcrypto call (and its `getpid`) per request.
package struct ConnectionRequestIDs {
    private let prefix: String
    private var count: UInt32 = 0

    package init() {
        prefix = (try? SecureRandom.identifier(bytes: 6)) ?? "unknown0"
    }

    package mutating func next() -> String {
        count &+= 1
        let value = count & 0xFF_FFFF
        // The counter's 24 bits as 4 base64url characters after the prefix's 8: 12 ASCII bytes, a
        // string stored inline (no allocation).
        var id = prefix
        for shift in stride(from: 18, through: 0, by: -6) {
            id.unicodeScalars.append(Unicode.Scalar(Self.base64URLDigits[Int((value >> UInt32(shift)) & 0x3F)]))
        }
        return id
    }

    /// The base64url alphabet (RFC 4648 §5).
    static let base64URLDigits = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
}
