import DataPlane
import EdgeHTTP
import NIOCore
import NIOHTTP1
import SocketGuard

/// Takes `Upgrade` off every request but a connection's first asking for the one upgrade
/// the gateway performs itself (a WebSocket on the agent socket's path), and has such a request's
/// answer close the connection. A connection's first request that is a WebSocket handshake on a
/// route's path is told to the data plane (`RouteUpgradeOffer`), which asks the route's upstream
/// for the upgrade and tunnels the connection after its 101.
///
/// NIO's typed upgrade handler drops the head of a request that asks for an upgrade no
/// upgrader takes (`Upgrade: h2c` on `/healthz`, a WebSocket to a proxied route): what
/// followed reached the router without it, and the connection closed unanswered. A server
/// may ignore `Upgrade` (RFC 9110 §7.8), so such a request is served as the plain HTTP/1.1
/// request it also is (a proxied one goes upstream without the upgrade, unless it is a route's
/// WebSocket handshake, above). NIO's parser reads nothing after a request that asks to upgrade, so
/// its answer carries `Connection: close`: requests pipelined behind it are not read, and the
/// client knows to send them again (RFC 9112 §9.6), rather than waiting for answers that
/// never come. The same for `Upgrade` on any later request (only the first may upgrade).
/// It sits between NIO's decoder and the upgrade handler, and leaves with the decoder when
/// the connection becomes a WebSocket.
final class UpgradeOfferScreen: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    /// Whether a head has gone by: only the first request may upgrade.
    private var seenFirstHead = false
    /// The routes, which may take the agent socket's path on a route host; `nil` without routes.
    let dataPlane: DataPlane?
    /// Told when the first request asks for a WebSocket on a route: the data plane then asks the
    /// route's upstream for it (and tunnels the connection after its 101).
    let routeUpgrades: RouteUpgradeOffer?

    init(dataPlane: DataPlane?, routeUpgrades: RouteUpgradeOffer? = nil) {
        self.dataPlane = dataPlane
        self.routeUpgrades = routeUpgrades
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        let mayUpgrade = !seenFirstHead
        seenFirstHead = true
        guard head.headers.contains(name: "upgrade"), !(mayUpgrade && Self.asksForAgentSocket(head, dataPlane: dataPlane)) else { return context.fireChannelRead(data) }
        if mayUpgrade, let routeUpgrades, Self.asksForRouteWebSocket(head, dataPlane: dataPlane) { routeUpgrades.offer() }
        Self.closeInsteadOfUpgrading(&head)
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    /// `head` without `Upgrade`, without the fields its `Connection` lists (hop-by-hop, such as
    /// `HTTP2-Settings`), and with `Connection: close` alone: the one spelling of "close after
    /// this answer" every handler behind reads alike.
    ///
    /// The framing and routing fields stay whatever `Connection` lists: NIO's decoder has read the
    /// body by them already, and a head without them would go upstream unframed while its body
    /// still follows (a second request smuggled in it). They never cross the proxy as they came.
    static func closeInsteadOfUpgrading(_ head: inout HTTPRequestHead) {
        var listed: Set<String> = []
        for value in head.headers["connection"] { HeaderScreen.insertListed(value[...].utf8, into: &listed) }
        for name in listed.subtracting(Self.keptWhenListed) { head.headers.remove(name: name) }
        head.headers.remove(name: "upgrade")
        head.headers.replaceOrAdd(name: "Connection", value: "close")
    }

    /// Fields never removed for being listed in `Connection`.
    static let keptWhenListed: Set<String> = ["content-length", "transfer-encoding", "host"]

    /// A WebSocket's opening handshake (RFC 6455 §4.1: HTTP/1.1 `GET`, `Upgrade` listing
    /// `websocket`, `Connection` listing `upgrade`, one `Sec-WebSocket-Key`, `Sec-WebSocket-Version:
    /// 13`, no body) for a path a route serves. Anything less is no handshake, and no tunnel.
    static func asksForRouteWebSocket(_ head: HTTPRequestHead, dataPlane: DataPlane?) -> Bool {
        guard let dataPlane, head.method == .GET, head.version == .http1_1,
            head.headers["upgrade"].contains(where: { HeaderScreen.listsToken($0[...].utf8, "websocket") }),
            head.headers["connection"].contains(where: { HeaderScreen.listsToken($0[...].utf8, "upgrade") }),
            head.headers["sec-websocket-key"].count == 1, head.headers["sec-websocket-version"] == ["13"],
            !head.headers.contains(name: "transfer-encoding"), !head.headers["content-length"].contains(where: { $0 != "0" })
        else { return false }
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard case .route = dataPlane.table.current.match(host: head.headers.first(name: "host"), path: path) else { return false }
        return true
    }

    /// The agent socket's path (query aside) on a host where it is the gateway's, with `websocket`
    /// among the protocols asked for.
    static func asksForAgentSocket(_ head: HTTPRequestHead, dataPlane: DataPlane?) -> Bool {
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard path == WebSocketGuard.path, AgentUpgradeChannel.isGatewayPath(WebSocketGuard.path, host: head.headers.first(name: "host"), dataPlane: dataPlane)
        else { return false }
        return head.headers["upgrade"].contains { HeaderScreen.listsToken($0[...].utf8, "websocket") }
    }
}
