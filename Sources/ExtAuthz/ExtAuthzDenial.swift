import EdgeHTTP
import JOSE
import NIOHTTP1

/// A refusal in the terms Envoy relays to the client, for both of ext_authz's modes: the status,
/// the fields and the body the gateway's own proxy would answer.
///
/// A navigation without a session is a 302 to sign in. A gRPC request (its `content-type`) gets
/// the gRPC form the data plane answers one with: 200, `grpc-status` and `grpc-message`, no body.
package struct ExtAuthzDenial: Sendable, Equatable {
    package let status: Int
    /// Lower-cased names, in order.
    package let fields: [Field]
    package let body: [UInt8]

    package struct Field: Sendable, Equatable {
        package let name: String
        package let value: String
    }

    package init(_ error: GatewayError, signIn: String?, requestID: String, contentType: String?) {
        if let signIn {
            status = 302
            fields = [Field(name: "location", value: signIn), Field(name: "cache-control", value: "no-store"), Field(name: "x-request-id", value: requestID)]
            body = []
        } else if let grpc = GRPCRequest.contentType(contentType) {
            let head = error.grpcResponseHead(contentType: grpc)
            status = Int(head.status.code)
            fields = head.headers.filter { $0.name.lowercased() != "content-length" }.map { Field(name: $0.name.lowercased(), value: $0.value) } + [Field(name: "x-request-id", value: requestID)]
            body = []
        } else {
            status = Int(error.status.code)
            fields = error.headers.map { Field(name: $0.name.canonicalName, value: $0.value) } + [Field(name: "x-request-id", value: requestID)]
            body = JSONWriter.bytes(error.json)
        }
    }
}
