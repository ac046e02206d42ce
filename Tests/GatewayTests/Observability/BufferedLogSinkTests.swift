@testable import DataPlane
@testable import EdgeHTTP
import ConfigurationReading
import Foundation
@testable import Gateway
import JOSE
import Logging
import Observability
@testable import RuntimeAccess
import Synchronization
import Testing

@Suite("The buffered access log: gathered in completion order, written in batches, never dropped")
struct BufferedLogSinkTests {
    /// Collects the batches the sink writes.
    final class Batches: Sendable {
        private let list = Mutex<[[UInt8]]>([])
        func append(_ batch: [UInt8]) { list.withLock { $0.append(batch) } }
        var all: [[UInt8]] { list.withLock { $0 } }
        var lines: [String] { all.flatMap { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } }
    }

    /// A value shared by the writing threads, under its own lock.
    final class Shared<Value: Sendable>: Sendable {
        let value: Mutex<Value>
        init(_ value: Value) { self.value = Mutex(value) }
    }

    @Test("lines wait in the buffer until flush; every line from four threads arrives once, in the order they were appended (completion order), each thread's in its own order")
    func flushWritesEverything() async throws {
        let batches = Batches()
        let sink = BufferedLogSink(capacity: 1 << 20) { batches.append($0) }
        let appended = Shared<[String]>([])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for thread in 0..<4 {
                group.addTask {
                    try await onOwnThread {
                        for line in 0..<1_000 {
                            // The order they were appended in, as the sink saw it (under the same order of locks).
                            appended.value.withLock { order in
                                sink.write("t\(thread) \(line)")
                                order.append("t\(thread) \(line)")
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(batches.all.isEmpty, "nothing is written before the buffer fills or a flush")
        sink.flush()
        let lines = batches.lines
        #expect(lines.count == 4_000)
        #expect(lines == appended.value.withLock { $0 }, "one sequence in completion order, not one run per thread")
        for thread in 0..<4 {
            let mine = lines.filter { $0.hasPrefix("t\(thread) ") }
            #expect(mine == (0..<1_000).map { "t\(thread) \($0)" })
        }
        sink.flush()
        #expect(batches.all.count == 1, "an empty buffer writes nothing")
    }

    @Test("full buffers filled by four threads at once, with a slow output, are written in the order they filled (a thread finding another writing leaves its batch to it): the lines read back in one increasing sequence")
    func fullBuffersKeepTheirOrder() async throws {
        let batches = Batches()
        let sink = BufferedLogSink(capacity: 256) { batch in
            batches.append(batch)
            usleep(200)  // a slow write: another thread's full buffer waits, never overtakes
        }
        let counter = Shared(0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await onOwnThread {
                        for _ in 0..<500 {
                            // Numbered as the line is appended (under the sink's own lock): the order it was taken in.
                            sink.writeLine { line in
                                let next = counter.value.withLock { value in
                                    defer { value += 1 }
                                    return value
                                }
                                line.append(contentsOf: "n\(next)".utf8)
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        sink.flush()
        let numbers = batches.lines.compactMap { Int($0.dropFirst()) }
        #expect(numbers == Array(0..<2_000), "first difference at \(zip(numbers, 0...).first { $0 != $1 }.map { "\($0)" } ?? "none")")
        #expect(batches.all.count > 10)
    }

    @Test("a buffer that reaches its capacity is written by the thread that filled it, without waiting for a flush")
    func fullBufferWrites() {
        let batches = Batches()
        let sink = BufferedLogSink(capacity: 100) { batches.append($0) }
        for index in 0..<30 { sink.write("line \(index)") }  // 8 bytes each with its newline
        #expect(batches.all.count >= 2)
        #expect(batches.all.allSatisfy { $0.count >= 100 && $0.count < 110 })
        sink.flush()
        #expect(batches.lines == (0..<30).map { "line \($0)" })
    }

    @Test("an access line written straight to the sink is the JSON line the log handler would write: every field, the path escaped, a UTC timestamp of now")
    func accessLineAsJSON() throws {
        let batches = Batches()
        let sink = BufferedLogSink(capacity: 1 << 20) { batches.append($0) }
        let log = AccessLog(sink: sink, format: .json)
        log.record(requestID: "abc", method: "GET", route: "/api/x/**", path: #"/api/x/a"b\c"#, status: 200, nanoseconds: 1_234_567)
        sink.flush()
        let line = try #require(batches.lines.first)
        let object = try StrictJSONReader().parseObject(Array(line.utf8))
        #expect(object["message"] == "request")
        #expect(object["level"] == "info")
        #expect(object["label"] == "portcullis.access")
        #expect(object["path"] == .string(#"/api/x/a"b\c"#))
        #expect(object["route"] == "/api/x/**")
        #expect(object["request_id"] == "abc")
        #expect(object["method"] == "GET")
        #expect(object["status"] == .number(200), "numbers as numbers")
        #expect(object["duration_ms"] == .number(1.234))
        let stamp = try #require(object["ts"]?.stringValue)
        let parsed = try #require(try? Date(stamp, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)), "\(stamp)")
        #expect(abs(parsed.timeIntervalSinceNow) < 5, "\(stamp) is now, in UTC")
    }

    @Test("in text format the access line has swift-log's shape: timestamp, level, label, key=value pairs by name, message")
    func accessLineAsText() throws {
        let batches = Batches()
        let sink = BufferedLogSink(capacity: 1 << 20) { batches.append($0) }
        AccessLog(sink: sink, format: .text).record(requestID: "abc", method: "POST", route: "/api/intent", path: "/api/intent", status: 201, nanoseconds: 2_000_000)
        sink.flush()
        let line = try #require(batches.lines.first)
        let parts = line.split(separator: " ", maxSplits: 1)
        let stamp = String(parts[0])
        #expect((try? Date(stamp, strategy: Date.ISO8601FormatStyle())) != nil, "\(stamp)")
        #expect(parts[1] == "info portcullis.access : duration_ms=2.0 method=POST path=/api/intent protocol=HTTP/1.1 request_id=abc route=/api/intent status=201 request")
    }

    @Test("an admitted caller's user id is in its access line (user_id, last by name), in JSON and text, and as the log handler writes it; none for an anonymous request")
    func accessLineNamesTheUser() throws {
        let batches = Batches()
        let sink = BufferedLogSink(capacity: 1 << 20) { batches.append($0) }
        AccessLog(sink: sink, format: .json).record(requestID: "a", method: "GET", route: "/app/**", path: "/app/x", status: 200, nanoseconds: 1_000, userID: "ext_JnMG1")
        AccessLog(sink: sink, format: .text).record(requestID: "b", method: "GET", route: "/app/**", path: "/app/x", status: 200, nanoseconds: 1_000, userID: "usr_abc")
        AccessLog(sink: sink, format: .json).record(requestID: "c", method: "GET", route: "/app/**", path: "/app/x", status: 401, nanoseconds: 1_000)
        sink.flush()
        let lines = batches.lines
        #expect(try StrictJSONReader().parseObject(Array(lines[0].utf8))["user_id"] == "ext_JnMG1")
        #expect(lines[1].hasSuffix("status=200 user_id=usr_abc request"), "\(lines[1])")
        #expect(try StrictJSONReader().parseObject(Array(lines[2].utf8))["user_id"] == nil)
        let handlerLines = Lines()
        var logger = Logger(label: AccessLog.label) { JSONLogHandler(label: $0, sink: handlerLines) }
        logger.logLevel = .info
        AccessLog(logger: logger).record(requestID: "a", method: "GET", route: "/app/**", path: "/app/x", status: 200, nanoseconds: 1_000, userID: "ext_JnMG1")
        let bytesLine = try StrictJSONReader().parseObject(Array(lines[0].utf8))
        let handlerLine = try StrictJSONReader().parseObject(Array(try #require(handlerLines.all.first).utf8))
        #expect(bytesLine.members.filter { $0.name != "ts" } == handlerLine.members.filter { $0.name != "ts" })
    }

    @Test("user_name beside user_id: the username (else the email), the email (else the username), or none, as logging.access_user_name says; a name with a quote or a newline stays one line, quoted in text; a long one is cut at 128 bytes")
    func accessLineNamesThePerson() throws {
        let alice: JSONObject = ["preferred_username": "alice", "email": "alice@example.com"]
        #expect(AccessLogUserName.username.name(in: alice) == "alice" && AccessLogUserName.email.name(in: alice) == "alice@example.com")
        #expect(AccessLogUserName.username.name(in: ["email": "bob@example.com"]) == "bob@example.com")
        #expect(AccessLogUserName.email.name(in: ["preferred_username": "carol"]) == "carol")
        #expect(AccessLogUserName.none.name(in: alice) == nil && AccessLogUserName.username.name(in: [:]) == nil)
        #expect(AccessLogUserName.username.name(in: ["preferred_username": .string(String(repeating: "x", count: 500))])?.utf8.count == 128)
        let batches = Batches()
        let sink = BufferedLogSink(capacity: 1 << 20) { batches.append($0) }
        let hostile = "eve\" status=200 user_id=usr_admin\nforged"
        AccessLog(sink: sink, format: .text).record(
            requestID: "a", method: "GET", route: "/app/**", path: "/app/x", status: 403, nanoseconds: 1_000, userID: "usr_eve", userName: hostile)
        AccessLog(sink: sink, format: .json).record(
            requestID: "b", method: "GET", route: "/app/**", path: "/app/x", status: 200, nanoseconds: 1_000, userID: "usr_a", userName: "alice")
        sink.flush()
        let lines = batches.lines
        #expect(lines.count == 2, "\(lines)")
        #expect(lines[0].hasSuffix(#"user_id=usr_eve user_name="eve\" status=200 user_id=usr_admin\nforged" request"#), "\(lines[0])")
        let object = try StrictJSONReader().parseObject(Array(lines[1].utf8))
        #expect(object["user_name"] == "alice" && object["user_id"] == "usr_a")
        let log = AccessLog(sink: sink, format: .json)
        #expect(log.userName(alice) == "alice", "username by default")
    }

    @Test("logging.access_user_name reads username, email or none; another value stops start naming the key")
    func userNameSetting() async throws {
        #expect(try GatewayConfiguration(reading: try await RoutePolicyTests.load("logging:\n  access_user_name: email\n")).accessLogUserName == .email)
        #expect(try GatewayConfiguration(reading: try await RoutePolicyTests.load("logging:\n  format: text\n")).accessLogUserName == .username)
        let error = await #expect(throws: ConfigurationError.self) {
            _ = try GatewayConfiguration(reading: try await RoutePolicyTests.load("logging:\n  access_user_name: fullname\n"))
        }
        #expect(error?.key == "logging.access_user_name")
    }

    /// A sink that keeps whole lines (for the log handler's side of a comparison).
    final class Lines: LogSink {
        private let list = Mutex<[String]>([])
        func write(_ line: String) { list.withLock { $0.append(line) } }
        var all: [String] { list.withLock { $0 } }
    }

    @Test(
        "an access line built as bytes says what the log handler's line says: redacted and escaped path, duration as Double prints it",
        arguments: [
            ("/api/x/eyJhbGciOiJFUzI1NiJ9.e30.sig/y", Int64(1_234_567)), ("/api/session/rt_abcdef", 0), (#"/a"b\c/\u{1}/é"#, 999),
            ("/a/b.c.d/" + String(repeating: "z", count: 65) + "/", 1_000), ("/", 12_000_000), ("//x//", 1_500_000), ("", 123_456_789_012),
        ] as [(String, Int64)])
    func bytesLineMatchesHandler(path: String, nanoseconds: Int64) throws {
        let batches = Batches()
        let sink = BufferedLogSink(capacity: 1 << 20) { batches.append($0) }
        AccessLog(sink: sink, format: .json).record(requestID: "r\"1", method: "GET", route: "/api/**", path: path, status: 404, nanoseconds: nanoseconds)
        sink.flush()
        let handlerLines = Lines()
        var logger = Logger(label: AccessLog.label) { JSONLogHandler(label: $0, sink: handlerLines) }
        logger.logLevel = .info
        AccessLog(logger: logger).record(requestID: "r\"1", method: "GET", route: "/api/**", path: path, status: 404, nanoseconds: nanoseconds)
        let bytesLine = try StrictJSONReader().parseObject(Array(try #require(batches.lines.first).utf8))
        let handlerLine = try StrictJSONReader().parseObject(Array(try #require(handlerLines.all.first).utf8))
        #expect(bytesLine["ts"] != nil && handlerLine["ts"] != nil)
        #expect(bytesLine.members.filter { $0.name != "ts" } == handlerLine.members.filter { $0.name != "ts" }, "\(path)")
        #expect(bytesLine["path"]?.stringValue == PathRedaction.redactedPath(path))
        #expect(!(batches.lines.first ?? "").contains("eyJ") && !(batches.lines.first ?? "").contains("rt_"), "a credential-looking segment is never written")
    }
}
