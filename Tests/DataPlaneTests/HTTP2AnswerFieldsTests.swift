@testable import DataPlane
import NIOHPACK
import NIOHTTP1
import Testing

/// A route stream's answer head in HTTP/2 fields (`HTTP2RouteStream.fields(of:)`): the fields
/// swift-nio-http2's HTTP/1 codec would send for the same head, in the same order.
@Suite("A route stream's answer fields are the ones swift-nio-http2's codec makes of the same head")
struct HTTP2AnswerFieldsTests {
    static func codecFields(_ head: HTTPResponseHead) -> [String] {
        var all = HPACKHeaders()
        all.add(name: ":status", value: String(head.status.code))
        all.add(contentsOf: HPACKHeaders(httpHeaders: head.headers, normalizeHTTPHeaders: true))
        return all.map { "\($0.name): \($0.value)" }
    }

    @Test("names lower-cased, order and repeats kept, the connection-specific fields dropped", arguments: [
        HTTPHeaders([("Content-Type", "application/json"), ("Content-Length", "12"), ("X-Request-Id", "abc")]),
        HTTPHeaders([("set-cookie", "a=1"), ("Set-Cookie", "b=2"), ("Vary", "Origin"), ("vary", "Cookie"), ("x-empty", "")]),
        HTTPHeaders([("Connection", "close"), ("Keep-Alive", "timeout=5"), ("Transfer-Encoding", "chunked"), ("Upgrade", "h2c"), ("Proxy-Connection", "close"), ("Cache-Control", "no-store")]),
        HTTPHeaders(),
    ])
    func sameAsTheCodec(headers: HTTPHeaders) {
        let head = HTTPResponseHead(version: .http2, status: .ok, headers: headers)
        #expect(HTTP2RouteStream.fields(of: head).map { "\($0.name): \($0.value)" } == Self.codecFields(head))
    }

    @Test("the request id, new for every answer, is kept out of HPACK's table; the other fields may enter it")
    func requestIDNotIndexed() {
        let head = HTTPResponseHead(version: .http2, status: .notFound, headers: HTTPHeaders([("X-Request-Id", "abc"), ("Content-Type", "text/plain")]))
        let indexing: [String: HPACKIndexing] = Dictionary(uniqueKeysWithValues: HTTP2RouteStream.fields(of: head).map { ($0.name, $0.indexable) })
        #expect(indexing["x-request-id"] == HPACKIndexing.nonIndexable)
        #expect(indexing["content-type"] == HPACKIndexing.indexable && indexing[":status"] == HPACKIndexing.indexable)
    }

    /// An upstream's head as the parser makes it.
    static func upstreamHead(_ text: String) throws -> UpstreamResponseHead {
        var parser = UpstreamResponseParser()
        parser.expectResponse(toHEAD: false)
        var head: UpstreamResponseHead?
        try Array(text.utf8).withUnsafeBytes { raw in
            try parser.parse(raw) { event in
                if case .head(let parsed) = event { head = parsed }
            }
        }
        return try #require(head)
    }

    @Test("an upstream head's fields put straight into HPACK are those of its HTTP/1 head through the codec's rules", arguments: [
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Mixed-CASE-Name: V a l\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n",
        "HTTP/1.1 404 Not Found\r\nvary: Accept\r\ncache-control: no-store\r\nX-Empty:\r\n\r\n",
        "HTTP/1.1 204 No Content\r\n\r\n",
    ])
    func straightFromTheUpstreamBytes(text: String) throws {
        let response = try Self.upstreamHead(text)
        var viaHTTP1 = HTTPHeaders()
        var direct = HPACKHeaders()
        direct.add(name: ":status", value: String(response.status))
        for field in response.fields {
            viaHTTP1.add(field, of: response)
            direct.add(field, of: response)
        }
        for (field, value) in [(GatewayAnswerField.contentLength, "12"), (.requestID, "abc"), (.allowOrigin, "https://app.example"), (.vary, "Origin")] {
            viaHTTP1.add(field, value: value)
            direct.add(field, value: value)
        }
        let codec = HTTP2RouteStream.fields(of: HTTPResponseHead(version: .http2, status: .init(statusCode: response.status), headers: viaHTTP1))
        #expect(direct.map { "\($0.name): \($0.value)" } == codec.map { "\($0.name): \($0.value)" })
        #expect(direct.map { $0.indexable } == codec.map { $0.indexable })
    }
}
