import Foundation
import Glibc
import Synchronization

/// A real PostgreSQL server (Debian's package) for tests: a cluster made with
/// `initdb` in a temporary directory, listening on a free loopback port, stopped
/// and removed when the test process exits (or by `stop()`).
///
/// Run as root (as CI does), the server runs as the `postgres` account, which
/// PostgreSQL requires. Authentication is `trust` on loopback: the tests are about
/// the State Surface, not about PostgreSQL's passwords.
public final class TestPostgres: Sendable {
    public let port: Int
    public let directory: String
    let binDirectory: String
    private let running = Mutex(false)
    private let extraOptionsBox = Mutex("")
    private var extraOptions: String {
        get { extraOptionsBox.withLock { $0 } }
        set { extraOptionsBox.withLock { $0 = newValue } }
    }

    /// Where `initdb` and `pg_ctl` are: `PG_BINDIR`, else Debian's newest `/usr/lib/postgresql/N/bin`.
    static let binDirectory: String? = {
        if let path = ProcessInfo.processInfo.environment["PG_BINDIR"] { return path }
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.last.map { "\(root)/\($0)/bin" }.flatMap { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") ? $0 : nil }
    }()

    /// True when the server is installed here.
    public static var isInstalled: Bool { binDirectory != nil }

    /// Whether the PostgreSQL side of the tests runs: when the server is installed, and always
    /// in CI (CI=true), where a missing server fails the tests instead of skipping them.
    public static var enabled: Bool { isInstalled || ProcessInfo.processInfo.environment["CI"] == "true" }

    private static let sharedServer = Mutex<TestPostgres?>(nil)
    private static let everyServer = Mutex<[TestPostgres]>([])

    /// The server this test process shares, started on first use.
    public static func shared() throws -> TestPostgres {
        try sharedServer.withLock { server in
            if let server { return server }
            let started = try TestPostgres()
            server = started
            return started
        }
    }

    /// A cluster of its own (for a test that stops and restarts the server).
    ///
    /// - Parameter tls: a PEM certificate and key for the server; with them it also accepts TLS
    ///   (`ssl=on`), and plain connections still work.
    public init(tls: (certificate: String, key: String)? = nil) throws {
        guard let bin = Self.binDirectory else {
            throw TestPostgresError("PostgreSQL is not installed: apt-get install postgresql (initdb is looked for in /usr/lib/postgresql/N/bin)")
        }
        binDirectory = bin
        directory = NSTemporaryDirectory() + "portcullis-pg-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        port = try Self.freePort()
        if geteuid() == 0, let account = getpwnam("postgres") {
            chown(directory, account.pointee.pw_uid, account.pointee.pw_gid)
        }
        try runAsServerAccount([bin + "/initdb", "-D", directory + "/data", "-U", "portcullis", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"])
        if let tls {
            for (name, pem) in [("server.crt", tls.certificate), ("server.key", tls.key)] {
                let path = directory + "/data/" + name
                guard FileManager.default.createFile(atPath: path, contents: Data(pem.utf8), attributes: [.posixPermissions: 0o600]) else {
                    throw TestPostgresError("cannot write \(path)")
                }
                if geteuid() == 0, let account = getpwnam("postgres") { chown(path, account.pointee.pw_uid, account.pointee.pw_gid) }
            }
            extraOptions = " -c ssl=on"
        }
        Self.everyServer.withLock { $0.append(self) }
        _ = Self.stopAtExit
        try start()
    }

    /// Starts the server (again) on the same port and waits until it accepts connections.
    public func start() throws {
        let options = "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" + extraOptions
        try runAsServerAccount([binDirectory + "/pg_ctl", "-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "60", "-o", options, "start"])
        running.withLock { $0 = true }
    }

    /// Stops the server (fast shutdown: sessions are disconnected, committed work is kept).
    public func stop() {
        guard running.withLock({ let was = $0; $0 = false; return was }) else { return }
        try? runAsServerAccount([binDirectory + "/pg_ctl", "-D", directory + "/data", "-m", "fast", "-w", "-t", "60", "stop"])
    }

    /// Kills the server with SIGKILL, the postmaster and every backend at once, as a crash or
    /// an OOM kill would: no shutdown, no checkpoint. `start()` then runs crash recovery.
    public func kill9() throws {
        guard running.withLock({ let was = $0; $0 = false; return was }) else { return }
        let pidFile = try String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8)
        guard let postmaster = pidFile.split(separator: "\n").first.flatMap({ Int32($0) }) else {
            throw TestPostgresError("cannot read the postmaster's pid from \(directory)/data/postmaster.pid")
        }
        let children = Self.children(of: postmaster)
        kill(postmaster, SIGKILL)
        for child in children { kill(child, SIGKILL) }
        // Wait until every one is gone, so the next start finds no shared memory in use.
        for _ in 0..<100 where ([postmaster] + children).contains(where: { kill($0, 0) == 0 }) {
            usleep(50_000)
        }
    }

    /// The processes whose parent is `pid` (from /proc).
    static func children(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { candidate in
            guard let stat = try? String(contentsOfFile: "/proc/\(candidate)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return false }
            // After "(name)": state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == pid
        }
    }

    /// A new, empty database on this server; its URL for `storage.postgres_url`.
    /// `shared()` without blocking a cooperative thread: the first call runs initdb and starts
    /// the server, which takes seconds the in-process servers of other tests need.
    public static func shared() async throws -> TestPostgres {
        try await onThreadOfItsOwn { try shared() }
    }

    /// `createDatabase()` without blocking a cooperative thread (psql runs as a child process).
    public func createDatabase() async throws -> String {
        try await Self.onThreadOfItsOwn { try self.createDatabase() }
    }

    private static func onThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    public func createDatabase() throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        try psql("CREATE DATABASE \(name)")
        return url(database: String(name))
    }

    /// Runs one SQL statement with `psql` in `database`; what it printed (unaligned, rows only), trimmed.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        try Self.run([binDirectory + "/psql", "-h", "127.0.0.1", "-p", "\(port)", "-U", "portcullis", "-d", database, "-qAt", "-c", sql])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    public func url(database: String) -> String { "postgres://portcullis@127.0.0.1:\(port)/\(database)" }

    // MARK: Processes

    private static let stopAtExit: Void = {
        atexit {
            for server in TestPostgres.everyServer.withLock({ $0 }) {
                server.stop()
                try? FileManager.default.removeItem(atPath: server.directory)
            }
        }
    }()

    private func runAsServerAccount(_ arguments: [String]) throws {
        if geteuid() == 0 {
            try Self.run(["/usr/sbin/runuser", "-u", "postgres", "--"] + arguments)
        } else {
            try Self.run(arguments)
        }
    }

    /// Runs a program to its end (at most two minutes: `pg_ctl` waits up to one); its output on failure.
    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        let (status, output) = try ChildProcess.run(arguments[0], Array(arguments.dropFirst()))
        guard status == 0 else {
            throw TestPostgresError("\((arguments[0] as NSString).lastPathComponent) failed (\(status)): \(output)")
        }
        return output
    }

    /// A loopback port free now, below the kernel's ephemeral range (32768-60999 here), so no
    /// outgoing connection of the parallel suite can take it before the server that asked binds
    /// it; never the same port twice in one test run.
    public static func freePort() throws -> Int {
        for _ in 0..<500 {
            let candidate = Int.random(in: 20_000..<32_000)
            guard handedOut.withLock({ $0.insert(candidate).inserted }) else { continue }
            if canBind(candidate) { return candidate }
        }
        throw TestPostgresError("no free loopback port between 20000 and 32000")
    }

    private static let handedOut = Mutex<Set<Int>>([])

    private static func canBind(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

public struct TestPostgresError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
