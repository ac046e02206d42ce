import Foundation
import Synchronization

/// A program the tests run: started with `posix_spawn`, its output in a file, waited for
/// with `waitpid`, every wait bounded.
///
/// Not Foundation's `Process`: its `waitUntilExit` waits on a run loop for a termination
/// notice, and reading a child's pipe to its end waits for every copy of the pipe's write
/// end, including copies a PostgreSQL server started meanwhile inherited. Under a full
/// parallel run one of those waits never returned and CI ran out its 90 minutes. Here the
/// child gets no descriptor but its standard three (the rest are closed in the child), its
/// output goes to a file, and an overdue child is killed instead of waited for forever.
public final class ChildProcess: Sendable {
    /// The child's process id.
    public let pid: pid_t
    /// Where the child's standard output (and, unless separated, its standard error) goes.
    public let outputPath: String
    /// Where the child's standard error goes when it was asked for separately.
    public let errorPath: String?
    private let reaped = Mutex<Int32?>(nil)
    private let scratch: String

    /// Starts `executable` with `arguments`.
    ///
    /// - Parameters:
    ///   - directory: the child's working directory (default: the test process's).
    ///   - environment: added to (and overriding) the test process's environment.
    ///   - input: the child's standard input (default: `/dev/null`).
    ///   - output: the file for its output (default: a temporary file, removed with `remove()`).
    ///   - separateErrors: standard error to a file of its own (`errors`) instead of `output`'s.
    public init(
        _ executable: String, _ arguments: [String], directory: String? = nil, environment: [String: String] = [:],
        input: String? = nil, output: String? = nil, separateErrors: Bool = false
    ) throws {
        scratch = NSTemporaryDirectory() + "portcullis-child-" + UUID().uuidString
        if output == nil || input != nil || separateErrors {
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        }
        outputPath = output ?? scratch + "/output"
        errorPath = separateErrors ? scratch + "/errors" : nil
        var inputPath = "/dev/null"
        if let input {
            inputPath = scratch + "/input"
            guard FileManager.default.createFile(atPath: inputPath, contents: Data(input.utf8)) else {
                throw ChildProcessError("cannot write the child's input to \(inputPath)")
            }
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, inputPath, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if let errorPath {
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        try SpawnActions.closeFrom(3, &actions)
        if let directory { try SpawnActions.changeDirectory(directory, &actions) }

        let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child = pid_t()
        let spawned = posix_spawn(&child, executable, &actions, nil, argv, envp)
        guard spawned == 0 else {
            throw ChildProcessError("cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        pid = child
    }

    /// Runs `executable` to its end (at most `seconds`) and returns its exit status and output.
    public static func run(
        _ executable: String, _ arguments: [String], directory: String? = nil, environment: [String: String] = [:],
        input: String? = nil, within seconds: Double = 120
    ) throws -> (status: Int32, output: String) {
        let child = try ChildProcess(executable, arguments, directory: directory, environment: environment, input: input)
        defer { child.remove() }
        let status = try child.waitForExit(within: seconds)
        return (status, child.output)
    }

    /// Everything the child wrote so far to its output.
    public var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Everything the child wrote so far to its separate standard error ("" when not separated).
    public var errors: String { errorPath.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? "" }

    /// The exit status once the child has ended (128 + N after signal N), nil while it runs.
    public var exitStatus: Int32? {
        reaped.withLock { status in
            if status == nil {
                var raw: Int32 = 0
                if waitpid(pid, &raw, WNOHANG) == pid { status = Self.decode(raw) }
            }
            return status
        }
    }

    public var isRunning: Bool { exitStatus == nil }

    /// Waits (blocking this thread) up to `seconds` for the child to end; then kills it and throws.
    @discardableResult
    public func waitForExit(within seconds: Double) throws -> Int32 {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let status = exitStatus { return status }
            usleep(10_000)
        }
        kill9()
        throw ChildProcessError("\(pid) did not end within \(seconds) s and was killed: \(output.suffix(2000))")
    }

    /// Waits up to `seconds` for the child to end without blocking a thread; then kills it and throws.
    @discardableResult
    public func exit(within seconds: Double) async throws -> Int32 {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let status = exitStatus { return status }
            try await Task.sleep(for: .milliseconds(10))
        }
        kill9()
        throw ChildProcessError("\(pid) did not end within \(seconds) s and was killed: \(output.suffix(2000))")
    }

    /// SIGKILL, and waits for the child to be gone.
    public func kill9() {
        guard isRunning else { return }
        kill(pid, SIGKILL)
        reaped.withLock { status in
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
            status = Self.decode(raw)
        }
    }

    /// Sends `signal` (SIGTERM by default) and waits up to `seconds`; if the child is still there, SIGKILL.
    ///
    /// Returns whether it ended by itself in time; no test waits forever on a child.
    @discardableResult
    public func terminate(signal: Int32 = SIGTERM, within seconds: Double = 15) -> Bool {
        guard isRunning else { return true }
        kill(pid, signal)
        return (try? waitForExit(within: seconds)) != nil
    }

    /// Removes the child's scratch files (its input, its separate errors, and its output unless given a path).
    public func remove() {
        try? FileManager.default.removeItem(atPath: scratch)
    }

    private static func decode(_ raw: Int32) -> Int32 {
        (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
    }
}

/// The glibc spawn actions Swift's Glibc module does not import (glibc 2.29 and 2.34), looked up by name.
enum SpawnActions {
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32

    private static func symbol(_ name: String) -> UnsafeMutableRawPointer? {
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), name)  // RTLD_DEFAULT
    }

    /// Closes every descriptor from `lowest` up in the child, so it inherits none of the test process's.
    static func closeFrom(_ lowest: Int32, _ actions: inout posix_spawn_file_actions_t) throws {
        guard let address = symbol("posix_spawn_file_actions_addclosefrom_np") else {
            throw ChildProcessError("this C library has no posix_spawn_file_actions_addclosefrom_np (glibc 2.34 or newer is needed)")
        }
        _ = unsafeBitCast(address, to: CloseFrom.self)(&actions, lowest)
    }

    /// Starts the child in `directory`.
    static func changeDirectory(_ directory: String, _ actions: inout posix_spawn_file_actions_t) throws {
        guard let address = symbol("posix_spawn_file_actions_addchdir_np") else {
            throw ChildProcessError("this C library has no posix_spawn_file_actions_addchdir_np (glibc 2.29 or newer is needed)")
        }
        _ = directory.withCString { unsafeBitCast(address, to: ChangeDirectory.self)(&actions, $0) }
    }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
