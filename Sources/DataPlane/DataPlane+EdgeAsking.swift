import NIOCore
import Observability

/// What an edge in front that asks for decisions (forward-auth's proxy; Envoy's ext_authz, in its
/// own module) reads of the data plane beside `AccessDecision`.
extension DataPlane {
    /// The client's address for a question from `peer`: a trusted proxy's `X-Forwarded-For` believed, as on a route.
    package func clientAddress(peer: String?, forwardedFor: [String]) -> String {
        admission.clientAddresses.clientAddress(peer: peer, forwardedFor: forwardedFor)
    }

    /// Records one decision answered to an edge: its metric under `endpoint`, and its access line.
    package func recordDecision(
        endpoint: String, requestID: String, method: String, status: Int, nanoseconds: Int64, protocol version: String, userID: String?, userName: String?
    ) {
        metrics.request(route: endpoint, method: method, status: status, nanoseconds: nanoseconds)
        accessLog.record(
            requestID: requestID, method: method, route: endpoint, path: endpoint, status: status, nanoseconds: nanoseconds, protocol: version,
            userID: userID, userName: userName)
    }
}
