// PortcullisTestSupport: helpers shared by test targets that run the real binary.
import Foundation

/// The `portcullis` binary built alongside the tests (or `PORTCULLIS_BINARY`).
public enum PortcullisBinary {
    public static let path: String = {
        if let path = ProcessInfo.processInfo.environment["PORTCULLIS_BINARY"] { return path }
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("portcullis").path,
            Bundle.main.bundleURL.appendingPathComponent("portcullis").path,
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("portcullis").path,
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[0]
    }()
}
