import Foundation
import JOSE
import Logging

/// The access log: one line per request (`request_id`, `method`, `route`, `path`, `status`,
/// `duration_ms`), at `info`.
///
/// Under `serve` the line is formatted straight into the buffered sink (`BufferedLogSink`):
/// the same fields and format as the other lines, without swift-log's metadata dictionary,
/// its merge and sort, or Foundation's date formatting, which cost more than the rest of a
/// proxied request's logging. Elsewhere (tests, embedders) it goes through a `Logger`.
public struct AccessLog: Sendable {
    enum Output: Sendable {
        case logger(Logger)
        case sink(any LogSink, LogFormat)
    }

    let output: Output
    /// Whether lines are written at all (the level is `info` or finer).
    public let isEnabled: Bool

    /// Lines through `logger` (when its level lets `info` through).
    public init(logger: Logger) {
        output = .logger(logger)
        isEnabled = logger.logLevel <= .info
    }

    /// Lines formatted in `format` and written to `sink`, labelled `label`.
    public init(sink: any LogSink, format: LogFormat, label: String = AccessLog.label) {
        output = .sink(sink, format)
        isEnabled = true
        self.label = label
    }

    /// The label of access-log lines.
    public static let label = "portcullis.access"
    private var label = AccessLog.label

    /// Writes the line for one answered request; `path` without its query (credential-looking
    /// segments are redacted here, and nothing is done when the log is off).
    public func record(requestID: String, method: String, route: String, path: some StringProtocol, status: Int, nanoseconds: Int64) {
        guard isEnabled else { return }
        let path = RequestObservationMiddleware.redactedPath(String(path))
        let duration = "\(Double(nanoseconds / 1000) / 1000)"
        switch output {
        case .logger(let logger):
            logger.info(
                "request",
                metadata: [
                    "request_id": "\(requestID)", "method": "\(method)", "route": "\(route)", "path": "\(path)", "status": "\(status)",
                    "duration_ms": "\(duration)",
                ])
        case .sink(let sink, .json):
            // The fields in JSONLogHandler's order: ts, level, label, message, then the metadata by name.
            var line = #"{"ts":""# + UTCTimestamp.now(fractional: true) + #"","level":"info","label":"# + JSONWriter.string(.string(label))
            line += #","message":"request","duration_ms":""# + duration + #"","method":"# + JSONWriter.string(.string(method))
            line += #","path":"# + JSONWriter.string(.string(path)) + #","request_id":"# + JSONWriter.string(.string(requestID))
            line += #","route":"# + JSONWriter.string(.string(route)) + #","status":""# + String(status) + #""}"#
            sink.write(line)
        case .sink(let sink, .text):
            sink.write(
                UTCTimestamp.now(fractional: false) + " info \(label) : duration_ms=\(duration) method=\(method) path=\(path) request_id=\(requestID)"
                    + " route=\(route) status=\(status) request")
        }
    }
}

/// The current time as ISO 8601 in UTC (`2026-11-23T11:12:13.456Z`), from `clock_gettime` and
/// `gmtime_r`: the access log writes one per request, and Foundation's formatter costs microseconds.
enum UTCTimestamp {
    static func now(fractional: Bool) -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        var seconds = spec.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        bytes.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        if fractional {
            bytes.append(UInt8(ascii: "."))
            digits(Int(spec.tv_nsec) / 1_000_000, 3)
        }
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
