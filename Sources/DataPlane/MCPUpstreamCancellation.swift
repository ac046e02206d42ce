import EdgeHTTP
import JOSE
import Logging
import MCPPolicy
import NIOCore
import NIOHTTP1
import RuntimeAPI
import RuntimeAccess

/// Tells an MCP server to stop working on a request whose caller's access ended while it was under
/// way: one `notifications/cancelled` (MCP's cancellation utility) POSTed to the route's upstream,
/// on a connection or stream of its own, its answer read and dropped, the whole bounded by
/// `timeout`.
///
/// Sent for revisions before 2026-07-28, whose Streamable HTTP transport does not take a closed
/// request as a cancellation; from 2026-07-28 the closed stream is the signal and no notification
/// is expected. Either way the request's own upstream connection (HTTP/1.1) or stream (h2, h2c) is
/// closed too.
final class MCPUpstreamCancellation: UpstreamConnectionDelegate {
    /// How long a cancellation may take before its connection is closed.
    static let timeout = TimeAmount.seconds(5)
    /// The fields of the cancelled request that a notification does not carry: its body's, and the
    /// 2026-07-28 fields that name the request's method.
    static let requestOnlyFields: Set<String> = [
        "content-type", "content-length", "content-encoding", "transfer-encoding", "accept", "accept-encoding", "expect", "mcp-method", "mcp-name",
        "last-event-id",
    ]

    private let eventLoop: any EventLoop
    private let logger: Logger
    private var connection: (pool: UpstreamPool, origin: UpstreamOrigin, connection: UpstreamConnection)?
    private var stream: UpstreamStream?
    private var timer: Scheduled<Void>?

    private init(eventLoop: any EventLoop, logger: Logger) {
        self.eventLoop = eventLoop
        self.logger = logger
    }

    /// The notification's body: `requestId` as the request named it, and why.
    static func body(requestID: JSONValue, reason: String) -> ByteBuffer {
        ByteBuffer(bytes: JSONWriter.bytes(notification(requestID: requestID, reason: reason)))
    }

    /// A batch's: one notification for each of its requests, as a JSON-RPC batch.
    static func body(requestIDs: [JSONValue], reason: String) -> ByteBuffer {
        ByteBuffer(bytes: JSONWriter.bytes(.array(requestIDs.map { notification(requestID: $0, reason: reason) })))
    }

    static func notification(requestID: JSONValue, reason: String) -> JSONValue {
        ["jsonrpc": "2.0", "method": "notifications/cancelled", "params": ["requestId": requestID, "reason": .string(reason)]]
    }

    /// Sends one notification over HTTP/1.1: `head` (its fields, with the body's length) then `body`.
    static func send(head: ByteBuffer, body: ByteBuffer, pool: UpstreamPool, origin: UpstreamOrigin, on eventLoop: any EventLoop, logger: Logger) {
        let cancellation = MCPUpstreamCancellation(eventLoop: eventLoop, logger: logger)
        cancellation.arm()
        pool.acquire(origin) { result in
            guard case .success(let connection) = result else { return cancellation.done(reusable: false) }
            guard cancellation.timer != nil else { return pool.release(connection, to: origin, reusable: false) }
            cancellation.connection = (pool, origin, connection)
            connection.handler.delegate = cancellation
            connection.handler.expectResponse(toHEAD: false)
            connection.channel.write(head, promise: nil)
            connection.channel.writeAndFlush(body, promise: nil)
        }
    }

    /// Sends one notification on a stream of its own to an HTTP/2 upstream.
    static func send(head: HTTPRequestHead, body: ByteBuffer, pool: UpstreamHTTP2Pool, origin: UpstreamOrigin, on eventLoop: any EventLoop, logger: Logger) {
        let cancellation = MCPUpstreamCancellation(eventLoop: eventLoop, logger: logger)
        cancellation.arm()
        pool.openStream(to: origin) { result in
            guard case .success(let stream) = result else { return cancellation.done(reusable: false) }
            guard cancellation.timer != nil else { return stream.channel.close(promise: nil) }
            cancellation.stream = stream
            stream.handler.delegate = cancellation
            stream.channel.write(HTTPClientRequestPart.head(head), promise: nil)
            stream.channel.write(HTTPClientRequestPart.body(.byteBuffer(body)), promise: nil)
            stream.channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        }
    }

    private func arm() {
        timer = eventLoop.assumeIsolated().scheduleTask(in: Self.timeout) { [self] in done(reusable: false) }
    }

    /// The answer came (the connection goes back to the pool), or it failed or took too long (closed).
    private func done(reusable: Bool) {
        timer?.cancel()
        timer = nil
        if !reusable { logger.notice("an MCP server's answer to notifications/cancelled did not come (closed, failed or over 5 s)") }
        if let (pool, origin, connection) = connection {
            self.connection = nil
            pool.release(connection, to: origin, reusable: reusable)
        }
        if let stream {
            self.stream = nil
            stream.handler.delegate = nil
            if !reusable { stream.channel.close(promise: nil) }
        }
    }

    func upstreamRead(_ part: UpstreamResponsePart) {
        switch part {
        case .head(let head) where !(200..<300).contains(head.status):
            // The server did not take it (it may verify the assertion, or not know the session): the operator should know.
            logger.warning("an MCP server refused the gateway's notifications/cancelled", metadata: ["status": "\(head.status)"])
        case .end: done(reusable: true)
        default: break
        }
    }

    func upstreamReadComplete() {}
    func upstreamClosed() { done(reusable: false) }
    func upstreamWritabilityChanged(_ writable: Bool) {}
    func upstreamFailed(_ error: any Error) { done(reusable: false) }
    func upstreamTrailers(_ trailers: HTTPHeaders) {}
}

extension ProxyExchange {
    /// The caller's access ended while the MCP server worked on this request: each request it was
    /// sent is cancelled there (`notifications/cancelled`, before 2026-07-28), at most once.
    ///
    /// Only while the upstream's answer is under way (its connection or stream is still the
    /// exchange's): an answer already complete has nothing left to stop. The notification goes as
    /// the request went (its fields, the assertion, the identity fields, `Mcp-Session-Id`), so the
    /// server finds the session the request belongs to.
    func cancelUpstreamWork(reason: String) {
        guard let mcpState, let (caller, sessionID) = mcpState.forwardedAs, upstream != nil || upstreamStream != nil else { return }
        mcpState.forwardedAs = nil
        // The person's token at a connected service goes upstream with requests, never with their cancelling.
        upstreamBearer = nil
        guard MCPProtocolRevision.cancelsWithNotification(mcpState.protocolVersions) else { return }
        // An assertion made now: the request's may have expired while the server worked on it.
        guard
            let assertion = try? plane.runtime.assertions.assertion(
                audience: route.audience, caller: RuntimeCaller(caller, sessionID: sessionID, namingClient: true))
        else { return }
        plane.logger.info(
            "MCP requests under way cancelled at the MCP server", metadata: ["request_id": "\(requestID)", "count": "\(mcpState.forwardedRequestIDs.count)"])
        var fields: [(String, String)] = []
        forEachUpstreamField(assertion: assertion, caller: caller) { name, value in
            if !MCPUpstreamCancellation.requestOnlyFields.contains(HeaderScreen.folded(name)) { fields.append((name, value)) }
        }
        fields += [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")]
        var target = ByteBuffer()
        writeTarget(into: &target)
        let why = "the caller's access ended at the gateway (\(reason))"
        // One POST: a batch (2025-03-26, the one revision with batches) is cancelled by a batch of notifications.
        let ids = mcpState.forwardedRequestIDs
        guard let first = ids.first else { return }
        let body = ids.count == 1 ? MCPUpstreamCancellation.body(requestID: first, reason: why) : MCPUpstreamCancellation.body(requestIDs: ids, reason: why)
        let logger = plane.logger
        if route.origin.transport == .http1 {
            guard let pool = handler.pool else { return }
            var head = ByteBuffer()
            head.writeStaticString("POST ")
            head.writeImmutableBuffer(target)
            head.writeStaticString(" HTTP/1.1\r\n")
            for (name, value) in fields { HTTP1Bytes.writeField(name, value, into: &head) }
            HTTP1Bytes.writeField("Content-Length", String(body.readableBytes), into: &head)
            head.writeStaticString("\r\n")
            MCPUpstreamCancellation.send(head: head, body: body, pool: pool, origin: route.origin, on: eventLoop, logger: logger)
        } else {
            var headers = HTTPHeaders(fields)
            headers.add(name: "Content-Length", value: String(body.readableBytes))
            let head = HTTPRequestHead(version: .http1_1, method: .POST, uri: String(buffer: target), headers: headers)
            MCPUpstreamCancellation.send(head: head, body: body, pool: plane.http2Pool(for: eventLoop), origin: route.origin, on: eventLoop, logger: logger)
        }
    }
}
