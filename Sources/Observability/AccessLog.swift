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
    package enum Output: Sendable {
        case logger(Logger)
        case sink(any LogSink, LogFormat)
    }

    package let output: Output
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

    /// How a line names its person beside `user_id` (`logging.access_user_name`).
    public var userNames = AccessLogUserName.username

    /// The name a line of this caller carries: `nil` when the log is off or names no one.
    @inline(__always)
    public func userName(_ claims: JSONObject) -> String? {
        isEnabled ? userNames.name(in: claims) : nil
    }

    /// Writes the line for one answered request; `path` without its query (credential-looking
    /// segments are redacted here, and nothing is done when the log is off).
    ///
    /// Concrete for the two spellings callers have (the data plane's `Substring`, the API's
    /// `String`): a generic entry point called from another module would run unspecialised.
    ///
    /// - Parameters:
    ///   - userID: the verified caller's user id, admitted or refused after verifying (the gateway's stable id, never a token or a
    ///     session id), written as `user_id` when there is one.
    ///   - userName: their name (`userName(_:)`), written as `user_name`, quoted in text lines.
    public func record(
        requestID: String, method: String, route: String, path: Substring, status: Int, nanoseconds: Int64, protocol version: String = "HTTP/1.1",
        userID: String? = nil, userName: String? = nil, mcp: MCPCallFields? = nil
    ) {
        recordLine(
            requestID: requestID, method: method, route: route, path: path, status: status, nanoseconds: nanoseconds, version: version, userID: userID,
            userName: userName, mcp: mcp)
    }

    /// `record` for a path held as a `String`.
    public func record(
        requestID: String, method: String, route: String, path: String, status: Int, nanoseconds: Int64, protocol version: String = "HTTP/1.1",
        userID: String? = nil, userName: String? = nil
    ) {
        recordLine(
            requestID: requestID, method: method, route: route, path: path, status: status, nanoseconds: nanoseconds, version: version, userID: userID,
            userName: userName, mcp: nil)
    }

    private func recordLine(
        requestID: String, method: String, route: String, path: some StringProtocol, status: Int, nanoseconds: Int64, version: String, userID: String?, userName: String?,
        mcp: MCPCallFields?
    ) {
        guard isEnabled else { return }
        switch output {
        case .logger(let logger):
            var metadata: Logger.Metadata = [
                "request_id": "\(requestID)", "method": "\(method)", "route": "\(route)",
                "path": "\(PathRedaction.redactedPath(String(path)))", "protocol": "\(version)", "status": .stringConvertible(status),
                "duration_ms": .stringConvertible(Double(nanoseconds / 1000) / 1000),
            ]
            if let userID { metadata["user_id"] = "\(userID)" }
            if let userName { metadata["user_name"] = "\(userName)" }
            for (name, value) in mcp?.pairs ?? [] { metadata[name] = "\(value)" }
            logger.info("request", metadata: metadata)
        case .sink(let sink, .json):
            // The fields in JSONLogHandler's order: ts, level, label, message, then the metadata by name.
            let label = self.label
            sink.writeLine { line in
                line.append(contentsOf: #"{"ts":""#.utf8)
                UTCTimestamp.append(to: &line, fractional: true)
                line.append(contentsOf: #"","level":"info","label":"#.utf8)
                JSONWriter.appendString(label, to: &line)
                line.append(contentsOf: #","message":"request","duration_ms":"#.utf8)
                Self.appendMilliseconds(nanoseconds, to: &line)
                line.append(contentsOf: #","method":"#.utf8)
                JSONWriter.appendString(method, to: &line)
                line.append(contentsOf: #","path":"#.utf8)
                PathRedaction.appendRedactedPath(path, to: &line, json: true)
                line.append(contentsOf: #","protocol":"#.utf8)
                JSONWriter.appendString(version, to: &line)
                line.append(contentsOf: #","request_id":"#.utf8)
                JSONWriter.appendString(requestID, to: &line)
                line.append(contentsOf: #","route":"#.utf8)
                JSONWriter.appendString(route, to: &line)
                line.append(contentsOf: #","status":"#.utf8)
                Self.appendDecimal(status, to: &line)
                if let userID {
                    line.append(contentsOf: #","user_id":"#.utf8)
                    JSONWriter.appendString(userID, to: &line)
                }
                if let userName {
                    line.append(contentsOf: #","user_name":"#.utf8)
                    JSONWriter.appendString(userName, to: &line)
                }
                for (name, value) in mcp?.pairs ?? [] {
                    line.append(UInt8(ascii: ","))
                    JSONWriter.appendString(name, to: &line)
                    line.append(UInt8(ascii: ":"))
                    JSONWriter.appendString(value, to: &line)
                }
                line.append(contentsOf: #"}"#.utf8)
            }
        case .sink(let sink, .text):
            let label = self.label
            sink.writeLine { line in
                UTCTimestamp.append(to: &line, fractional: false)
                line.append(contentsOf: " info ".utf8)
                line.append(contentsOf: label.utf8)
                line.append(contentsOf: " : duration_ms=".utf8)
                Self.appendMilliseconds(nanoseconds, to: &line)
                line.append(contentsOf: " method=".utf8)
                line.append(contentsOf: method.utf8)
                line.append(contentsOf: " path=".utf8)
                PathRedaction.appendRedactedPath(path, to: &line)
                line.append(contentsOf: " protocol=".utf8)
                line.append(contentsOf: version.utf8)
                line.append(contentsOf: " request_id=".utf8)
                line.append(contentsOf: requestID.utf8)
                line.append(contentsOf: " route=".utf8)
                line.append(contentsOf: route.utf8)
                line.append(contentsOf: " status=".utf8)
                Self.appendDecimal(status, to: &line)
                if let userID {
                    line.append(contentsOf: " user_id=".utf8)
                    line.append(contentsOf: userID.utf8)
                }
                // A name is the provider's or the operator's: quoted and escaped as JSON, so no line can be forged with it.
                if let userName {
                    line.append(contentsOf: " user_name=".utf8)
                    JSONWriter.appendString(userName, to: &line)
                }
                // A name is the client's: quoted and escaped as JSON, so no line can be forged with it.
                for (name, value) in mcp?.pairs ?? [] {
                    line.append(UInt8(ascii: " "))
                    line.append(contentsOf: name.utf8)
                    line.append(UInt8(ascii: "="))
                    JSONWriter.appendString(value, to: &line)
                }
                line.append(contentsOf: " request".utf8)
            }
        }
    }

    /// A duration in milliseconds as `Double`'s description writes whole microseconds / 1000
    /// (`1.234`, `0.5`, `2.0`), without making a `Double` or a `String`.
    package static func appendMilliseconds(_ nanoseconds: Int64, to line: inout [UInt8]) {
        let microseconds = Int(max(0, nanoseconds / 1000))
        appendDecimal(microseconds / 1000, to: &line)
        line.append(UInt8(ascii: "."))
        var fraction = microseconds % 1000
        var width = 3
        while width > 1, fraction % 10 == 0 {  // trailing zeros go, one digit stays
            fraction /= 10
            width -= 1
        }
        appendDigits(fraction, width: width, to: &line)
    }

    /// A non-negative integer in decimal, as short as it goes.
    package static func appendDecimal(_ value: Int, to line: inout [UInt8]) {
        var width = 1
        var rest = value / 10
        while rest > 0 {
            width += 1
            rest /= 10
        }
        appendDigits(value, width: width, to: &line)
    }

    /// The last `width` decimal digits of a non-negative `value`, zero-padded.
    package static func appendDigits(_ value: Int, width: Int, to line: inout [UInt8]) {
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        while divisor > 0 {
            line.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
            divisor /= 10
        }
    }
}

/// The current time as ISO 8601 in UTC (`2026-11-23T11:12:13.456Z`), from `clock_gettime` and
/// `gmtime_r`: the access log writes one per request, and Foundation's formatter costs microseconds.
package enum UTCTimestamp {
    package static func now(fractional: Bool) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        append(to: &bytes, fractional: fractional)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the current time to `bytes`.
    package static func append(to bytes: inout [UInt8], fractional: Bool) {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        var seconds = spec.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int, _ width: Int) { AccessLog.appendDigits(value, width: width, to: &bytes) }
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
    }
}
