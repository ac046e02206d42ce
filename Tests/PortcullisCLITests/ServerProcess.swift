import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PortcullisTestSupport
import Testing

struct ServerProcessError: Error, CustomStringConvertible {
    let description: String
}

/// Starts and stops long-running `portcullis` subcommands for tests.
enum ServerProcess {
    /// Starts `portcullis ARGS` in `cli`'s directory and waits until `ready` finds a port in its
    /// output (`process.output`, a file in that directory, readable on demand and after the stop).
    static func start(
        _ cli: CLI, _ arguments: [String], environment: [String: String] = [:], ready: (String) -> Int?
    ) throws -> (process: ChildProcess, port: Int) {
        let process = try ChildProcess(
            CLI.binary, arguments, directory: cli.directory, environment: environment, output: cli.directory + "/\(arguments[0])-output.log")
        var port: Int?
        let deadline = Date().addingTimeInterval(30)
        while port == nil, Date() < deadline, process.isRunning {
            port = ready(process.output)
            if port == nil { Thread.sleep(forTimeInterval: 0.05) }
        }
        guard let port else {
            process.kill9()
            process.remove()
            throw ServerProcessError(description: "portcullis \(arguments[0]) never said where it listens: \(process.output)")
        }
        return (process, port)
    }

    /// Sends `signal` and waits up to 15 s (then SIGKILL); true if the process exited by itself with status 0.
    static func stop(_ process: ChildProcess, signal: Int32 = SIGTERM) -> Bool {
        defer { process.remove() }
        return process.terminate(signal: signal, within: 15) && process.exitStatus == 0
    }

    /// A blocking HTTP request with URLSession, for a test on its own thread.
    static func fetch(_ url: URL, method: String, headers: [String: String] = [:], body: String? = nil) throws -> (Data, Int) {
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body.map { Data($0.utf8) }
        let semaphore = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: (Data, Int)? = nil
        nonisolated(unsafe) var failure: (any Error)? = nil
        URLSession.shared.dataTask(with: request) { data, response, error in
            if let error { failure = error }
            result = (data ?? Data(), (response as? HTTPURLResponse)?.statusCode ?? 0)
            semaphore.signal()
        }.resume()
        _ = semaphore.wait(timeout: .now() + 15)
        if let failure { throw failure }
        return try #require(result)
    }
}
