import EdgeHTTP
import NIOHTTP1

/// The fields of a proxied request's head that its exchange acts on, read in one pass.
///
/// An exchange consults about ten fields (credentials, framing, expectation, session, origin,
/// `Connection`); looking each up by name walked the whole head each time. Names match in any
/// letter case. A field sent more than once is read as HTTP reads a repeated field (RFC 9110
/// §5.3): its values joined with ", " (`Content-Length` and `Host` excepted: their first
/// value, which the request screen has already made the only one that matters).
struct RequestFields {
    /// `Authorization`, for the bearer token.
    private(set) var authorization: String?
    /// `X-Session-Id`, the session the client names.
    private(set) var sessionID: String?
    /// `Expect`: the gateway answers `100-continue` itself and refuses any other.
    private(set) var expect: String?
    /// `Origin`, for the CORS answer.
    private(set) var origin: String?
    /// The first `Content-Length`.
    private(set) var contentLength: String?
    /// The first `Content-Type`: a gRPC request is refused in gRPC's terms (`GRPCRequest`).
    private(set) var contentType: String?
    /// The first `grpc-timeout`: the call's deadline, which bounds the wait for the upstream's answer.
    private(set) var grpcTimeout: String?
    /// The first `Host`, sent upstream as `X-Forwarded-Host`.
    private(set) var host: String?
    /// Whether the request names a transfer coding (its body then goes upstream chunked).
    private(set) var hasTransferEncoding = false
    /// The names the head's `Connection` header lists, folded (hop-by-hop for this request):
    /// empty, with nothing allocated, for the usual request.
    private(set) var connectionListed: Set<String> = []

    init(_ headers: HTTPHeaders) {
        for (name, value) in headers {
            // The length first: most fields are none of these and are passed over after one comparison.
            switch name.utf8.count {
            case 4 where HeaderScreen.equalsLowercased(name.utf8, "host"):
                if host == nil { host = value }
            case 6 where HeaderScreen.equalsLowercased(name.utf8, "expect"):
                Self.join(value, into: &expect)
            case 6 where HeaderScreen.equalsLowercased(name.utf8, "origin"):
                Self.join(value, into: &origin)
            case 10 where HeaderScreen.equalsLowercased(name.utf8, "connection"):
                HeaderScreen.insertListed(value.utf8[...], into: &connectionListed)
            case 12 where HeaderScreen.equalsLowercased(name.utf8, "x-session-id"):
                Self.join(value, into: &sessionID)
            case 12 where HeaderScreen.equalsLowercased(name.utf8, "content-type"):
                if contentType == nil { contentType = value }
            case 12 where HeaderScreen.equalsLowercased(name.utf8, "grpc-timeout"):
                if grpcTimeout == nil { grpcTimeout = value }
            case 13 where HeaderScreen.equalsLowercased(name.utf8, "authorization"):
                Self.join(value, into: &authorization)
            case 14 where HeaderScreen.equalsLowercased(name.utf8, "content-length"):
                if contentLength == nil { contentLength = value }
            case 17 where HeaderScreen.equalsLowercased(name.utf8, "transfer-encoding"):
                hasTransferEncoding = true
            default:
                break
            }
        }
    }

    /// `value` added to a repeated field's value (RFC 9110 §5.3).
    private static func join(_ value: String, into field: inout String?) {
        field = field.map { $0 + ", " + value } ?? value
    }
}
