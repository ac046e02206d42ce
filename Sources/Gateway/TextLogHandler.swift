import Foundation
import Logging

/// A `swift-log` handler writing swift-log's text lines (`timestamp level label : metadata message`)
/// to a `LogSink`, so the buffered access log keeps the format of the other lines.
public struct TextLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level = .info
    let label: String
    let sink: any LogSink

    public init(label: String, sink: any LogSink) {
        self.label = label
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = Date.now.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: false)) + " \(event.level) \(label) :"
        for (key, value) in mergedMetadata(event).sorted(by: { $0.key < $1.key }) { line += " \(key)=\(value)" }
        line += " \(event.message)"
        sink.write(line)
    }
}
