import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import PortcullisTestSupport

/// `portcullis-probes cross-revocation`: how long a logout through one gateway takes to
/// close the session's socket on another.
///
/// Each round logs in through gateway `i` (round-robin over `--ports`), opens the agent
/// socket through gateway `i + 1`, logs out through gateway `i` and times the close
/// (as the probe's socket sees it). Prints one JSON object: the rounds, p50/p99/max in
/// milliseconds, and the close codes. Never prints a token.
struct CrossRevocation: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cross-revocation", abstract: "Time from a logout on one gateway to the socket's close on another.")

    @Option(help: "The gateways' ports on 127.0.0.1, comma-separated (two or more; one measures a single instance).") var ports: String
    @Option(help: "Rounds.") var rounds: Int = 50
    @Option(help: "Username to log in as (tenant default); the password comes from PORTCULLIS_PASSWORD.") var username: String = "bench"

    func run() async throws {
        guard let password = ProcessInfo.processInfo.environment["PORTCULLIS_PASSWORD"] else { throw ValidationError("set PORTCULLIS_PASSWORD") }
        let gateways = ports.split(separator: ",").compactMap { Int($0) }
        guard !gateways.isEmpty else { throw ValidationError("--ports names no port") }
        let eventLoops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var milliseconds: [Double] = []
        var codes: [UInt16: Int] = [:]
        for round in 0..<rounds {
            let loginPort = gateways[round % gateways.count], socketPort = gateways[(round + 1) % gateways.count]
            let (token, session) = try Self.login(port: loginPort, username: username, password: password)
            let tracker = CloseTracker()
            let socket = try await LoadSocket.open(
                group: eventLoops, port: socketPort, source: "127.0.0.1", token: token, session: session, tracker: tracker
            ).get()
            let start = NIODeadline.now()
            let status = try SocketLoad.logout(port: loginPort, token: token, session: session)
            guard status == 204 else { throw ValidationError("logout answered \(status)") }
            guard let closed = await tracker.waitForAll(1, timeout: 10) else { throw ValidationError("round \(round): the socket did not close within 10 s") }
            milliseconds.append(Double((closed - start).nanoseconds) / 1e6)
            for (code, count) in tracker.codes { codes[code, default: 0] += count }
            socket.channel.close(promise: nil)
        }
        let sorted = milliseconds.sorted()
        func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)] }
        let result: [String: Any] = [
            "rounds": sorted.count, "gateways": gateways.count, "p50_ms": percentile(0.5), "p99_ms": percentile(0.99), "max_ms": sorted.last ?? 0,
            "close_codes": codes.map { "\($0.key):\($0.value)" }.sorted(),
        ]
        FileHandle.standardOutput.write(try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys]) + Data("\n".utf8))
        try await eventLoops.shutdownGracefully()
    }

    /// POST /api/auth/login over a plain socket: the access token and the session id.
    static func login(port: Int, username: String, password: String) throws -> (String, String) {
        let body = String(decoding: try JSONSerialization.data(withJSONObject: ["username": username, "password": password]), as: UTF8.self)
        let connection = try RawConnection(port: port)
        defer { connection.close() }
        connection.send(
            "POST /api/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
                + "Connection: close\r\n\r\n" + body)
        let answer = connection.readAll()
        guard let split = answer.firstRange(of: Array("\r\n\r\n".utf8)),
            let object = try? JSONSerialization.jsonObject(with: Data(answer[split.upperBound...])) as? [String: Any],
            let token = object["access_token"] as? String, let session = object["session_id"] as? String
        else { throw ValidationError("login on port \(port) failed: \(String(decoding: answer.prefix(12), as: UTF8.self))") }
        return (token, session)
    }
}
