@testable import DataPlane
@testable import EdgeHTTP
@testable import Gateway
import JOSE
import Logging
import Observability
@testable import RuntimeAccess
import Testing

@Suite("Recurring failures in the log")
struct RecurringFailureLogTests {
    struct Unreachable: Error {}

    /// The levels and messages written, one `(level, message)` per line.
    static func lines(_ log: CapturedLog) -> [(String, String)] {
        log.text.split(separator: "\n").compactMap { line in
            guard let fields = try? StrictJSONReader().parseObject(Array(line.utf8)), let level = fields["level"]?.stringValue, let message = fields["message"]?.stringValue
            else { return nil }
            return (level, message)
        }
    }

    @Test("a check that keeps failing warns once, logs the rest at debug, and says once that it recovered")
    func oneWarningPerOutage() throws {
        let log = CapturedLog()
        var logger = Logger(label: "test") { label in JSONLogHandler(label: label, sink: log) }
        logger.logLevel = .trace
        let failures = RecurringFailureLog(logger: logger)
        let check = RecurringFailureLog.Check(name: "ended-session check", meanwhile: "will retry")
        let other = RecurringFailureLog.Check(name: "revocation sync", meanwhile: "checks go to the store")

        failures.succeeded(check)  // nothing failed: nothing to say
        for _ in 0..<5 { failures.failed(check, error: Unreachable()) }
        failures.failed(other, error: Unreachable())
        failures.succeeded(check)
        failures.succeeded(check)
        failures.failed(check, error: Unreachable())

        let lines = Self.lines(log)
        #expect(lines.map(\.0) == ["warning", "debug", "debug", "debug", "debug", "warning", "info", "warning"])
        #expect(lines[0].1 == "ended-session check failed; will retry")
        #expect(lines[5].1 == "revocation sync failed; checks go to the store")
        #expect(lines[6].1 == "ended-session check recovered")
        #expect(log.text.contains(#""error_type":"Unreachable""#), "the warning names the error's type")
    }
}
