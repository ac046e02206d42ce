import Foundation

/// Debian's `openssl` command, for keys and certificates made the way other tools make them.
public enum OpenSSLTool {
    /// Runs `openssl ARGS` in `directory` and returns its standard output; throws when it fails.
    @discardableResult
    public static func run(_ arguments: [String], in directory: String? = nil) throws -> String {
        let openssl = try ChildProcess("/usr/bin/openssl", arguments, directory: directory, separateErrors: true)
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
