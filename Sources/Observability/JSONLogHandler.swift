import Foundation
import JOSE
import Logging
import Synchronization

/// Where log lines go: standard error by default; tests capture them.
public protocol LogSink: Sendable {
    func write(_ line: String)
    /// Writes one line that `build` appends as bytes (without its newline).
    ///
    /// A sink that gathers bytes (`BufferedLogSink`) lets `build` append to its buffer
    /// directly; the default makes a `String` and calls `write(_:)`.
    func writeLine(_ build: (inout [UInt8]) -> Void)
}

extension LogSink {
    public func writeLine(_ build: (inout [UInt8]) -> Void) {
        var bytes: [UInt8] = []
        build(&bytes)
        write(String(decoding: bytes, as: UTF8.self))
    }
}

/// Writes each line to standard error in one `write(2)`.
public struct StandardErrorSink: LogSink {
    public init() {}
    public func write(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        bytes.withUnsafeBytes { _ = Foundation.write(2, $0.baseAddress, $0.count) }
    }
}

/// A `swift-log` handler that writes one JSON object per line:
/// `{"ts", "level", "label", "message", ...metadata}`.
///
/// For log collectors. The gateway never puts a credential in a message or
/// metadata value; this handler does not try to redact, so that rule is
/// enforced where the values are chosen (and tested on captured logs).
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level = .info
    package let label: String
    package let sink: any LogSink

    public init(label: String, sink: any LogSink = StandardErrorSink()) {
        self.label = label
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var object: JSONObject = [
            "ts": .string(Date.now.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))),
            "level": .string(event.level.rawValue), "label": .string(label), "message": .string(event.message.description),
        ]
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) where object[key] == nil {
            object[key] = Self.json(value)
        }
        sink.write(JSONWriter.string(.object(object)))
    }

    /// A metadata value as JSON: a number or a flag given as one (`.stringConvertible(200)`) stays
    /// a number or a flag, lists and maps stay lists and maps, everything else is a string.
    static func json(_ value: Logger.MetadataValue) -> JSONValue {
        switch value {
        case .string(let text): return .string(text)
        case .stringConvertible(let convertible):
            switch convertible {
            case let flag as Bool: return .bool(flag)
            case let number as Int: return .number(Double(number))
            case let number as Int64: return .number(Double(number))
            case let number as UInt64: return .number(Double(number))
            case let number as Double where number.isFinite: return .number(number)
            default: return .string(convertible.description)
            }
        case .array(let values): return .array(values.map(json))
        case .dictionary(let values):
            var object = JSONObject()
            for (key, value) in values { object[key] = json(value) }
            return .object(object)
        }
    }
}

/// Log output format, chosen by `logging.format`.
public enum LogFormat: String, Sendable, CaseIterable {
    /// swift-log's default human-readable lines.
    case text
    /// One JSON object per line.
    case json
}
