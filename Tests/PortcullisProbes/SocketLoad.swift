import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
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
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let tracker = CloseTracker()
        let baseline = Self.residentKilobytes(gatewayPid)
        let gatewayTicksBefore = Self.cpuTicks(gatewayPid)
        let probeBefore = Self.ownCPUSeconds()
        let started = NIODeadline.now()
        var clients: [LoadSocket] = []
        clients.reserveCapacity(count)
        var failures = 0
        var opened = 0
        while opened + failures < count {
            let size = min(batch, count - opened - failures)
            let attempts = (0..<size).map { index in
                LoadSocket.open(
                    group: group, port: port, source: "127.0.0.\(1 + (opened + failures + index) % max(1, sourceAddresses))",
                    token: token, session: session, tracker: tracker)
            }
            for attempt in attempts {
                do {
                    clients.append(try await attempt.get())
                    opened += 1
                } catch {
                    failures += 1
                    if failures == 1 { FileHandle.standardError.write(Data("first failed upgrade: \(error)\n".utf8)) }
                }
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
        try await group.shutdownGracefully()
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
final class LoadSocket: Sendable {
    let channel: any Channel
    let handler: NIOLoopBound<LoadSocketHandler>

    init(channel: any Channel, handler: NIOLoopBound<LoadSocketHandler>) {
        self.channel = channel
        self.handler = handler
    }

    static func open(group: any EventLoopGroup, port: Int, source: String, token: String, session: String, tracker: CloseTracker) -> EventLoopFuture<LoadSocket> {
        let eventLoop = group.next()
        let upgraded = eventLoop.makePromise(of: LoadSocket?.self)
        let bootstrap = ClientBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    var headers = HTTPHeaders()
                    headers.add(name: "Host", value: "127.0.0.1:\(port)")
                    headers.add(name: "Authorization", value: "Bearer \(token)")
                    headers.add(name: "X-Session-Id", value: session)
                    headers.add(name: "Content-Length", value: "0")
                    let upgrader = NIOTypedWebSocketClientUpgrader<LoadSocket?>(
                        maxFrameSize: 1 << 16,
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture {
                                let handler = LoadSocketHandler(tracker: tracker)
                                try channel.pipeline.syncOperations.addHandler(handler)
                                return LoadSocket(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop))
                            }
                        })
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration<LoadSocket?>(
                        upgradeRequestHead: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/api/runtime/agent", headers: headers),
                        upgraders: [upgrader], notUpgradingCompletionHandler: { channel in channel.eventLoop.makeSucceededFuture(nil) })
                    try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
                        configuration: .init(upgradeConfiguration: configuration)
                    ).cascade(to: upgraded)
                }
            }
        do {
            let bound = try bootstrap.bind(to: SocketAddress(ipAddress: source, port: 0))
            bound.connect(host: "127.0.0.1", port: port).whenFailure { upgraded.fail($0) }
        } catch {
            upgraded.fail(error)
        }
        return upgraded.futureResult.flatMapThrowing { socket in
            guard let socket else { throw ChannelError.inappropriateOperationForState }
            return socket
        }
    }

    /// Sends an intent and succeeds with whether its result came back.
    func intent(id: String) -> EventLoopFuture<Bool> {
        let handler = self.handler
        return channel.eventLoop.flatSubmit { handler.value.intent(id: id) }
    }
}

/// The client side of one load socket: answers pings, records the close, matches intent results.
final class LoadSocketHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let tracker: CloseTracker
    private var context: ChannelHandlerContext?
    private var waiting: [String: EventLoopPromise<Bool>] = [:]
    private var closed = false

    init(tracker: CloseTracker) { self.tracker = tracker }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func intent(id: String) -> EventLoopFuture<Bool> {
        guard let context else { return MultiThreadedEventLoopGroup.singleton.next().makeSucceededFuture(false) }
        let promise = context.eventLoop.makePromise(of: Bool.self)
        waiting[id] = promise
        let text = #"{"type":"intent","request_id":"\#(id)","intent_type":"echo","payload":{"n":1}}"#
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: text))), promise: nil)
        context.eventLoop.scheduleTask(in: .seconds(5)) { promise.succeed(false) }
        return promise.futureResult
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            let text = String(buffer: frame.unmaskedData)
            for (id, promise) in waiting where text.contains("\"request_id\":\"\(id)\"") {
                waiting[id] = nil
                promise.succeed(text.contains("\"status\":\"completed\""))
            }
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            var data = frame.unmaskedData
            let code = data.readInteger(as: UInt16.self) ?? 1005
            if !closed {
                closed = true
                tracker.closed(code: code)
            }
            var answer = context.channel.allocator.buffer(capacity: 2)
            answer.writeInteger(code)
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: answer)))
                .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !closed {
            closed = true
            tracker.closed(code: 1006)
        }
        context.fireChannelInactive()
    }
}
