import EdgeHTTP
import NIOCore

/// The open connections one ext_authz listener holds: up to `ext_authz.max_connections` from
/// addresses in `callers`, and a few (`maximumStrangerConnections`) from any other.
///
/// A connection from an address not in `callers` is still served, so that each of its calls is
/// denied (an RPC error or a closed connection would let an Envoy failing open through); but
/// anyone who can reach the port could otherwise fill every slot and shut the real callers out.
/// Under `tls` with no `callers`, every address is a caller, and the certificate decides.
struct ExtAuthzConnectionSlots: Sendable {
    private let callers: ConnectionCounter
    private let strangers: ConnectionCounter
    private let configuration: ExtAuthzConfiguration

    init(configuration: ExtAuthzConfiguration) {
        self.configuration = configuration
        callers = ConnectionCounter(limit: configuration.maximumConnections)
        strangers = ConnectionCounter(limit: ExtAuthzConfiguration.maximumStrangerConnections)
    }

    /// Takes a slot for `channel`, given back when it closes; `false` when its kind has none left.
    func admit(_ channel: any Channel) -> Bool {
        let counter = configuration.admits(channel.remoteAddress?.ipAddress) ? callers : strangers
        guard counter.acquire() else { return false }
        channel.closeFuture.whenComplete { _ in counter.release() }
        return true
    }
}
