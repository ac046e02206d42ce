import HTTPTypes
import NIOHTTP1

extension GatewayError {
    /// The refusal's head as NIO's HTTP/1 encoder writes it, for the handlers that answer
    /// before the conversion to HTTPTypes (the request-target screen and the data plane).
    package func responseHead(contentLength: Int, close: Bool, extra: (_ headers: inout HTTPHeaders) -> Void = { _ in }) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        headers.reserveCapacity(8)
        for field in self.headers { headers.add(name: field.name.rawName, value: field.value) }
        headers.add(name: "Content-Length", value: String(contentLength))
        if close { headers.add(name: "Connection", value: "close") }
        extra(&headers)
        return HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status.code, reasonPhrase: status.reasonPhrase), headers: headers)
    }
}
