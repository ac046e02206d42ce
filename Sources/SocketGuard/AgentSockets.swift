import DataPlane
import EdgeHTTP
import JOSE
import Logging
import NIOCore
import Observability
import SecurityGuard

/// What every agent socket's handler shares: the links to the Runtime, the
/// token checks for renewals, the registry that closes sockets, the limits.
///
/// Replaces a relay of tasks per socket: an admitted socket is served by one
/// `AgentSocketHandler` on its event loop, and its messages travel to the
/// Runtime as a stream of its loop's `RuntimeAgentLink`.
///
/// A class: every socket's handler holds it, and a copy of the struct (the limits, the logger,
/// the clock) was a few hundred bytes of every socket's memory.
package final class AgentSockets: Sendable {
    package let links: RuntimeAgentLinks
    let authenticator: AccessTokenAuthenticator
    let registry: SocketRegistry
    let metrics: GatewayMetrics
    let clock: any TokenClock
    let maximumMessageBytes: Int
    let limits: EdgeLimits
    let logger: Logger

    package init(
        links: RuntimeAgentLinks, authenticator: AccessTokenAuthenticator, registry: SocketRegistry, metrics: GatewayMetrics, clock: any TokenClock,
        maximumMessageBytes: Int, limits: EdgeLimits, logger: Logger
    ) {
        self.links = links
        self.authenticator = authenticator
        self.registry = registry
        self.metrics = metrics
        self.clock = clock
        self.maximumMessageBytes = maximumMessageBytes
        self.limits = limits
        self.logger = logger
    }
    /// The sockets' deadlines, one table per event loop.
    let timers = EventLoopTable<SocketTimers>()

    /// How long a socket waits for the client's answer to its close frame.
    static let closeGrace = TimeAmount.seconds(2)
}
