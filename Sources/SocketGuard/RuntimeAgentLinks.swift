import DataPlane
import EdgeHTTP
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import Observability
import RuntimeAPI
import RuntimeAccess

/// The gateway's agent links to the Runtime: one per event loop, each made
/// on first use (see `RuntimeAgentLink`).
package final class RuntimeAgentLinks: Sendable {
    let runtime: RuntimeClient
    let metrics: GatewayMetrics
    let logger: Logger
    let maximumMessageBytes: Int
    /// How long opening a link may take (TCP, TLS and the upgrade).
    let timeout: TimeAmount
    private let links = EventLoopTable<RuntimeAgentLink>()
    /// One warning per outage of the Runtime, not one per link that could not open.
    let failures: RecurringFailureLog
    private let tls = NIOLockedValueBox<NIOSSLContext?>(nil)

    package init(runtime: RuntimeClient, metrics: GatewayMetrics, logger: Logger, maximumMessageBytes: Int, timeout: Double) {
        self.runtime = runtime
        self.metrics = metrics
        self.logger = logger
        self.maximumMessageBytes = maximumMessageBytes
        self.timeout = .milliseconds(Int64(timeout * 1000))
        self.failures = RecurringFailureLog(logger: logger)
    }

    /// The link of `eventLoop`; call it on that loop.
    package func link(for eventLoop: any EventLoop) -> RuntimeAgentLink {
        links.value(for: eventLoop) { RuntimeAgentLink(eventLoop: eventLoop, links: self) }
    }

    /// Whether `eventLoop`'s link is open, or opens now (from any thread); see `RuntimeAgentLink.whenOpen()`.
    package func whenOpen(on eventLoop: any EventLoop) -> EventLoopFuture<Bool> {
        eventLoop.flatSubmit { self.link(for: eventLoop).whenOpen() }
    }

    /// The refusal of a socket (its upgrade, or the plain GET that asks about one) while no link can open.
    package static let unavailable = GatewayError.runtimeUnavailable("the Runtime behind the socket does not answer; try again in a moment")

    /// Opening a link, as `failures` names it.
    static let opening = RecurringFailureLog.Check(name: "agent link: opening the Runtime's agent link", meanwhile: "sockets are refused with 503 until it opens")

    /// Where and how to open a link now: the Runtime's address and a fresh assertion naming the gateway alone.
    struct Connection {
        let host: String
        let port: Int
        let hostHeader: String
        let tls: NIOSSLContext?
        let serverName: String?
        let assertion: String
    }

    func connection() throws -> Connection {
        guard let base = runtime.baseURL else { throw GatewayError.runtimeUnavailable("the Runtime is not listening yet; try again in a moment") }
        let secure = base.lowercased().hasPrefix("https://")
        guard let origin = UpstreamOrigin(url: secure ? "http://" + base.dropFirst("https://".count) : base) else {
            throw GatewayError.runtimeUnavailable("runtime.url is not an http or https URL")
        }
        let port = secure && !base.dropFirst("https://".count).prefix(while: { $0 != "/" }).contains(":") ? 443 : origin.port
        let context: NIOSSLContext?
        if secure {
            context = try tls.withLockedValue { tls in
                if let tls { return tls }
                let made = try NIOSSLContext(configuration: .makeClientConfiguration())
                tls = made
                return made
            }
        } else {
            context = nil
        }
        let assertion = try runtime.assertion(RuntimeCaller(userID: nil, tenantID: nil, sessionID: nil))
        return Connection(
            host: origin.host, port: port, hostHeader: origin.hostHeader, tls: context,
            serverName: origin.host.first?.isNumber == true || origin.host.contains(":") ? nil : origin.host, assertion: assertion)
    }
}
