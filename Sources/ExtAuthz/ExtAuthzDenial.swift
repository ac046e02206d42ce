import EdgeHTTP
import JOSE

/// A refusal in the terms Envoy relays to the client, for both of ext_authz's modes: the status,
/// the fields and the JSON body the gateway's own proxy would answer; a navigation without a
/// session is a 302 to sign in.
///
/// Never the gRPC form the data plane answers a gRPC request with (200 and `grpc-status`): Envoy
/// reads a 200 from an HTTP authorization server as allowed, and makes a gRPC client's status from
/// the HTTP status of a denial itself.
package struct ExtAuthzDenial: Sendable, Equatable {
    package let status: Int
    /// Lower-cased names, in order.
    package let fields: [Field]
    package let body: [UInt8]

    package struct Field: Sendable, Equatable {
        package let name: String
        package let value: String
    }

    package init(_ error: GatewayError, signIn: String?, requestID: String) {
        if let signIn {
            status = 302
            fields = [Field(name: "location", value: signIn), Field(name: "cache-control", value: "no-store"), Field(name: "x-request-id", value: requestID)]
            body = []
        } else {
            status = Int(error.status.code)
            fields = error.headers.map { Field(name: $0.name.canonicalName, value: $0.value) } + [Field(name: "x-request-id", value: requestID)]
            body = JSONWriter.bytes(error.json)
        }
    }
}
