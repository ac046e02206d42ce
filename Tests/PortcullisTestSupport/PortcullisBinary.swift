// PortcullisTestSupport: helpers shared by test targets that run the real binary.
import Foundation

/// The `portcullis` binary built alongside the tests (or `PORTCULLIS_BINARY`).
public enum PortcullisBinary {
    public static let path: String = ProcessInfo.processInfo.environment["PORTCULLIS_BINARY"] ?? built("portcullis")

    /// `portcullis-probes`: the test probes, a binary of their own.
    public static let probesPath: String = built("portcullis-probes")

    static func built(_ name: String) -> String {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name).path,
            Bundle.main.bundleURL.appendingPathComponent(name).path,
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent(name).path,
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[0]
    }
}
