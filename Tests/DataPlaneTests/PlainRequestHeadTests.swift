@testable import DataPlane
@testable import EdgeHTTP
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PortcullisTestSupport
import Testing

/// The data plane's reader of plain request heads (`PlainRequestHead`): it takes only what NIO's
/// decoder reads the same way, never more, whatever the bytes.
@Suite("A plain request head is read from bytes exactly as NIO's decoder reads it, or left to NIO")
struct PlainRequestHeadTests {
    static let limits = PlainRequestHead.Limits(maximumHeadBytes: 16_384, maximumFieldCount: 100, maximumFieldBytes: 8_192)

    static func parse(_ bytes: [UInt8], limits: PlainRequestHead.Limits = limits) -> PlainRequestHead.Outcome {
        bytes.withUnsafeBytes { PlainRequestHead.parse($0, limits: limits) }
    }

    /// What NIO's request decoder (the gateway's limits) reads from `bytes`: its parts, or `nil` when it refuses them.
    static func nio(_ bytes: [UInt8], limits: PlainRequestHead.Limits = limits) -> [HTTPServerRequestPart]? {
        var configuration = NIOHTTPDecoderLimitConfiguration()
        configuration.maxHeaderListSize = limits.maximumHeadBytes
        configuration.maxHeaderFieldCount = limits.maximumFieldCount
        configuration.maxHeaderFieldSize = limits.maximumFieldBytes
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, limitConfiguration: configuration)))
        defer { _ = try? channel.finish() }
        do {
            try channel.writeInbound(ByteBuffer(bytes: bytes))
        } catch {
            return nil
        }
        var parts: [HTTPServerRequestPart] = []
        while let part = try? channel.readInbound(as: HTTPServerRequestPart.self) { parts.append(part) }
        return parts
    }

    /// The head in NIO's types, as the front hands it to the exchange.
    static func nioHead(_ head: PlainRequestHead) -> HTTPRequestHead {
        HTTPRequestHead(
            version: .http1_1, method: HTTPMethod(rawValue: head.method.rawValue), uri: head.uri,
            headers: HTTPHeaders(head.fields))
    }

    /// Checks the rule on one input: a complete plain head is exactly NIO's head, then as many
    /// body bytes as its `bodyLength` (the bytes after it, or filler where the input ends), then
    /// NIO's end, read from the same bytes; and every shorter prefix is incomplete.
    static func checkAgainstNIO(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .complete(let head) = parse(bytes) else { return }
        guard head.bodyLength <= 1 << 20 else { return }  // a length this test cannot send; its digits are checked apart
        let body = Array(bytes[head.length...].prefix(head.bodyLength)) + Array(repeating: UInt8(ascii: "b"), count: max(0, head.bodyLength - (bytes.count - head.length)))
        let consumed = Array(bytes[..<head.length]) + body
        guard let parts = nio(consumed) else {
            Issue.record("NIO refuses a head read as plain: \(String(decoding: consumed, as: UTF8.self).debugDescription)", sourceLocation: sourceLocation)
            return
        }
        guard parts.count >= 2, case .head(let nioHead) = parts[0], case .end(nil) = parts[parts.count - 1] else {
            Issue.record("NIO reads other parts from a plain head: \(parts)", sourceLocation: sourceLocation)
            return
        }
        // The body NIO reads is the bytes the front passes: no more, no fewer.
        var nioBody: [UInt8] = []
        for part in parts.dropFirst().dropLast() {
            guard case .body(let buffer) = part else {
                Issue.record("NIO reads other parts from a plain head: \(parts)", sourceLocation: sourceLocation)
                return
            }
            nioBody += Array(buffer.readableBytesView)
        }
        #expect(nioBody == body, "a body of \(head.bodyLength) bytes read as \(nioBody.count)", sourceLocation: sourceLocation)
        #expect(nioHead == Self.nioHead(head), sourceLocation: sourceLocation)
        // Whether the connection closes after the answer is NIO's reading of the same head.
        #expect(nioHead.isKeepAlive == Self.nioHead(head).isKeepAlive, "\(String(decoding: consumed, as: UTF8.self).debugDescription)", sourceLocation: sourceLocation)
        for cut in stride(from: 0, to: head.length, by: max(1, head.length / 16)) {
            if case .complete = parse(Array(bytes[..<cut])) {
                Issue.record("a prefix of \(cut) bytes read as complete", sourceLocation: sourceLocation)
            }
        }
    }

    static let plain = Array("GET /api/v1/items?page=2 HTTP/1.1\r\nHost: gw.example\r\nAuthorization: Bearer abc.def.ghi\r\nX-Session-Id:\tses_1\r\n\r\n".utf8)

    @Test("a plain GET is read whole: method, target and fields as sent, the whitespace before a value dropped, its length through the blank line")
    func readsPlainHead() throws {
        let bytes = Self.plain + Array("GET /next HTTP/1.1\r\n".utf8)
        guard case .complete(let head) = Self.parse(bytes) else {
            Issue.record("not read")
            return
        }
        #expect(head.method == .GET)
        #expect(head.uri == "/api/v1/items?page=2")
        #expect(head.fields.map { "\($0.0)=\($0.1)" } == ["Host=gw.example", "Authorization=Bearer abc.def.ghi", "X-Session-Id=ses_1"])
        #expect(head.length == Self.plain.count)
        Self.checkAgainstNIO(bytes)
    }

    @Test(
        "one Content-Length of decimal digits (no sign, no leading zero, at most 15 digits), in any letter case, is read as the body's length; the field is kept for the upstream; NIO reads the same head and exactly that many body bytes",
        arguments: [
            ("Content-Length: 2", "hi", 2), ("content-length:5", "hello", 5), ("CONTENT-LENGTH:\t0", "", 0), ("Content-Length: 10", "0123456789", 10),
            ("Content-Length: 999999999999999", "", 999_999_999_999_999),
        ])
    func readsOneDecimalLength(field: String, body: String, length: Int) throws {
        let text = "POST /api/mcp HTTP/1.1\r\nHost: gw\r\n\(field)\r\nAccept: */*\r\n\r\n"
        let bytes = Array((text + body + "GET /next HTTP/1.1\r\n\r\n").utf8)
        guard case .complete(let head) = Self.parse(bytes) else {
            Issue.record("not read: \(field)")
            return
        }
        #expect(head.bodyLength == length)
        #expect(head.length == text.utf8.count)
        #expect(head.fields.contains { $0.0.lowercased() == "content-length" })
        Self.checkAgainstNIO(bytes)
    }

    @Test("a head without Content-Length has no body: the bytes after it are the next request's")
    func noLengthNoBody() {
        guard case .complete(let head) = Self.parse(Self.plain + Array("POST /x HTTP/1.1\r\n".utf8)) else {
            Issue.record("not read")
            return
        }
        #expect(head.bodyLength == 0)
    }

    @Test("every prefix of a plain head is incomplete, never complete and never refused")
    func prefixesAreIncomplete() {
        for cut in 0..<Self.plain.count {
            #expect(Self.parse(Array(Self.plain[..<cut])) == .incomplete, "prefix of \(cut) bytes")
        }
    }

    @Test("one Connection: close, in any case, is plain: its head carries it, and NIO's reading of the same bytes closes after the answer too")
    func connectionCloseIsPlain() {
        for text in ["GET /a HTTP/1.1\r\nConnection: close\r\n\r\n", "GET /a HTTP/1.1\r\nconnection: Close\r\n\r\n", "GET /a HTTP/1.1\r\nConnection: CLOSE\r\n\r\n"] {
            guard case .complete(let head) = Self.parse(Array(text.utf8)) else {
                Issue.record("not read as plain: \(text.debugDescription)")
                continue
            }
            #expect(!Self.nioHead(head).isKeepAlive, "\(text.debugDescription)")
            Self.checkAgainstNIO(Array(text.utf8))
        }
    }

    @Test(
        "anything outside the plain subset is left to NIO: chunked bodies, lengths not of plain digits, upgrades, expectations, Connection other than one keep-alive or close, HTTP/1.0, other methods, folded or odd fields, bare LF, odd targets",
        arguments: [
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "POST /a HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n0\r\n\r\n",
            "POST /a HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
            "POST /a HTTP/1.1\r\nContent-Length: 2\r\ncontent-length: 3\r\n\r\nhi!",
            "POST /a HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nhi",
            "POST /a HTTP/1.1\r\nContent-Length: +2\r\n\r\nhi",
            "POST /a HTTP/1.1\r\nContent-Length: -2\r\n\r\n",
            "POST /a HTTP/1.1\r\nContent-Length: 02\r\n\r\nhi",
            "POST /a HTTP/1.1\r\nContent-Length: 00\r\n\r\n",
            "POST /a HTTP/1.1\r\nContent-Length: 0x2\r\n\r\nhi",
            "POST /a HTTP/1.1\r\nContent-Length: 2e0\r\n\r\nhi",
            "POST /a HTTP/1.1\r\nContent-Length: 2 2\r\n\r\nhi",
            "POST /a HTTP/1.1\r\nContent-Length: \r\n\r\n",
            "POST /a HTTP/1.1\r\nContent-Length: 1000000000000000\r\n\r\n",
            "POST /a HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "POST /a HTTP/1.1\r\nContent-Length : 2\r\n\r\nhi",
            "POST /a HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n",
            "GET /a HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
            "PUT /a HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            "GET /a HTTP/1.1\r\nConnection: close, te\r\n\r\n",
            "GET /a HTTP/1.1\r\nConnection: keep-alive, te\r\n\r\n",
            "GET /a HTTP/1.1\r\nConnection: closed\r\n\r\n",
            // Two Connection fields: NIO's decoder keeps alive on two keep-alives, the head's own reading closes.
            "GET /a HTTP/1.1\r\nConnection: keep-alive\r\nConnection: keep-alive\r\n\r\n",
            "GET /a HTTP/1.1\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n",
            "GET /a HTTP/1.1\r\nConnection: te\r\n\r\n",
            // NIO's parser closes after an answer to Proxy-Connection: close, as it does for Connection: close.
            "GET /a HTTP/1.1\r\nProxy-Connection: close\r\n\r\n",
            "GET /a HTTP/1.1\r\nproxy-connection: keep-alive\r\n\r\n",
            "GET /a HTTP/1.0\r\n\r\n",
            "GET /a HTTP/1.10\r\n\r\n",
            "get /a HTTP/1.1\r\n\r\n",
            "OPTIONS /a HTTP/1.1\r\n\r\n",
            "CONNECT gw:443 HTTP/1.1\r\n\r\n",
            "GET  /a HTTP/1.1\r\n\r\n",
            "GET http://gw/a HTTP/1.1\r\n\r\n",
            "GET * HTTP/1.1\r\n\r\n",
            "GET /a#frag HTTP/1.1\r\n\r\n",
            "GET /a\"b HTTP/1.1\r\n\r\n",
            "GET /a\u{7F} HTTP/1.1\r\n\r\n",
            "GET /é HTTP/1.1\r\n\r\n",
            "GET /a HTTP/1.1\nHost: x\r\n\r\n",
            "GET /a HTTP/1.1\r\nHost: x\n\r\n",
            "GET /a HTTP/1.1\r\nHost: x\r\n\n",
            "GET /a HTTP/1.1\r\nHost: x\rY: z\r\n\r\n",
            "GET /a HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n",
            "GET /a HTTP/1.1\r\nX-A : 1\r\n\r\n",
            "GET /a HTTP/1.1\r\n X-A: 1\r\n\r\n",
            "GET /a HTTP/1.1\r\nX(A): 1\r\n\r\n",
            "GET /a HTTP/1.1\r\n: 1\r\n\r\n",
            "GET /a HTTP/1.1\r\nX-A: 1 \r\n\r\n",
            "GET /a HTTP/1.1\r\nX-A: 1\t\r\n\r\n",
            "GET /a HTTP/1.1\r\nX-A: caf\u{E9}\r\n\r\n",
            "GET /a HTTP/1.1\r\nX-A: a\u{0}b\r\n\r\n",
            "GET /a HTTP/1.1\r\nX-A: a\u{7F}b\r\n\r\n",
            "GET /a HTTP/1.1\r\nX-A: 1\r\n\r",
            "\r\nGET /a HTTP/1.1\r\n\r\n",
        ])
    func leavesTheRestToNIO(_ text: String) {
        let bytes = Array(text.utf8)
        #expect(Self.parse(bytes) == .notPlain || (Self.parse(bytes) == .incomplete && text.hasSuffix("\r")), "\(text.debugDescription)")
    }

    @Test("a head past the listener's bounds (field count, a field's size, all fields' size) is left to NIO, which refuses it; one within them is read")
    func boundsAreNIOs() {
        let limits = PlainRequestHead.Limits(maximumHeadBytes: 200, maximumFieldCount: 3, maximumFieldBytes: 40)
        let within = Array("GET /a HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: \(String(repeating: "v", count: 38))\r\n\r\n".utf8)
        guard case .complete = Self.parse(within, limits: limits) else {
            Issue.record("a head within the bounds was not read")
            return
        }
        #expect(Self.nio(within, limits: limits) != nil)
        let cases = [
            "GET /a HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n",
            "GET /a HTTP/1.1\r\nC: \(String(repeating: "v", count: 41))\r\n\r\n",
            "GET /\(String(repeating: "a", count: 300))",
        ]
        for text in cases {
            #expect(Self.parse(Array(text.utf8), limits: limits) == .notPlain, "\(text.prefix(60).debugDescription)")
        }
        #expect(Self.nio(Array(cases[0].utf8), limits: limits) == nil)
        #expect(Self.nio(Array(cases[1].utf8), limits: limits) == nil)
        // All fields together past the head's bound, each within its own.
        let total = PlainRequestHead.Limits(maximumHeadBytes: 100, maximumFieldCount: 10, maximumFieldBytes: 60)
        let many = Array(("GET /a HTTP/1.1\r\n" + ["A", "B", "C"].map { "\($0): \(String(repeating: "v", count: 38))\r\n" }.joined() + "\r\n").utf8)
        #expect(Self.parse(many, limits: total) == .notPlain)
        #expect(Self.nio(many, limits: total) == nil)
    }

    @Test("a target longer than a field may be, or a head past its bound with no field to count, is left to NIO, which answers 431; at the bounds both read it")
    func targetLengthIsBounded() {
        let limits = PlainRequestHead.Limits(maximumHeadBytes: 200, maximumFieldCount: 10, maximumFieldBytes: 64)
        // The target alone, one byte past a field's bound: NIO counts the URL as a field.
        let longTarget = Array("GET /\(String(repeating: "a", count: 64)) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        #expect(Self.parse(longTarget, limits: limits) == .notPlain)
        #expect(Self.nio(longTarget, limits: limits) == nil)
        let atBound = Array("GET /\(String(repeating: "a", count: 63)) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        guard case .complete = Self.parse(atBound, limits: limits) else {
            Issue.record("a target at the bound was not read")
            return
        }
        #expect(Self.nio(atBound, limits: limits) != nil)
        // The target and the fields together past the head's bound, each within its own.
        let wide = PlainRequestHead.Limits(maximumHeadBytes: 100, maximumFieldCount: 10, maximumFieldBytes: 64)
        let together = Array("GET /\(String(repeating: "a", count: 60)) HTTP/1.1\r\nA: \(String(repeating: "v", count: 40))\r\n\r\n".utf8)
        #expect(Self.parse(together, limits: wide) == .notPlain)
        #expect(Self.nio(together, limits: wide) == nil)
        // A target past a field's bound, its read ending before " HTTP/1.1": not plain, not incomplete.
        #expect(Self.parse(Array("GET /\(String(repeating: "a", count: 70))".utf8), limits: limits) == .notPlain)
        // A field bound above the head's (the configuration allows it): the head's bound still holds the target.
        let wideFields = PlainRequestHead.Limits(maximumHeadBytes: 1_024, maximumFieldCount: 100, maximumFieldBytes: 8_192)
        #expect(Self.parse(Array("GET /\(String(repeating: "a", count: 1_030))".utf8), limits: wideFields) == .notPlain)
        #expect(Self.parse(Array("GET /\(String(repeating: "a", count: 1_000))".utf8), limits: wideFields) == .incomplete)
    }

    @Test("an unfinished head never holds a blank line or more than the head's bound: 3,000 generated heads, every prefix; what follows a target is the start of ' HTTP/1.1' or not plain")
    func incompleteHoldsNoBlankLine() {
        var random = SeededGenerator(seed: 0x5EED_2026_1128)
        let pieces: [String] = ["GET", " ", "/", "/api/x", " HTTP/1.1", " HTTP", "\r\n", "\n", "\r", "\r\n\r\n", "Host", ": ", "v", "X-A", "\t", "\u{0}"]
        // Two shapes of bounds: the field's below the head's, and above it (the configuration allows both).
        for limits in [PlainRequestHead.Limits(maximumHeadBytes: 64, maximumFieldCount: 4, maximumFieldBytes: 48), PlainRequestHead.Limits(maximumHeadBytes: 40, maximumFieldCount: 4, maximumFieldBytes: 80)] {
        for _ in 0..<1_500 {
            var bytes: [UInt8] = Array("GET /a".utf8)
            for _ in 0..<Int(random.next() % 16) { bytes += Array(pieces[Int(random.next() % UInt64(pieces.count))].utf8) }
            for cut in 0...bytes.count {
                let prefix = Array(bytes[..<cut])
                guard Self.parse(prefix, limits: limits) == .incomplete else { continue }
                let text = String(decoding: prefix, as: UTF8.self)
                #expect(!text.contains("\r\n\r\n") && !text.utf8.elementsEqual("\n\n".utf8) && !text.contains("\n\n"), "\(text.debugDescription)")
                #expect(prefix.count <= limits.maximumHeadBytes + 2, "\(prefix.count) bytes")
            }
        }
        }
        for text in ["GET / \r\n\r\n", "GET /x HTTP\r\n\r\n", "GET /x HTTP/1.1\r", "GET /x HTTP/1.1\r\nA: b\r\n\r"] {
            let outcome = Self.parse(Array(text.utf8))
            #expect(outcome == (text.hasSuffix("\r") ? .incomplete : .notPlain), "\(text.debugDescription)")
        }
    }

    @Test("differential: 20,000 generated and mutated heads; every one read as plain is what NIO's decoder reads from the same bytes")
    func differentialAgainstNIO() {
        var random = SeededGenerator(seed: 0x5EED_2026_1125)
        let pieces: [String] = [
            "GET", "POST", "HEAD", "DELETE", "PUT", "PATCH", "OPTIONS", "get", " ", "  ", "\t", "/", "/api/v1/x", "?a=b&c=%41", "%2F", "..", "#", ";",
            " HTTP/1.1", " HTTP/1.0", "\r\n", "\n", "\r", "Host", "host", "Content-Length", "Transfer-Encoding", "Connection", "keep-alive", "close",
            "Upgrade", "Expect", "Proxy-Connection", ":", ": ", ":\t", "value", "Bearer x.y.z", "chunked", "0", "12", "007", "+1", "3, 3", "Content-Length: 4\r\n", "X-A", "x_b", "\u{0}", "\u{7F}", "é", "\"", "@", "~",
        ]
        for _ in 0..<20_000 {
            var bytes: [UInt8]
            if random.next() % 2 == 0 {
                // A plain head with a few fields, then mutated at a few places.
                var text = ["GET", "POST", "DELETE", "HEAD"][Int(random.next() % 4)] + " /api/v\(random.next() % 9)/x?q=\(random.next() % 99) HTTP/1.1\r\n"
                for _ in 0..<Int(random.next() % 5) {
                    text += ["Host", "X-Session-Id", "Authorization", "Accept", "Connection", "Content-Length"][Int(random.next() % 6)] + [": ", ":", ":\t", ":  "][Int(random.next() % 4)]
                    text += ["gw", "keep-alive", "Bearer a.b.c", "*/*", "ses_x", "3", "12", "0", "close", "Close"][Int(random.next() % 10)] + "\r\n"
                }
                // A body after the head, sometimes: a request of its own, sometimes (what a smuggler sends).
                bytes = Array((text + "\r\n" + ["", "abc", "GET /smuggled HTTP/1.1\r\n\r\n"][Int(random.next() % 3)]).utf8)
                for _ in 0..<Int(random.next() % 3) where !bytes.isEmpty {
                    let at = Int(random.next() % UInt64(bytes.count))
                    switch random.next() % 3 {
                    case 0: bytes[at] = UInt8(truncatingIfNeeded: random.next())
                    case 1: bytes.remove(at: at)
                    default: bytes.insert(contentsOf: Array(pieces[Int(random.next() % UInt64(pieces.count))].utf8), at: at)
                    }
                }
            } else {
                // Pieces joined at random.
                bytes = []
                for _ in 0..<Int(random.next() % 24) { bytes += Array(pieces[Int(random.next() % UInt64(pieces.count))].utf8) }
                bytes += Array("\r\n\r\n".utf8)
            }
            Self.checkAgainstNIO(bytes)
        }
    }
}
