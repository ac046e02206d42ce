import Foundation
import PortcullisTestSupport
import Synchronization
import Testing

/// The datagrams a service sends to its `NOTIFY_SOCKET`, as systemd receives them: a datagram
/// socket bound to a path, read on a thread of its own.
final class NotifySocket: Sendable {
    let path: String
    private let descriptor: Int32
    private let received = Mutex<[(line: String, logAtArrival: String)]>([])
    private let open = Atomic<Bool>(true)

    /// In a folder of its own under /tmp: a socket's path has at most 107 bytes, less than a test folder's may take.
    /// `log` is read as each datagram arrives: what the service had logged by then.
    init(log: @escaping @Sendable () -> String) throws {
        let folder = "/tmp/notify-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        path = folder + "/notify.sock"
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        // sun_path is a fixed C array: the path's bytes copied in, the rest left zero.
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard descriptor >= 0, bound == 0 else { throw ServerProcessError(description: "cannot bind \(path): errno \(errno)") }
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while open.load(ordering: .relaxed) {
                var poll = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard Glibc.poll(&poll, 1, 100) > 0 else { continue }
                let count = recv(descriptor, &buffer, buffer.count, 0)
                guard count > 0 else { continue }
                let line = String(decoding: buffer[0..<count], as: UTF8.self)
                let logged = log()
                received.withLock { $0.append((line, logged)) }
            }
        }.start()
    }

    var lines: [String] { received.withLock { $0.map(\.line) } }
    var logAtArrival: [String] { received.withLock { $0.map(\.logAtArrival) } }

    func close() {
        open.store(false, ordering: .relaxed)
        Thread.sleep(forTimeInterval: 0.2)  // the reading thread's last poll
        Glibc.close(descriptor)
        try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent)
    }
}

@Suite("portcullis serve under systemd (Type=notify)", .serialized)
struct ServiceManagerNotificationTests {
    @Test("with NOTIFY_SOCKET, serve sends READY=1 once, after the gateway, the metrics and the embedded Runtime all listen: systemctl start returns when it answers")
    func readyAfterEveryListener() throws {
        let cli = try CLI()
        defer { cli.remove() }
        let output = cli.directory + "/serve-output.log"
        let socket = try NotifySocket { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }
        defer { socket.close() }
        var environment = ServeCommandTests.environment
        environment["NOTIFY_SOCKET"] = socket.path
        let (process, port) = try ServeCommandTests().startServe(cli, environment: environment)
        let deadline = Date().addingTimeInterval(20)
        while socket.lines.isEmpty, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(socket.lines == ["READY=1"], "\(process.output.split(separator: "\n").filter { $0.contains("systemd") })")
        let log = socket.logAtArrival.first ?? ""
        for listener in ["gateway listening", "metrics listening", "embedded runtime listening"] {
            #expect(log.contains(listener), "READY=1 came before \(listener)")
        }
        #expect(try ServerProcess.fetch(URL(string: "http://127.0.0.1:\(port)/healthz")!, method: "GET").1 == 200)
        #expect(ServerProcess.stop(process))
        #expect(socket.lines == ["READY=1"], "sent once")
    }

    @Test("an abstract NOTIFY_SOCKET (@name), which it cannot reach, is named in a warning; serve runs on")
    func abstractSocket() throws {
        let cli = try CLI()
        defer { cli.remove() }
        var environment = ServeCommandTests.environment
        environment["NOTIFY_SOCKET"] = "@portcullis-test"
        let (process, port) = try ServeCommandTests().startServe(cli, environment: environment)
        #expect(try ServerProcess.fetch(URL(string: "http://127.0.0.1:\(port)/healthz")!, method: "GET").1 == 200)
        #expect(ServerProcess.stop(process))
        #expect(process.output.contains("NOTIFY_SOCKET names an abstract socket"), "\(process.output.suffix(500))")
    }
}
