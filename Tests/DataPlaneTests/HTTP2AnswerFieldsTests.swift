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
}
