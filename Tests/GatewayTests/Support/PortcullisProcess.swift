import Foundation
import PortcullisTestSupport

/// Runs the real `portcullis` binary with `arguments` (and `input` on stdin) to its end
/// and waits for it without blocking a cooperative thread: the in-process servers under
/// test need them. At most two minutes; an overdue command is killed and throws.
func runPortcullis(
    _ arguments: [String], directory: String? = nil, environment: [String: String] = [:], input: String? = nil
) async throws -> (status: Int32, output: String) {
    let child = try ChildProcess(PortcullisBinary.path, arguments, directory: directory, environment: environment, input: input)
    defer { child.remove() }
    let status = try await child.exit(within: 120)
    return (status, child.output)
}

/// A long-running `portcullis` subcommand (serve, gateway, runtime) as a real process in
/// `directory`, its output in `directory/NAME.log`.
final class PortcullisProcess: Sendable {
    let child: ChildProcess
    let output: String

    init(_ arguments: [String], directory: String, environment: [String: String] = [:], name: String) throws {
        output = directory + "/\(name).log"
        child = try ChildProcess(PortcullisBinary.path, arguments, directory: directory, environment: environment, output: output)
    }

    var log: String { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }

    /// Waits until `url` (an HTTP GET) answers 200: at most `seconds` in all, however slowly each
    /// attempt fails (a count of attempts alone, at up to 5 s each, once meant 17 minutes).
    func waitUntilReady(_ url: String, within seconds: Int = 60) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if let (_, status) = try? await httpGet(url), status == 200 { return }
            guard child.isRunning else { throw FixtureError("exited (\(child.exitStatus ?? -1)) before \(url) answered 200:\n\(log)") }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw FixtureError("not ready within \(seconds) s: \(url)\n\(log)")
    }

    func kill9() {
        child.kill9()
    }

    /// SIGTERM, and up to 30 s for it to end (then SIGKILL: no test hangs on a process).
    func terminate() {
        child.terminate(within: 30)
        child.remove()
    }

    /// SIGTERM, then whether it exited within `seconds` (if not, SIGKILL).
    func terminate(within seconds: Double) -> Bool {
        child.terminate(within: seconds)
    }
}

/// A GET (at most 5 s): the body and the status.
func httpGet(_ url: String) async throws -> (String, Int) {
    let answer = try await Answer.request(.GET, url, timeout: 5)
    return (answer.raw, answer.status)
}
