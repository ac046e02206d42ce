import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PortcullisTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// `portcullis-probes socket-load`: opens N authenticated agent sockets
/// through a gateway, `--batch` at a time, idles, checks that a sample still
/// answers an intent, then logs the session out and times how long the
/// gateway takes to close every socket. Prints one JSON line of figures.
/// Used by `scripts/sockets.sh`; the token travels in a header, never in a URL.
struct SocketLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "socket-load")

    @Option(help: "The gateway's port on 127.0.0.1.") var port: Int
    @Option(help: "Sockets to open.") var count: Int
    @Option(help: "Upgrades in flight at a time.") var batch: Int = 64
    @Option(help: "Seconds to idle once all are open.") var idle: Double = 2
    @Option(help: "Sockets (spread over all) that must answer an intent after the idle.") var sample: Int = 20
    @Option(help: "The gateway's process id, to read its resident memory.") var gatewayPid: Int32
    @Option(help: "Source addresses to spread the connections over (127.0.0.N, N from 1), for the ephemeral ports.") var sourceAddresses: Int = 4
    @Option(help: "What ends the sockets: logout (the session is logged out) or expiry (the token expires).") var end: String = "logout"
    @Option(help: "Seconds to wait for every socket to be closed.") var closeTimeout: Double = 30
    @Option(help: "Event-loop threads of the probe.") var threads: Int = 1

    func run() async throws {
        guard let token = ProcessInfo.processInfo.environment["PORTCULLIS_TOKEN"],
            let session = ProcessInfo.processInfo.environment["PORTCULLIS_SESSION"]
        else { throw ValidationError("set PORTCULLIS_TOKEN and PORTCULLIS_SESSION") }
        let eventLoops = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let tracker = CloseTracker()
        let baseline = Self.residentKilobytes(gatewayPid)
        let gatewayTicksBefore = Self.cpuTicks(gatewayPid)
        let probeBefore = Self.ownCPUSeconds()
        let started = NIODeadline.now()
        // `batch` upgrades in flight at all times: each one that ends starts the next.
        var clients: [LoadSocket] = []
        clients.reserveCapacity(count)
        var failures = 0
        var opened = 0
        let (port, sources, batch, count) = (self.port, max(1, sourceAddresses), self.batch, self.count)
        await withTaskGroup(of: LoadSocket?.self) { group in
            var started = 0
            func startNext() {
                let index = started
                started += 1
                group.addTask {
                    let attempt = LoadSocket.open(
                        group: eventLoops, port: port, source: "127.0.0.\(1 + index % sources)",
                        token: token, session: session, tracker: tracker)
                    do {
                        return try await attempt.get()
                    } catch {
                        if index == 0 { FileHandle.standardError.write(Data("failed upgrade: \(error)\n".utf8)) }
                        return nil
                    }
                }
            }
            while started < min(batch, count) { startNext() }
            for await socket in group {
                if let socket { clients.append(socket); opened += 1 } else { failures += 1 }
                if started < count { startNext() }
            }
        }
        let openSeconds = Double((NIODeadline.now() - started).nanoseconds) / 1e9
        let gatewayCPUSeconds = Double(Self.cpuTicks(gatewayPid) - gatewayTicksBefore) / Double(sysconf(Int32(_SC_CLK_TCK)))
        let probeCPUSeconds = Self.ownCPUSeconds() - probeBefore
        try await Task.sleep(for: .milliseconds(Int64(idle * 1000)))
        let resident = Self.residentKilobytes(gatewayPid)
        // A sample spread over all the sockets still answers an intent.
        var answered = 0
        if !clients.isEmpty {
            let step = max(1, clients.count / max(1, sample))
            for index in stride(from: 0, to: clients.count, by: step).prefix(sample) {
                if (try? await clients[index].intent(id: "s\(index)").get()) == true { answered += 1 }
            }
        }
        // End them: a logout now, or wait for the token's expiry.
        let endStarted: NIODeadline
        var expiresAt: Double? = nil
        if end == "logout" {
            endStarted = .now()
            let status = try Self.logout(port: port, token: token, session: session)
            guard status == 204 else { throw ValidationError("logout answered \(status)") }
        } else {
            let expiry = try Self.expiry(of: token)
            expiresAt = expiry
            let wait = max(0, expiry - Date().timeIntervalSince1970)
            try await Task.sleep(for: .milliseconds(Int64(wait * 1000)))
            endStarted = .now()
        }
        let closed = await tracker.waitForAll(opened, timeout: closeTimeout)
        let closeSeconds = closed.map { Double(($0 - endStarted).nanoseconds) / 1e9 }
        let codes = tracker.codes
        let result: [String: Any] = [
            "sockets": opened, "failed": failures, "open_seconds": openSeconds, "upgrades_per_second": Double(opened) / openSeconds,
            "baseline_rss_kb": baseline, "rss_kb": resident, "rss_per_socket_kb": opened > 0 ? Double(resident - baseline) / Double(opened) : 0,
            "sample": min(sample, opened), "sample_answered": answered, "end": end,
            "all_closed_seconds": closeSeconds ?? -1, "closed": tracker.closedCount, "close_codes": codes.map { "\($0.key):\($0.value)" }.sorted(),
            "expires_at": expiresAt ?? 0,
            "gateway_cpu_us_per_upgrade": opened > 0 ? gatewayCPUSeconds * 1e6 / Double(opened) : 0,
            "gateway_cpu_share_while_opening": gatewayCPUSeconds / openSeconds, "probe_cpu_share_while_opening": probeCPUSeconds / openSeconds,
        ]
        let json = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
        FileHandle.standardOutput.write(json + Data("\n".utf8))
        for client in clients { client.channel.close(promise: nil) }
        try await eventLoops.shutdownGracefully()
    }

    static func residentKilobytes(_ pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
        }
        return 0
    }

    /// utime + stime of a process, in clock ticks.
    static func cpuTicks(_ pid: Int32) -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command name: state is field 3, utime 14 and stime 15 (1-based over the whole line).
        guard fields.count > 12 else { return 0 }
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    /// This process's CPU time (user + system), in seconds.
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// The token's `exp` (the probe reads the claim; the gateway verified the token).
    static func expiry(of token: String) throws -> Double {
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { throw ValidationError("not a JWT") }
        var payload = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        guard let data = Data(base64Encoded: payload), let claims = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let exp = claims["exp"] as? Double
        else { throw ValidationError("the token has no exp") }
        return exp
    }

    /// POST /api/auth/logout over a plain socket; the status code.
    static func logout(port: Int, token: String, session: String) throws -> Int {
        let body = #"{"session_id":"\#(session)"}"#
        let connection = try RawConnection(port: port)
        defer { connection.close() }
        connection.send(
            "POST /api/auth/logout HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body)
        let line = String(decoding: connection.readSome(), as: UTF8.self).split(separator: " ")
        return line.count > 1 ? Int(line[1]) ?? 0 : 0
    }
}

/// When each socket was closed by the gateway, and with which code.
final class CloseTracker: Sendable {
    private let state = NIOLockedValueBox<(count: Int, last: NIODeadline?, codes: [UInt16: Int])>((0, nil, [:]))

    func closed(code: UInt16) {
        state.withLockedValue { state in
            state.count += 1
            state.last = .now()
            state.codes[code, default: 0] += 1
        }
    }

    var closedCount: Int { state.withLockedValue { $0.count } }
    var codes: [UInt16: Int] { state.withLockedValue { $0.codes } }

    /// When the last of `expected` sockets closed, or `nil` if they did not all close in time.
    func waitForAll(_ expected: Int, timeout: Double) async -> NIODeadline? {
        let deadline = NIODeadline.now() + .milliseconds(Int64(timeout * 1000))
        while NIODeadline.now() < deadline {
            let (count, last) = state.withLockedValue { ($0.count, $0.last) }
            if count >= expected { return last }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }
}

/// One client socket of the load.
///
/// A deliberately lean client: the handshake is one prepared request and the
/// frames are read by hand, so that on a machine whose cores the probe shares
/// with the gateway, the figures are the gateway's rather than the client's
/// HTTP and WebSocket machinery. Its frames carry a zero masking key (masked,
/// as RFC 6455 requires of a client, but not unpredictable: this is a load
/// generator on loopback, not a browser).
final class LoadSocket: Sendable {
    let channel: any Channel
    let handler: NIOLoopBound<LoadSocketHandler>

    init(channel: any Channel, handler: NIOLoopBound<LoadSocketHandler>) {
        self.channel = channel
        self.handler = handler
    }

    static func open(group: any EventLoopGroup, port: Int, source: String, token: String, session: String, tracker: CloseTracker) -> EventLoopFuture<LoadSocket> {
        let eventLoop = group.next()
        let upgraded = eventLoop.makePromise(of: Void.self)
        let request = ByteBuffer(
            string: "GET /api/runtime/agent HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                + "Authorization: Bearer \(token)\r\nX-Session-Id: \(session)\r\n\r\n")
        let bootstrap = ClientBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(LoadSocketHandler(request: request, upgraded: upgraded, tracker: tracker))
                }
            }
        let connected: EventLoopFuture<any Channel>
        do {
            connected = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0)).connect(host: "127.0.0.1", port: port)
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
        connected.whenFailure { upgraded.fail($0) }
        return connected.and(upgraded.futureResult).flatMapThrowing { channel, _ in
            let handler = try channel.pipeline.syncOperations.handler(type: LoadSocketHandler.self)
            return LoadSocket(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop))
        }
    }

    /// Sends an intent and succeeds with whether its result came back.
    func intent(id: String) -> EventLoopFuture<Bool> {
        let handler = self.handler
        return channel.eventLoop.flatSubmit { handler.value.intent(id: id) }
    }
}

/// The client side of one load socket: the handshake, then frames by hand; answers
/// pings and the close, records the close, matches intent results.
final class LoadSocketHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let request: ByteBuffer
    let upgraded: EventLoopPromise<Void>
    let tracker: CloseTracker
    private var context: ChannelHandlerContext?
    private var received: ByteBuffer?
    private var open = false
    private var closed = false
    private var waiting: [String: EventLoopPromise<Bool>] = [:]

    init(request: ByteBuffer, upgraded: EventLoopPromise<Void>, tracker: CloseTracker) {
        self.request = request
        self.upgraded = upgraded
        self.tracker = tracker
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(request), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if received == nil { received = buffer } else { received!.writeBuffer(&buffer) }
        if !open {
            guard let view = received?.readableBytesView, let end = view.firstRange(of: Array("\r\n\r\n".utf8)) else { return }
            let head = String(decoding: view[view.startIndex..<end.lowerBound], as: UTF8.self)
            received!.moveReaderIndex(to: end.upperBound)
            guard head.hasPrefix("HTTP/1.1 101") else {
                upgraded.fail(ChannelError.inappropriateOperationForState)
                context.close(promise: nil)
                return
            }
            open = true
            upgraded.succeed()
        }
        while let (opcode, payload) = nextFrame() { handle(opcode: opcode, payload: payload, context: context) }
        if received?.readableBytes == 0 { received = nil }
    }

    /// The next whole frame the server sent (servers do not mask), or `nil` until one has arrived.
    private func nextFrame() -> (UInt8, ByteBuffer)? {
        guard var buffer = received, let first = buffer.readInteger(as: UInt8.self), let second = buffer.readInteger(as: UInt8.self) else { return nil }
        var length = Int(second & 0x7F)
        if length == 126 {
            guard let extended = buffer.readInteger(as: UInt16.self) else { return nil }
            length = Int(extended)
        } else if length == 127 {
            guard let extended = buffer.readInteger(as: UInt64.self) else { return nil }
            length = Int(extended)
        }
        guard let payload = buffer.readSlice(length: length) else { return nil }
        received = buffer
        return (first & 0x0F, payload)
    }

    private func handle(opcode: UInt8, payload: ByteBuffer, context: ChannelHandlerContext) {
        switch opcode {
        case 0x1:
            let text = String(buffer: payload)
            for (id, promise) in waiting where text.contains("\"request_id\":\"\(id)\"") {
                waiting[id] = nil
                promise.succeed(text.contains("\"status\":\"completed\""))
            }
        case 0x9:
            send(opcode: 0xA, payload: payload, context: context)
        case 0x8:
            var data = payload
            let code = data.readInteger(as: UInt16.self) ?? 1005
            if !closed {
                closed = true
                tracker.closed(code: code)
            }
            var answer = context.channel.allocator.buffer(capacity: 2)
            answer.writeInteger(code)
            send(opcode: 0x8, payload: answer, context: context)
            context.close(promise: nil)
        default:
            break
        }
    }

    /// A client frame: FIN, the opcode, the mask bit with a zero key, the payload (short messages only).
    private func send(opcode: UInt8, payload: ByteBuffer, context: ChannelHandlerContext) {
        var frame = context.channel.allocator.buffer(capacity: payload.readableBytes + 8)
        frame.writeInteger(0x80 | opcode)
        if payload.readableBytes < 126 {
            frame.writeInteger(0x80 | UInt8(payload.readableBytes))
        } else {
            frame.writeInteger(UInt8(0x80 | 126))
            frame.writeInteger(UInt16(payload.readableBytes))
        }
        frame.writeInteger(UInt32(0))
        var payload = payload
        frame.writeBuffer(&payload)
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
    }

    func intent(id: String) -> EventLoopFuture<Bool> {
        guard let context else { return upgraded.futureResult.eventLoop.makeSucceededFuture(false) }
        let promise = context.eventLoop.makePromise(of: Bool.self)
        waiting[id] = promise
        send(opcode: 0x1, payload: ByteBuffer(string: #"{"type":"intent","request_id":"\#(id)","intent_type":"echo","payload":{"n":1}}"#), context: context)
        context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(5)) { [self] in
            if waiting.removeValue(forKey: id) != nil { promise.succeed(false) }
        }
        return promise.futureResult
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !open { upgraded.fail(ChannelError.ioOnClosedChannel) }
        if !closed {
            closed = true
            tracker.closed(code: 1006)
        }
        context.fireChannelInactive()
    }
}
