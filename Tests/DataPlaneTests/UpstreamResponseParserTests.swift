@testable import DataPlane
@testable import EdgeHTTP
import Testing

/// The data plane's framing of upstream answers (`UpstreamResponseParser`): what it relays, what
/// it refuses, and that how the bytes are split across reads never changes either.
@Suite("Upstream answers are framed from their bytes, strictly, however they are split")
struct UpstreamResponseParserTests {
    /// What the parser reported: the heads, the body bytes joined, the number of ends, the error.
    struct Outcome {
        var heads: [UpstreamResponseHead] = []
        var body: [UInt8] = []
        var ends = 0
        var error: UpstreamResponseError?
        var closedEnds = false
    }

    /// Feeds `text` in pieces of `step` bytes (0: whole), then the connection's close when `close`.
    static func parse(
        _ text: String, step: Int = 0, toHEAD: Bool = false, upgrade: Bool = false, close: Bool = false, parser: UpstreamResponseParser = .init()
    ) -> Outcome {
        var parser = parser
        parser.expectResponse(toHEAD: toHEAD, upgrade: upgrade)
        let bytes = Array(text.utf8)
        var outcome = Outcome()
        var offset = 0
        while offset < bytes.count {
            let piece = Array(bytes[offset..<min(bytes.count, offset + (step == 0 ? bytes.count : step))])
            offset += piece.count
            do {
                try piece.withUnsafeBytes { raw in
                    try parser.parse(raw) { event in
                        switch event {
                        case .head(let head): outcome.heads.append(head)
                        case .body(let range): outcome.body += piece[range]
                        case .end: outcome.ends += 1
                        }
                    }
                }
            } catch {
                outcome.error = error as? UpstreamResponseError
                return outcome
            }
        }
        if close { outcome.closedEnds = parser.connectionClosed() }
        return outcome
    }

    static let chunked =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n5;ext=\"v\"\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"

    @Test("a body with Content-Length, chunked (extensions and trailers dropped) or read until the close is the same bytes whole or a byte at a time")
    func splitInvariance() {
        let cases: [(String, String, Bool)] = [
            ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello", "hello", false),
            (Self.chunked, "hello, world", false),
            ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", "until the end", true),
        ]
        for (text, body, untilClose) in cases {
            for step in [0, 1, 2, 3, 7] {
                let outcome = Self.parse(text, step: step, close: untilClose)
                #expect(outcome.error == nil, "step \(step)")
                #expect(outcome.heads.count == 1)
                #expect(String(decoding: outcome.body, as: UTF8.self) == body, "step \(step)")
                #expect(outcome.ends + (outcome.closedEnds ? 1 : 0) == 1, "step \(step)")
                #expect(outcome.heads.first?.keepAlive == !untilClose)
            }
        }
    }

    @Test("the head's fields are kept as sent (order, spelling, repeats), trimmed of spaces; the status and reason read")
    func headFields() throws {
        let outcome = Self.parse("HTTP/1.1 201 Created Now\r\nX-B:  two \r\nx-b: 2\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 0\r\n\r\n")
        let head = try #require(outcome.heads.first)
        #expect(head.status == 201)
        #expect(String(decoding: head.bytes[head.reason], as: UTF8.self) == "Created Now")
        #expect(head.fields.map { head.nameString(of: $0) + "=" + head.valueString(of: $0) } == [
            "X-B=two", "x-b=2", "Set-Cookie=a=1", "Set-Cookie=b=2", "Content-Length=0",
        ])
        #expect(head.framing == .none)
        #expect(head.contentLength == 0)
        #expect(outcome.ends == 1)
    }

    @Test("informational answers (100, 103) are skipped before the final one; 101 to a request that asked no upgrade is refused")
    func informational() {
        let skipped = Self.parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", step: 5)
        #expect(skipped.heads.map(\.status) == [200])
        #expect(skipped.body == Array("ok".utf8))
        #expect(Self.parse("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n").error == .unexpectedUpgrade)
    }

    @Test("a 101 to a request that asked for an upgrade is its final answer: what follows, in the same read or later, is the upgraded protocol's bytes, relayed as they came until the connection closes")
    func upgraded() {
        let frames = "\u{81}\u{02}hi\u{88}\u{00}"
        for step in [0, 1, 7] {
            let outcome = Self.parse("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" + frames, step: step, upgrade: true, close: true)
            #expect(outcome.error == nil)
            #expect(outcome.heads.map(\.status) == [101])
            #expect(outcome.body == Array(frames.utf8), "step \(step)")
            #expect(outcome.ends == 0 && outcome.closedEnds, "the end is the connection's close")
        }
        let refused = Self.parse("HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno", upgrade: true)
        #expect(refused.heads.map(\.status) == [403] && refused.body == Array("no".utf8) && refused.ends == 1, "an upgrade refused is an ordinary answer")
    }

    @Test("an answer to HEAD, a 204 and a 304 have no body whatever their Content-Length says, and keep the length to relay")
    func noBody() {
        let head = Self.parse("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", toHEAD: true)
        #expect(head.heads.first?.framing == UpstreamResponseHead.Framing.none)
        #expect(head.heads.first?.contentLength == 1234)
        #expect(head.ends == 1)
        for status in ["204 No Content", "304 Not Modified"] {
            let outcome = Self.parse("HTTP/1.1 \(status)\r\nContent-Length: 10\r\n\r\n")
            #expect(outcome.ends == 1)
            #expect(outcome.heads.first?.keepAlive == true)
        }
    }

    @Test("a connection is reused only after an HTTP/1.1 answer without Connection: close (or 1.0 with keep-alive) whose end is known")
    func keepAlive() {
        let reusable: [(String, Bool)] = [
            ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true),
            ("HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n", false),
            ("HTTP/1.1 200 OK\r\nConnection: x-a, close\r\nContent-Length: 0\r\n\r\n", false),
            ("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false),
            ("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", true),
            ("HTTP/1.1 200 OK\r\n\r\n", false),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", false),
        ]
        for (text, expected) in reusable {
            #expect(Self.parse(text).heads.first?.keepAlive == expected, "\(text)")
        }
        // A transfer coding wins over a length (RFC 9112 §6.3), and the length is not relayed.
        let both = Self.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n2\r\nab\r\n0\r\n\r\n")
        #expect(both.body == Array("ab".utf8))
        #expect(both.heads.first?.contentLength == nil)
    }

    @Test("what could be read two ways is refused with its code", arguments: [
        ("HTTP/2 200 OK\r\n\r\n", "invalid_status_line"),
        ("HTTP/1.1 20 OK\r\n\r\n", "invalid_status_line"),
        ("HTTP/1.1 099 Low\r\n\r\n", "invalid_status_line"),
        ("HTTP/1.1 200OK\r\n\r\n", "invalid_status_line"),
        ("\r\n\r\n", "invalid_status_line"),
        ("HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n", "invalid_field"),
        ("HTTP/1.1 200 OK\r\nX-A : 1\r\n\r\n", "invalid_field"),
        ("HTTP/1.1 200 OK\r\n: 1\r\n\r\n", "invalid_field"),
        ("HTTP/1.1 200 OK\r\nX-A: a\u{0}b\r\n\r\n", "invalid_field"),
        ("HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", "invalid_field"),
        ("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", "invalid_field"),
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", "invalid_content_length"),
        ("HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n", "invalid_content_length"),
        ("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", "invalid_content_length"),
        ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "invalid_content_length"),
        ("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", "invalid_content_length"),
        ("HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", "invalid_content_length"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", "invalid_chunk"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + String(repeating: "B", count: 120) + "\r\n", "invalid_chunk"),  // found by the fuzzer: overflowed
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "invalid_chunk"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", "invalid_chunk"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", "invalid_chunk"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 x\r\nab\r\n", "invalid_chunk"),
        ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabHTTP/1.1 200 OK\r\n\r\n", "unsolicited_bytes"),
    ])
    func refused(text: String, code: String) {
        for step in [0, 1] {
            #expect(Self.parse(text, step: step).error?.code == code, "step \(step): \(text.debugDescription)")
        }
    }

    @Test("a head, a field count or trailers past their bound are refused, however slowly they come")
    func bounds() {
        let parser = UpstreamResponseParser(maximumHeadBytes: 256, maximumFieldCount: 4)
        let long = "HTTP/1.1 200 OK\r\nX-A: " + String(repeating: "a", count: 300) + "\r\n\r\n"
        #expect(Self.parse(long, parser: parser).error == .headTooLarge)
        #expect(Self.parse(long, step: 1, parser: parser).error == .headTooLarge)
        let many = "HTTP/1.1 200 OK\r\n" + String(repeating: "X-A: 1\r\n", count: 5) + "\r\n"
        #expect(Self.parse(many, parser: parser).error == .tooManyFields)
        let trailers = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + String(repeating: "X-T: 0123456789\r\n", count: 20) + "\r\n"
        #expect(Self.parse(trailers, step: 3, parser: parser).error == .headTooLarge)
        let chunkLine = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + String(repeating: "e", count: 5_000) + "\r\n"
        #expect(Self.parse(chunkLine, step: 100).error == .invalidChunk)
    }

    @Test("after an error every later read is refused too, and nothing more is reported")
    func errorsStick() {
        var parser = UpstreamResponseParser()
        parser.expectResponse(toHEAD: false)
        var events = 0
        func feed(_ text: String) -> UpstreamResponseError? {
            do {
                try Array(text.utf8).withUnsafeBytes { raw in try parser.parse(raw) { _ in events += 1 } }
                return nil
            } catch {
                return error as? UpstreamResponseError
            }
        }
        #expect(feed("HTTP/1.1 200 OK\r\nX-A : 1\r\n\r\n") == .invalidField)
        #expect(feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") == .invalidField)
        #expect(events == 0)
    }
}
