import Foundation
import HTTPTypes
import HummingbirdWSClient
import JOSE
import Logging
import NIOCore
import NIOWebSocket
import RuntimeAPI
import SecurityGuard
import Synchronization

/// Relays an admitted agent socket to the Runtime's agent channel and keeps
/// authorizing it while it is open.
///
/// - Frames both ways, whole messages up to the configured size (1009 beyond);
///   close codes and reasons are passed on; if the Runtime goes away the
///   client gets 1011 with a reason.
/// - The socket closes with 1008 "token expired" when the access token
///   expires, unless the client renews it with
///   `{"type":"auth.renew","access_token":"..."}` for the same user and tenant
///   (answered `{"type":"auth.renewed","expires_at":...}`); a token of another
///   user closes it with 1008.
/// - A logout or revocation of the session closes it with 1008 (the registry
///   delivers the request; `AccessChangeWatcher` catches revocations made
///   elsewhere within a second).
public struct AgentRelay: Sendable {
    let runtime: RuntimeClient
    let authenticator: AccessTokenAuthenticator
    let registry: SocketRegistry
    let metrics: GatewayMetrics
    let clock: any TokenClock
    let maximumMessageBytes: Int
    let limits: EdgeLimits

    /// Mutable per-socket state shared by the relay's tasks.
    final class SocketState: Sendable {
        let expiresAt: Mutex<Double>
        /// Set once a close frame has been sent to the client.
        let closed = Mutex(false)
        /// The close code sent to the client (0 until then).
        let closeCode = Mutex<UInt16>(0)
        /// When the client last sent anything (for the idle ping).
        let lastHeard = Mutex(ContinuousClock.now)

        init(expiresAt: Double) { self.expiresAt = Mutex(expiresAt) }

        /// True the first time only: the caller sends the close frame.
        func beginClose() -> Bool {
            closed.withLock { closed in
                defer { closed = true }
                return !closed
            }
        }
    }

    /// What the client side asks of the upstream side.
    enum UpstreamCommand: Sendable {
        case text(String)
        case binary(ByteBuffer)
        case close(code: UInt16, reason: String)
    }

    /// Which of the relay's tasks finished.
    enum Role: Sendable {
        case client, upstream, control, timeout
    }

    func run(_ channel: NIOAsyncChannel<WebSocketFrame, WebSocketFrame>, admitted: AdmittedSocket, logger: Logger) async {
        let closeRequests = admitted.registration.closeRequests
        metrics.openSockets(1)
        defer {
            registry.unregister(admitted.registration)
            metrics.openSockets(-1)
        }
        let state = SocketState(expiresAt: admitted.caller.expiresAt)
        do {
            try await channel.executeThenClose { inbound, outbound in
                let client = ClientSide(outbound: outbound, state: state)
                let upstream = UpstreamLink()
                // The client's inbound stream is read by one task that is never cancelled
                // before the client has had our close frame: cancelling it closes the channel.
                await withTaskGroup(of: Role.self) { group in
                    group.addTask {
                        await clientToUpstream(inbound, client: client, upstream: upstream, admitted: admitted, state: state)
                        return .client
                    }
                    group.addTask {
                        await relayUpstream(upstream, client: client, admitted: admitted, state: state, logger: logger)
                        return .upstream
                    }
                    group.addTask {
                        await closeAtExpiry(client: client, upstream: upstream, state: state)
                        return .control
                    }
                    group.addTask {
                        await pingWhileIdle(client: client, upstream: upstream, state: state)
                        return .control
                    }
                    group.addTask {
                        for await request in closeRequests {
                            await client.close(code: request.code, reason: request.reason)
                            await upstream.send(.close(code: 1000, reason: "client socket closed by the gateway"))
                            break
                        }
                        return .control
                    }
                    var clientDone = false
                    var upstreamDone = false
                    var waiting = false
                    while let role = await group.next() {
                        switch role {
                        case .client: clientDone = true
                        case .upstream: upstreamDone = true
                        case .control: break
                        case .timeout: clientDone = true; upstreamDone = true
                        }
                        if clientDone && upstreamDone { break }
                        // Once a close is under way, give the other side a bounded time to answer.
                        if !waiting, clientDone || state.closed.withLock({ $0 }) {
                            waiting = true
                            group.addTask {
                                try? await Task.sleep(for: .seconds(2))
                                return .timeout
                            }
                        }
                    }
                    group.cancelAll()
                }
                outbound.finish()
                logger.info(
                    "agent socket closed", metadata: ["session_id": "\(admitted.sessionID)", "code": "\(state.closeCode.withLock { $0 })"])
            }
        } catch {
            logger.debug("agent socket ended", metadata: ["error_type": "\(type(of: error))"])
        }
    }

    /// The upstream side: opens the Runtime's channel, passes the client's messages
    /// to it and its messages to the client, and tells the client how it ended.
    func relayUpstream(_ upstream: UpstreamLink, client: ClientSide, admitted: AdmittedSocket, state: SocketState, logger: Logger) async {
        do {
            let upstreamClose = try await connectUpstream(admitted: admitted, logger: logger) { upstreamIn, upstreamOut in
                upstream.connected(upstreamOut)
                await upstreamToClient(upstreamIn, client: client)
            }
            upstream.ended()
            // The Runtime's channel ends on its own only when a session ends (1008, passed on)
            // or when the Runtime goes away: shutting down (its WebSocket layer says 1000 or
            // 1001) or vanishing (no close frame). The client gets 1011 for those.
            let code = upstreamClose.map { Self.number(of: $0.closeCode) }
            if let code, ![1000, 1001, 1006].contains(code) {
                await client.close(code: code, reason: upstreamClose?.reason ?? "")
            } else if !state.closed.withLock({ $0 }) {
                metrics.relayError(kind: "upstream_gone")
                await client.close(code: 1011, reason: "the Runtime went away; reconnect shortly")
            }
        } catch {
            upstream.ended()
            metrics.relayError(kind: "upstream")
            logger.warning("agent relay: the Runtime's channel failed", metadata: ["error_type": "\(type(of: error))"])
            await client.close(code: 1011, reason: "the Runtime is unavailable; reconnect shortly")
        }
    }

    /// Opens the Runtime's agent channel with a fresh assertion naming the verified session.
    func connectUpstream(
        admitted: AdmittedSocket, logger: Logger,
        _ body: @escaping @Sendable (WebSocketInboundStream, WebSocketOutboundWriter) async -> Void
    ) async throws -> WebSocketCloseFrame? {
        let agent = try runtime.agentChannel(
            for: RuntimeCaller(userID: admitted.caller.userID, tenantID: admitted.caller.tenantID, sessionID: admitted.sessionID))
        var configuration = WebSocketClientConfiguration(maxFrameSize: maximumMessageBytes)
        configuration.additionalHeaders = [HTTPField.Name(AssertionHeader.name)!: agent.assertion]
        return try await WebSocketClient.connect(url: agent.url, configuration: configuration, logger: logger) { inbound, outbound, _ in
            await body(inbound, outbound)
        }
    }

    /// Client frames to the Runtime; `auth.renew` is handled here and never passed on.
    /// Reads until the client's close frame or the end of its stream.
    func clientToUpstream(
        _ inbound: NIOAsyncChannelInboundStream<WebSocketFrame>, client: ClientSide, upstream: UpstreamLink,
        admitted: AdmittedSocket, state: SocketState
    ) async {
        // Token bucket for the client's message rate: bursts of twice the rate.
        let rate = limits.webSocketMessagesPerSecond
        var allowance = rate * 2
        var lastRefill = ContinuousClock.now
        do {
            for try await frame in inbound {
                state.lastHeard.withLock { $0 = ContinuousClock.now }
                if frame.opcode == .text || frame.opcode == .binary {
                    let now = ContinuousClock.now
                    let elapsed = now - lastRefill
                    lastRefill = now
                    allowance = min(rate * 2, allowance + rate * (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
                    guard allowance >= 1 else {
                        await client.close(code: 1008, reason: "message rate exceeded (limit \(Int(rate)) per second)")
                        break
                    }
                    allowance -= 1
                }
                switch frame.opcode {
                case .text:
                    let data = frame.unmaskedData
                    if let renewal = Self.renewRequest(data) {
                        await renew(renewal, client: client, upstream: upstream, admitted: admitted, state: state)
                        continue
                    }
                    if !state.closed.withLock({ $0 }) { await upstream.send(.text(String(buffer: data))) }
                case .binary:
                    if !state.closed.withLock({ $0 }) { await upstream.send(.binary(frame.unmaskedData)) }
                case .ping:
                    await client.send(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData))
                case .connectionClose:
                    var data = frame.unmaskedData
                    let code = data.readInteger(as: UInt16.self) ?? 1000
                    let reason = data.readString(length: data.readableBytes) ?? ""
                    await client.close(code: code, reason: "")
                    await upstream.send(.close(code: code, reason: reason))
                    return
                default:
                    continue
                }
            }
        } catch let error as NIOWebSocketError where error == .invalidFrameLength {
            await client.close(code: 1009, reason: "message too large (limit \(maximumMessageBytes) bytes)")
        } catch is CancellationError {
            return
        } catch {
            await client.close(code: 1009, reason: "message too large or malformed")
        }
        await upstream.send(.close(code: 1000, reason: "client went away"))
    }

    /// The numeric close code.
    static func number(of code: WebSocketErrorCode) -> UInt16 {
        var buffer = ByteBuffer()
        buffer.write(webSocketErrorCode: code)
        return buffer.readInteger(as: UInt16.self) ?? 1011
    }

    /// The access token of `{"type":"auth.renew","access_token":"..."}`, or `nil` for any other message.
    static func renewRequest(_ data: ByteBuffer) -> String? {
        guard data.readableBytes < 16 * 1024, let object = try? StrictJSONReader().parseObject(Array(data.readableBytesView)),
            object["type"] == "auth.renew"
        else { return nil }
        return object["access_token"]?.stringValue ?? ""
    }

    /// Checks a renewal; closes the socket with 1008 for another user's token.
    func renew(_ token: String, client: ClientSide, upstream: UpstreamLink, admitted: AdmittedSocket, state: SocketState) async {
        let caller: AuthenticatedCaller
        do {
            caller = try await authenticator.authenticate(token)
        } catch let failure as AuthenticationFailure {
            let error = GatewayError(failure)
            await client.sendJSON(["type": "auth.renew_failed", "error": .string(error.code), "message": .string(error.message)])
            return
        } catch {
            await client.sendJSON(["type": "auth.renew_failed", "error": "unavailable", "message": "the token could not be checked; try again"])
            return
        }
        guard caller.userID == admitted.caller.userID, caller.tenantID == admitted.caller.tenantID else {
            await client.close(code: 1008, reason: "the renewal token belongs to another user")
            await upstream.send(.close(code: 1000, reason: "client socket closed by the gateway"))
            return
        }
        state.expiresAt.withLock { $0 = max($0, caller.expiresAt) }
        await client.sendJSON(["type": "auth.renewed", "expires_at": .number(caller.expiresAt)])
    }

    func upstreamToClient(_ inbound: WebSocketInboundStream, client: ClientSide) async {
        do {
            for try await message in inbound.messages(maxSize: maximumMessageBytes) {
                switch message {
                case .text(let text): await client.send(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: text)))
                case .binary(let buffer): await client.send(WebSocketFrame(fin: true, opcode: .binary, data: buffer))
                }
            }
        } catch {
            metrics.relayError(kind: "upstream_message")
        }
    }

    /// Pings a client that has been silent for a ping interval; closes with 1001
    /// if it is still silent one interval later (a dead peer or a stuck client).
    func pingWhileIdle(client: ClientSide, upstream: UpstreamLink, state: SocketState) async {
        let interval = Duration.milliseconds(Int64(limits.webSocketPingInterval * 1000))
        var pinged = false
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            let silent = ContinuousClock.now - state.lastHeard.withLock { $0 } >= interval
            if !silent {
                pinged = false
            } else if pinged {
                await client.close(code: 1001, reason: "no answer to ping")
                await upstream.send(.close(code: 1000, reason: "client stopped answering"))
                return
            } else {
                pinged = true
                await client.send(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer(string: "portcullis")))
            }
        }
    }

    /// Sleeps until the token's expiry (re-reading it after renewals), then closes with 1008.
    func closeAtExpiry(client: ClientSide, upstream: UpstreamLink, state: SocketState) async {
        while !Task.isCancelled {
            let remaining = state.expiresAt.withLock { $0 } - clock.now()
            if remaining <= 0 { break }
            do {
                try await Task.sleep(for: .seconds(min(remaining, 3_600)))
            } catch {
                return
            }
        }
        guard !Task.isCancelled else { return }
        await client.close(code: 1008, reason: "token expired")
        await upstream.send(.close(code: 1000, reason: "client token expired"))
    }
}

/// The Runtime side of one socket, once it is connected.
///
/// The client reader writes through it and awaits each write, so a slow
/// Runtime slows the reader, which stops reading the client's socket
/// (back-pressure down to TCP) instead of queueing messages in memory.
final class UpstreamLink: Sendable {
    private let state = Mutex<(writer: WebSocketOutboundWriter?, ended: Bool, waiters: [CheckedContinuation<WebSocketOutboundWriter?, Never>])>(
        (nil, false, []))

    func connected(_ writer: WebSocketOutboundWriter) {
        let waiters = state.withLock { state -> [CheckedContinuation<WebSocketOutboundWriter?, Never>] in
            state.writer = writer
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: writer) }
    }

    /// The Runtime's channel is gone (or never opened): later sends are dropped.
    func ended() {
        let waiters = state.withLock { state -> [CheckedContinuation<WebSocketOutboundWriter?, Never>] in
            state.ended = true
            state.writer = nil
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    func writer() async -> WebSocketOutboundWriter? {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> WebSocketOutboundWriter?? in
                if let writer = state.writer { return .some(writer) }
                if state.ended { return .some(nil) }
                state.waiters.append(continuation)
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func send(_ command: AgentRelay.UpstreamCommand) async {
        guard let writer = await writer() else { return }
        switch command {
        case .text(let text): try? await writer.write(.text(text))
        case .binary(let buffer): try? await writer.write(.binary(buffer))
        case .close(let code, let reason): try? await writer.close(WebSocketErrorCode(codeNumber: Int(code)), reason: reason)
        }
    }
}

/// Writes to the client's socket; sends at most one close frame.
struct ClientSide: Sendable {
    let outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>
    let state: AgentRelay.SocketState

    func send(_ frame: WebSocketFrame) async {
        guard !state.closed.withLock({ $0 }) else { return }
        try? await outbound.write(frame)
    }

    func sendJSON(_ value: JSONValue) async {
        await send(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: JSONWriter.bytes(value))))
    }

    /// A close frame with `code` and `reason` (reason cut to fit the 123-byte limit).
    func close(code: UInt16, reason: String) async {
        guard state.beginClose() else { return }
        state.closeCode.withLock { $0 = code }
        var data = ByteBuffer()
        data.writeInteger(code)
        data.writeBytes(reason.utf8.prefix(123))
        try? await outbound.write(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))
    }
}
