@testable import DataPlane
@testable import EdgeHTTP
import NIOHTTP1
import Testing

@Suite("RequestFields: one pass over a request head reads each field the exchange acts on as a lookup by name would")
struct RequestFieldsTests {
    @Test("names match in any case; a repeated field is its values joined with \", \"; Content-Length and Host are their first value")
    func readsAsLookupsByName() {
        let headers = HTTPHeaders([
            ("HOST", "a.example"), ("host", "b.example"), ("authorization", "Bearer x"), ("X-Session-ID", "s1"), ("x-session-id", "s2"),
            ("Origin", "https://app.example"), ("EXPECT", "100-continue"), ("Content-Length", "5"), ("content-length", "7"),
            ("Transfer-Encoding", "chunked"), ("Connection", "keep-alive, X_Trace"), ("connection", "close, Te"), ("X-Other", "1"),
        ])
        let fields = RequestFields(headers)
        #expect(fields.host == "a.example")
        #expect(fields.authorization == "Bearer x")
        #expect(fields.sessionID == "s1, s2")
        #expect(fields.origin == "https://app.example")
        #expect(fields.expect == "100-continue")
        #expect(fields.contentLength == "5")
        #expect(fields.hasTransferEncoding)
        #expect(fields.connectionListed == ["x-trace", "te"])
    }

    @Test("a head without those fields reads as none of them, and names of the same length are not mistaken for them")
    func absentFields() {
        let fields = RequestFields(HTTPHeaders([("Hosts", "x"), ("Expect-", "y"), ("Authorisation", "Bearer z"), ("X-Session-Ix", "s"), ("Accept", "*/*")]))
        #expect(fields.host == nil && fields.expect == nil && fields.origin == nil && fields.authorization == nil && fields.sessionID == nil)
        #expect(fields.contentLength == nil && !fields.hasTransferEncoding && fields.connectionListed.isEmpty)
    }
}
