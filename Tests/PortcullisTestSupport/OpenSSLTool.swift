import Foundation

/// Debian's `openssl` command, for keys and certificates made the way other tools make them.
public enum OpenSSLTool {
    /// Runs `openssl ARGS` in `directory`; throws when it fails.
    public static func run(_ arguments: [String], in directory: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw OpenSSLToolError(description: "openssl \(arguments.joined(separator: " ")) failed") }
    }
}

public struct OpenSSLToolError: Error, CustomStringConvertible {
    public let description: String
}
