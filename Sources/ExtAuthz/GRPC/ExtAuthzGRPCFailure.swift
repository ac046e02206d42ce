/// Why a call on the gRPC listener was not served, as the gRPC status and message its caller reads
/// (`grpc-status`, `grpc-message`, in a trailers-only answer).
struct ExtAuthzGRPCFailure: Error, Equatable {
    /// The gRPC status code (grpc/doc/statuscodes.md).
    let status: Int
    let message: String

    static let noMessage = ExtAuthzGRPCFailure(status: 13, message: "the call ended without its message: a unary call sends exactly one")
    static let moreThanOneMessage = ExtAuthzGRPCFailure(status: 13, message: "the call sent more than one message: a unary call sends exactly one")
    static let malformed = ExtAuthzGRPCFailure(status: 13, message: "the call's body is not a length-prefixed gRPC message")
    static let compressed = ExtAuthzGRPCFailure(
        status: 12, message: "the message is compressed: ext_authz reads uncompressed messages only (grpc-accept-encoding: identity)")
    static let tooLarge = ExtAuthzGRPCFailure(status: 8, message: "the message is over the most this method takes (1 MiB for a check, 1 KiB for a health check)")
    static let connectionFull = ExtAuthzGRPCFailure(
        status: 8, message: "the connection's calls hold more unfinished messages than ext_authz keeps (4 MiB): send fewer calls at once, or open another connection")
    static let timedOut = ExtAuthzGRPCFailure(status: 4, message: "the call's message did not arrive within 10 seconds of its HEADERS")
    static let notCheckRequest = ExtAuthzGRPCFailure(status: 13, message: "the message is not an envoy.service.auth.v3.CheckRequest")
    static let notHealthRequest = ExtAuthzGRPCFailure(status: 13, message: "the message is not a grpc.health.v1.HealthCheckRequest")

    static func unknownMethod(_ path: String) -> ExtAuthzGRPCFailure {
        ExtAuthzGRPCFailure(
            status: 12, message: "no method \(path.prefix(200)) here: ext_authz serves /envoy.service.auth.v3.Authorization/Check and /grpc.health.v1.Health/Check")
    }

    static func unknownService(_ service: String) -> ExtAuthzGRPCFailure {
        ExtAuthzGRPCFailure(status: 5, message: "no service \(service.prefix(100)) here: ask for envoy.service.auth.v3.Authorization or the server (\"\")")
    }
}
