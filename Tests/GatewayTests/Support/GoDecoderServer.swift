import Foundation
import PortcullisTestSupport

/// Tests/MCP/go_decoder: an MCP server that decodes messages with Go's `encoding/json`, as the
/// go-sdk before 1.3.1 and mark3labs/mcp-go do (member names matched in any case, with Unicode's
/// simple folding, the last match winning). Built once with Debian's `golang-go`, started per test.
final class GoDecoderServer: Sendable {
    /// Where `go` is, or nil when this machine has none (`.ci/run` installs golang-go).
    static let goPath: String? = ["/usr/bin/go", "/usr/lib/go/bin/go", "/usr/local/go/bin/go"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Whether the tests that need it run: when Go is installed, and always in CI (CI=true),
    /// where a missing Go fails them instead of skipping them.
    static var enabled: Bool { goPath != nil || ProcessInfo.processInfo.environment["CI"] == "true" }

    static let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("MCP/go_decoder/main.go").path

    /// The built server, once per test process.
    static let binary: Result<String, GoDecoderError> = {
        guard let go = goPath else { return .failure(GoDecoderError("no go command on this machine (apt-get install golang-go)")) }
        let directory = NSTemporaryDirectory() + "portcullis-go-decoder-" + UUID().uuidString
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let built = try ChildProcess.run(
                go, ["build", "-o", directory + "/server", source], directory: directory,
                environment: ["GOCACHE": NSTemporaryDirectory() + "portcullis-gocache", "GOFLAGS": "-mod=mod", "GO111MODULE": "off", "CGO_ENABLED": "0"], within: 300)
            guard built.status == 0 else { return .failure(GoDecoderError("go build failed: \(built.output)")) }
        } catch {
            return .failure(GoDecoderError("go build could not run: \(error)"))
        }
        return .success(directory + "/server")
    }()

    let port: Int
    private let process: ChildProcess

    init() async throws {
        process = try ChildProcess(try Self.binary.get(), [])
        var port: Int?
        for _ in 0..<200 {
            if let line = process.output.split(separator: "\n").first, let read = Int(line) {
                port = read
                break
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        guard let port else {
            process.kill9()
            throw GoDecoderError("the Go server printed no port: \(process.output)")
        }
        self.port = port
    }

    /// Every message the server decoded so far, as it read it, in order.
    func calls() throws -> [Decoded] {
        try process.output.split(separator: "\n").dropFirst().map { try JSONDecoder().decode(Decoded.self, from: Data($0.utf8)) }
    }

    func stop() {
        process.kill9()
        process.remove()
    }

    /// What Go read of a message.
    struct Decoded: Decodable, Equatable, CustomStringConvertible {
        let method: String
        let name: String
        let uri: String
        let ref_name: String
        let ref_uri: String
        var description: String { "\(method) name=\(name) uri=\(uri) ref=\(ref_name)\(ref_uri)" }
    }
}

struct GoDecoderError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
