import DataPlane
import EdgeHTTP
import Hummingbird
import JOSE

/// A refusal thrown by a route becomes its JSON answer (Hummingbird's error middleware asks for it).
extension GatewayError: HTTPResponseError {
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        response()
    }

    /// The refusal as Hummingbird's answer: `status`, `headers` and the JSON body.
    func response() -> Response {
        Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(json))))
    }
}
