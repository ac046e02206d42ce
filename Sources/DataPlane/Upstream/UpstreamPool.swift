import EdgeHTTP
import NIOCore
import NIOPosix
import NIOSSL

/// Where a `gateway.routes` upstream is: host and port, whether it speaks TLS, and the path its URL starts with.
package struct UpstreamOrigin: Hashable, Sendable {
    package let host: String
    package let port: Int
    let basePath: String
    /// `https://`: the connection is TLS, its certificate verified for `host`.
    let usesTLS: Bool
    /// HTTP/1.1 (pooled connections) or HTTP/2 (streams on one connection): the route's `protocol`.
    package var transport: UpstreamProtocol = .http1

    /// `http://host[:port][/base]` or `https://...`; `nil` for anything else.
    package init?(url: String) {
        let lowered = url.lowercased()
        if lowered.hasPrefix("http://") {
            usesTLS = false
        } else if lowered.hasPrefix("https://") {
            usesTLS = true
        } else {
            return nil
        }
        let rest = url.dropFirst(usesTLS ? "https://".count : "http://".count)
        let authority = rest.prefix { $0 != "/" }
        var base = String(rest.dropFirst(authority.count))
        while base.hasSuffix("/") { base.removeLast() }
        let hostPart: Substring
        let portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            portPart = after.hasPrefix(":") ? after.dropFirst() : nil
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        } else {
            hostPart = authority
            portPart = nil
        }
        guard !hostPart.isEmpty else { return nil }
        // Characters of a host name or an IP address only, and of a path: what goes into the Host
        // header and the request target is checked here once, since the upstream codec does not look again.
        let bracketed = authority.hasPrefix("[")
        guard hostPart.utf8.allSatisfy({ Self.isHostByte($0, bracketed: bracketed) }), base.utf8.allSatisfy(Self.isPathByte) else { return nil }
        host = String(hostPart)
        if let portPart {
            guard let value = Int(portPart), (1...65_535).contains(value) else { return nil }
            port = value
        } else {
            port = usesTLS ? 443 : 80
        }
        basePath = base
        let name = bracketed ? "[\(host)]" : host
        hostHeader = port == (usesTLS ? 443 : 80) ? name : "\(name):\(port)"
    }

    /// The `Host` header for requests to it: the port only when it is not the scheme's, an IPv6 address in
    /// brackets. Made once: a computed one cost a Foundation string search on every proxied request.
    package let hostHeader: String

    /// A letter, digit, `-`, `.` or `_` of a host name; in brackets, the hex digits, `:` and `.` of an IPv6 address.
    static func isHostByte(_ byte: UInt8, bracketed: Bool) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "."):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "_"): return !bracketed
        case UInt8(ascii: ":"): return bracketed
        default: return false
        }
    }

    /// A visible ASCII character other than `?` and `#` (a base path has no query or fragment).
    static func isPathByte(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "?") && byte != UInt8(ascii: "#")
    }

    /// The address to connect to when the host is an IP address: no resolver and no
    /// Happy Eyeballs per connection, which cost a fifth of the gateway's CPU when HTTP/2's
    /// many streams per connection made it open upstream connections often.
    var literalAddress: SocketAddress? { try? SocketAddress(ipAddress: host, port: port) }

    /// The name TLS verifies the certificate for and sends as SNI; `nil` for an IP address
    /// (NIOSSL then checks the certificate against the address connected to).
    var serverHostname: String? {
        var address4 = in_addr()
        var address6 = in6_addr()
        if inet_pton(AF_INET, host, &address4) == 1 || inet_pton(AF_INET6, host, &address6) == 1 { return nil }
        return host
    }
}

extension ClientBootstrap {
    /// Connects to `origin`: straight to its address when it is an IP address, else through the resolver.
    func connect(_ origin: UpstreamOrigin) -> EventLoopFuture<any Channel> {
        if let address = origin.literalAddress { return connect(to: address) }
        return connect(host: origin.host, port: origin.port)
    }
}

/// Idle keep-alive connections to the upstreams, one pool per event loop.
///
/// Only its own event loop touches it: a request and the connection it uses
/// run on the loop of the client's connection, so no request pays a thread hop
/// or a lock. At most `maximumIdle` idle connections per upstream are kept: 256, since HTTP/2
/// clients put a hundred requests in flight on one connection, each on an upstream connection of its own.
final class UpstreamPool: @unchecked Sendable {  // loop-bound: every method checks it runs on `eventLoop`
    let eventLoop: any EventLoop
    let connectTimeout: TimeAmount
    let maximumIdle: Int
    /// For `https://` upstreams (`nil` when no route has one).
    let tls: NIOSSLContext?
    /// Per origin, a list object: taking a connection reads the dictionary and changes the list,
    /// never the dictionary (whose in-place modification allocates on every call).
    private var idle: [UpstreamOrigin: IdleConnections] = [:]

    private final class IdleConnections {
        var connections: [UpstreamConnection] = []
    }

    init(eventLoop: any EventLoop, tls: NIOSSLContext?, connectTimeout: TimeAmount = .seconds(2), maximumIdle: Int = 256) {
        self.eventLoop = eventLoop
        self.tls = tls
        self.connectTimeout = connectTimeout
        self.maximumIdle = maximumIdle
    }

    /// An idle connection to `origin` still open, if there is one (the common case: no closure, no future).
    func idleConnection(to origin: UpstreamOrigin) -> UpstreamConnection? {
        eventLoop.preconditionInEventLoop()
        guard let list = idle[origin] else { return nil }
        while let connection = list.connections.popLast() {
            if connection.channel.isActive { return connection }
        }
        return nil
    }

    /// An idle connection to `origin`, or a new one; `done` runs on the pool's event loop.
    func acquire(_ origin: UpstreamOrigin, _ done: @escaping (Result<UpstreamConnection, any Error>) -> Void) {
        if let connection = idleConnection(to: origin) { return done(.success(connection)) }
        let tls = origin.usesTLS ? self.tls : nil
        if origin.usesTLS && tls == nil { return done(.failure(ChannelError.inappropriateOperationForState)) }
        ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: origin.serverHostname))
                    }
                    // No HTTP codec: the exchange writes its request as bytes (HTTP1Bytes) and the handler
                    // frames the answer itself (UpstreamResponseParser).
                    try channel.pipeline.syncOperations.addHandler(UpstreamConnectionHandler())
                }
            }
            .connect(origin)
            .assumeIsolated()
            .whenComplete { result in
                done(result.flatMap { channel in
                    Result { UpstreamConnection(channel: channel, handler: try channel.pipeline.syncOperations.handler(type: UpstreamConnectionHandler.self)) }
                })
            }
    }

    /// Takes a connection back after a complete exchange; closes it if it cannot be reused.
    func release(_ connection: UpstreamConnection, to origin: UpstreamOrigin, reusable: Bool) {
        eventLoop.preconditionInEventLoop()
        connection.handler.delegate = nil
        guard reusable, connection.handler.isReusable, connection.channel.isActive, (idle[origin]?.connections.count ?? 0) < maximumIdle else {
            connection.channel.close(promise: nil)
            return
        }
        if let list = idle[origin] {
            list.connections.append(connection)
        } else {
            let list = IdleConnections()
            list.connections.append(connection)
            idle[origin] = list
        }
    }
}
