import JOSE
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Fetches a Client ID Metadata Document and makes the client it describes.
///
/// What it holds to, each refusal a page that says what to fix: the host and port on
/// `client_metadata_hosts` (443 unless an entry names another); `https` only, the certificate
/// verified for the host; the addresses checked before connecting and the connection made to a
/// checked one (a name that resolves elsewhere a moment later is never asked); no redirect
/// followed; 5 KiB at most; 3 seconds for the whole fetch; the document's `client_id` exactly its
/// URL. Documents are kept per instance as `Cache-Control` says (`max-age`, `no-store`), within a
/// day, 5 minutes without it.
///
/// A fetch that fails before an answer (no name, a closed or a filtered port, a TLS failure, too
/// slow) says only that the document could not be fetched, and says it when the 3 seconds are
/// up: its text and its time do not tell a port that refused from one that never answered.
/// Names are resolved on threads of their own, at most `resolverThreads` at once and half of them
/// for names under one domain, so slow names of one zone cannot hold up everybody else's.
public final class ClientMetadataFetcher: Sendable {
    let hosts: ClientMetadataHosts
    let tls: NIOSSLContext
    let group: any EventLoopGroup
    public static let maximumBytes = 5 * 1_024
    public static let timeout: TimeAmount = .seconds(3)
    static let maximumCacheSeconds: Double = 86_400
    static let defaultCacheSeconds: Double = 300
    private let cache = Mutex<[String: (client: RegisteredClient, until: Double)]>([:])
    /// Name resolution's own threads: a name that never answers holds one of these, never a thread
    /// another part of the gateway needs (scrypt's, say).
    private let resolver: NIOThreadPool
    /// Fetches in flight, at most `maximumFetches`: beyond it a fetch is refused at once.
    private let inFlight = Atomic<Int>(0)
    public static let maximumFetches = 16
    /// Name lookups that have not returned (even where the fetch gave up on them), by domain.
    private let lookups = Mutex(ResolverSlots())
    static let resolverThreads = 4

    public init(hosts: ClientMetadataHosts, tls: NIOSSLContext, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.hosts = hosts
        self.tls = tls
        self.group = group
        resolver = NIOThreadPool(numberOfThreads: Self.resolverThreads)
        resolver.start()
    }

    typealias Refusal = UnredirectableAuthorizationError

    /// The client `url` describes.
    public func client(_ url: ClientMetadataURL, now: Double) async throws(UnredirectableAuthorizationError) -> RegisteredClient {
        let admission = hosts.admission(of: url.host, port: url.port)
        guard admission != .refused else {
            if url.port != 443, hosts.admission(of: url.host) != .refused {
                throw Refusal(
                    "client_metadata_host_refused",
                    "the client's metadata is on port \(url.port) of \(url.host), and this gateway fetches on 443 only unless authorization_server.client_metadata_hosts names the port (\(url.host):\(url.port))")
            }
            throw Refusal(
                "client_metadata_host_refused",
                "the client's metadata is at \(url.host), which is not on this gateway's list (authorization_server.client_metadata_hosts); its operator adds the host to use the client")
        }
        if let cached = cache.withLock({ $0[url.url] }), cached.until > now { return cached.client }
        guard inFlight.wrappingAdd(1, ordering: .relaxed).newValue <= Self.maximumFetches else {
            inFlight.wrappingSubtract(1, ordering: .relaxed)
            throw Refusal("client_metadata_busy", "too many client metadata documents are being fetched right now; try again in a few seconds")
        }
        defer { inFlight.wrappingSubtract(1, ordering: .relaxed) }
        let addresses = try await resolve(url)
        if admission == .publicOnly, addresses.contains(where: { !Self.isPublic($0) }) {
            // The address is not named: the refusal must not tell a stranger what an internal name resolves to.
            throw Refusal(
                "client_metadata_address_refused",
                "\(url.host) resolves to an address inside a private, loopback or link-local network; only a host the list names exactly may be fetched there")
        }
        guard let address = addresses.first else { throw Self.unreachable(url) }
        let answer = try await fetch(url, from: address)
        let (client, seconds) = try Self.client(from: answer, url: url)
        if seconds > 0 {
            cache.withLock { cache in
                if cache.count >= 1_000 { cache = cache.filter { $0.value.until > now } }
                if cache.count < 1_000 { cache[url.url] = (client, now + seconds) }
            }
        }
        return client
    }

    /// A fetched answer: its status, `Cache-Control` and body.
    struct Answer {
        var status: Int = 0
        var cacheControl: String?
        var contentType: String?
        var body: [UInt8] = []
    }

    static func client(from answer: Answer, url: ClientMetadataURL) throws(UnredirectableAuthorizationError) -> (RegisteredClient, Double) {
        guard answer.status == 200 else {
            let why = (300..<400).contains(answer.status) ? "a redirect, which is not followed: the document must be at the client_id itself" : "HTTP \(answer.status)"
            throw Refusal("client_metadata_unavailable", "the client's metadata document at \(url.url) answered \(why)")
        }
        let document: JSONObject
        do { document = try StrictJSONReader().parseObject(answer.body) } catch {
            throw Refusal("client_metadata_invalid", "the client's metadata document is not one strict JSON object: \(error.message)")
        }
        guard document["client_id"]?.stringValue == url.url else {
            throw Refusal("client_metadata_id_mismatch", "the client's metadata document names another client_id than its own URL; they must be equal")
        }
        if let method = document["token_endpoint_auth_method"], method.stringValue != "none" {
            throw Refusal("client_metadata_invalid", "the client's metadata asks for a token_endpoint_auth_method other than none; this gateway takes public clients only")
        }
        let registration: ClientRegistration
        do { registration = try ClientRegistration(document) } catch {
            throw Refusal("client_metadata_invalid", "the client's metadata document cannot be used: \(error.description)")
        }
        let client = RegisteredClient(
            clientID: url.url, name: document["client_name"]?.stringValue == nil ? url.host : registration.name, redirectURIs: registration.redirectURIs,
            source: .metadataDocument, metadataHost: url.host)
        return (client, cacheSeconds(answer.cacheControl))
    }

    /// How long `Cache-Control` lets the document be kept, within a day (5 minutes when it says nothing).
    static func cacheSeconds(_ cacheControl: String?) -> Double {
        guard let cacheControl = cacheControl?.lowercased() else { return defaultCacheSeconds }
        let directives = cacheControl.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if directives.contains(where: { $0 == "no-store" || $0 == "no-cache" }) { return 0 }
        if let maxAge = directives.first(where: { $0.hasPrefix("max-age=") }).flatMap({ Double($0.dropFirst(8)) }), maxAge >= 0 {
            return min(maxAge, maximumCacheSeconds)
        }
        return defaultCacheSeconds
    }

    /// The refusal of every fetch that got no answer: the same words whatever went wrong.
    static func unreachable(_ url: ClientMetadataURL) -> Refusal {
        Refusal("client_metadata_unreachable", "the client's metadata document at \(url.host) could not be fetched; check the client's metadata URL")
    }

    /// The addresses of `url`'s host (an IPv4 literal stands for itself), resolved on the resolver's
    /// own threads within `timeout`.
    ///
    /// - Throws: `client_metadata_busy` at once when the lookups that have not returned fill the
    ///   resolver's threads, or half of them are for names under the host's domain.
    func resolve(_ url: ClientMetadataURL) async throws(UnredirectableAuthorizationError) -> [SocketAddress] {
        if ClientMetadataHosts.isIPv4(url.host), let address = try? SocketAddress(ipAddress: url.host, port: url.port) { return [address] }
        let (host, port) = (url.host, url.port)
        let domain = ResolverSlots.domain(of: host)
        guard self.lookups.withLock({ $0.take(domain, threads: Self.resolverThreads) }) else {
            throw Refusal("client_metadata_busy", "too many client metadata hosts are being looked up right now; try again in a few seconds")
        }
        // The lookup cannot be stopped once begun: the fetch stops waiting for it after 3 seconds,
        // and its slot is given back only when it returns.
        let eventLoop = group.next()
        let promise = eventLoop.makePromise(of: [SocketAddress].self)
        let deadline = eventLoop.scheduleTask(in: .seconds(3)) { promise.fail(FetchTimedOut()) }
        resolver.runIfActive(eventLoop: eventLoop) { try Self.getaddrinfo(host, port: port) }.whenComplete { result in
            self.lookups.withLock { $0.give(domain) }
            deadline.cancel()
            promise.completeWith(result)
        }
        do {
            return try await promise.futureResult.get()
        } catch {
            throw Self.unreachable(url)
        }
    }

    static func getaddrinfo(_ host: String, port: Int) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard Glibc.getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { throw ResolutionFailed() }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            if let raw = current.pointee.ai_addr {
                switch Int32(raw.pointee.sa_family) {
                case AF_INET:
                    addresses.append(raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee, host: host) })
                case AF_INET6:
                    addresses.append(raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee, host: host) })
                default: break
                }
            }
            entry = current.pointee.ai_next
        }
        return addresses
    }

    struct ResolutionFailed: Error {}

    /// Whether an address is on the public internet: not loopback, private (RFC 1918, unique
    /// local), link-local, site-local, shared (100.64/10), unspecified, multicast, IPv4-mapped or
    /// -compatible, or local-use NAT64.
    public static func isPublic(_ address: SocketAddress) -> Bool {
        switch address {
        case .v4(let v4):
            let value = UInt32(bigEndian: v4.address.sin_addr.s_addr)
            return isPublicIPv4(UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF))
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            if bytes.allSatisfy({ $0 == 0 }) || bytes == [UInt8](repeating: 0, count: 15) + [1] { return false }
            if bytes[0] & 0xFE == 0xFC { return false }  // fc00::/7
            if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 { return false }  // fe80::/10
            if bytes[0] == 0xFF { return false }
            if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0xC0 { return false }  // fec0::/10, site-local
            // IPv4-mapped (::ffff:0:0/96) and IPv4-compatible (::/96) addresses are no address a
            // public name has: a name that resolves to one is not fetched from, whatever it carries.
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && (bytes[10..<12].allSatisfy({ $0 == 0xFF }) || bytes[10..<12].allSatisfy({ $0 == 0 })) { return false }
            // SIIT's ::ffff:0:0:0/96, the discard prefix 100::/64, documentation 2001:db8::/32.
            if bytes[0..<8].allSatisfy({ $0 == 0 }) && bytes[8] == 0xFF && bytes[9] == 0xFF && bytes[10] == 0 && bytes[11] == 0 { return false }
            if bytes[0] == 0x01 && bytes[1..<8].allSatisfy({ $0 == 0 }) { return false }
            if bytes[0..<4] == [0x20, 0x01, 0x0D, 0xB8] { return false }
            // Local-use NAT64 (64:ff9b:1::/48, RFC 8215) translates into a network of its own.
            if bytes[0..<6] == [0x00, 0x64, 0xFF, 0x9B, 0x00, 0x01] { return false }
            // The well-known NAT64 prefix (64:ff9b::/96) and 6to4 (2002::/16) are judged as the IPv4 address they carry.
            if bytes[0..<12] == [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] { return isPublicIPv4(bytes[12], bytes[13], bytes[14]) }
            if bytes[0] == 0x20 && bytes[1] == 0x02 { return isPublicIPv4(bytes[2], bytes[3], bytes[4]) }
            // Teredo (2001::/32) hides its IPv4 address: never fetched from.
            if bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0 && bytes[3] == 0 { return false }
            return true
        default:
            return false
        }
    }

    /// Whether the IPv4 address `a.b.c.x` is public: not this network (0/8), private (10/8, 172.16/12,
    /// 192.168/16), shared (100.64/10), loopback (127/8), link-local (169.254/16), IETF protocol
    /// assignments (192.0.0/24), benchmarking (198.18/15), documentation (192.0.2/24, 198.51.100/24,
    /// 203.0.113/24), multicast or reserved (224/3).
    static func isPublicIPv4(_ a: UInt8, _ b: UInt8, _ c: UInt8) -> Bool {
        if a == 0 || a == 10 || a == 127 || a >= 224 { return false }
        if a == 169 && b == 254 { return false }
        if a == 172 && (16...31).contains(b) { return false }
        if a == 192 && b == 168 { return false }
        if a == 192 && b == 0 && c == 0 { return false }
        if a == 198 && (b == 18 || b == 19) { return false }
        if a == 100 && (64...127).contains(b) { return false }
        // Documentation (TEST-NET-1, -2, -3).
        if (a == 192 && b == 0 && c == 2) || (a == 198 && b == 51 && c == 100) || (a == 203 && b == 0 && c == 113) { return false }
        return true
    }

    /// One GET over TLS to `address`, verified for the URL's host, within `timeout` and `maximumBytes`.
    func fetch(_ url: ClientMetadataURL, from address: SocketAddress) async throws(UnredirectableAuthorizationError) -> Answer {
        let started = ContinuousClock.now
        let promise = group.next().makePromise(of: Answer.self)
        let (tls, host) = (self.tls, url.host)
        let sni: String? = ClientMetadataHosts.isIPv4(host) ? nil : host
        let bootstrap = ClientBootstrap(group: promise.futureResult.eventLoop)
            .connectTimeout(Self.timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: sni))
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(MetadataAnswerHandler(promise: promise, maximumBytes: Self.maximumBytes))
                }
            }
        let eventLoop = promise.futureResult.eventLoop
        let deadline = eventLoop.scheduleTask(in: Self.timeout) { promise.fail(FetchTimedOut()) }
        bootstrap.connect(to: address).whenComplete { result in
            switch result {
            case .success(let channel):
                var headers = HTTPHeaders()
                headers.add(name: "Host", value: url.port == 443 ? host : "\(host):\(url.port)")
                headers.add(name: "Accept", value: "application/json")
                headers.add(name: "User-Agent", value: "portcullis")
                headers.add(name: "Connection", value: "close")
                channel.write(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: url.target, headers: headers)), promise: nil)
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                promise.futureResult.whenComplete { _ in channel.close(promise: nil) }
            case .failure(let error):
                promise.fail(error)
            }
        }
        do {
            let answer = try await promise.futureResult.get()
            deadline.cancel()
            return answer
        } catch is TooLarge {
            deadline.cancel()
            throw Refusal("client_metadata_too_large", "the client's metadata document is over 5 KiB")
        } catch {
            // A refused connection, a TLS failure or a silence: one answer, when the time is up.
            deadline.cancel()
            try? await Task.sleep(until: started + .seconds(Self.timeout.nanoseconds / 1_000_000_000), clock: .continuous)
            throw Self.unreachable(url)
        }
    }

    struct FetchTimedOut: Error {}
    struct TooLarge: Error {}
}

/// Name lookups that have not returned, by domain: the resolver's threads are shared out so that
/// one zone's slow names hold at most half of them.
package struct ResolverSlots {
    var byDomain: [String: Int] = [:]
    var total = 0

    package init() {}

    /// The last two labels of `host` (`example.com` for `a.b.example.com`): the zone a slow answer
    /// most likely comes from.
    package static func domain(of host: String) -> String {
        host.split(separator: ".").suffix(2).joined(separator: ".")
    }

    /// Takes a slot for a lookup under `domain`, unless all `threads` are taken or half are `domain`'s.
    package mutating func take(_ domain: String, threads: Int) -> Bool {
        guard total < threads, byDomain[domain, default: 0] < max(1, threads / 2) else { return false }
        total += 1
        byDomain[domain, default: 0] += 1
        return true
    }

    package mutating func give(_ domain: String) {
        total -= 1
        byDomain[domain, default: 1] -= 1
        if byDomain[domain] == 0 { byDomain[domain] = nil }
    }
}

/// Reads one answer into `Answer`, failing past `maximumBytes` of body.
final class MetadataAnswerHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart
    let promise: EventLoopPromise<ClientMetadataFetcher.Answer>
    let maximumBytes: Int
    var answer = ClientMetadataFetcher.Answer()

    init(promise: EventLoopPromise<ClientMetadataFetcher.Answer>, maximumBytes: Int) {
        self.promise = promise
        self.maximumBytes = maximumBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            answer.status = Int(head.status.code)
            answer.cacheControl = head.headers.first(name: "cache-control")
            answer.contentType = head.headers.first(name: "content-type")
            if let length = head.headers.first(name: "content-length").flatMap(Int.init), length > maximumBytes {
                promise.fail(ClientMetadataFetcher.TooLarge())
            }
        case .body(var buffer):
            guard answer.body.count + buffer.readableBytes <= maximumBytes else { return promise.fail(ClientMetadataFetcher.TooLarge()) }
            answer.body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            promise.succeed(answer)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ChannelError.eof)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }
}
