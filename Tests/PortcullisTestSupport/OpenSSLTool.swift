import Foundation

/// Debian's `openssl` command, for keys and certificates made the way other tools make them.
public enum OpenSSLTool {
    /// The `openssl` binary, or nil when this machine has none (`.ci/run` installs it).
    public static let path: String? = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Whether the tests that need `openssl` run: when it is installed, and always in CI
    /// (CI=true), where a missing `openssl` fails them instead of skipping them.
    public static var enabled: Bool { path != nil || ProcessInfo.processInfo.environment["CI"] == "true" }

    /// Runs `openssl ARGS` in `directory` and returns its standard output; throws when it fails.
    @discardableResult
    public static func run(_ arguments: [String], in directory: String? = nil) throws -> String {
        guard let path else { throw OpenSSLToolError(description: "no openssl command on this machine (apt-get install openssl)") }
        let openssl = try ChildProcess(path, arguments, directory: directory, separateErrors: true)
        defer { openssl.remove() }
        guard try openssl.waitForExit(within: 120) == 0 else {
            throw OpenSSLToolError(description: "openssl \(arguments.joined(separator: " ")) failed: \(openssl.errors)")
        }
        return openssl.output
    }
}

public struct OpenSSLToolError: Error, CustomStringConvertible {
    public let description: String
}
