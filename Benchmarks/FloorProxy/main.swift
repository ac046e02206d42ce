// floor-proxy: the stack's floor for scripts/bench-proxy.sh. A minimal SwiftNIO reverse proxy
// with no authentication, built from the same packages as Portcullis, so every benchmark report
// separates what SwiftNIO itself costs from what the gateway adds. Not part of the product.
//
//   floor-proxy --listen PORT --upstream PORT [--codec nio|bytes] [--threads N]
//
// Each client connection gets one keep-alive upstream connection on its own event loop, and
// every forwarded request carries one added 200-byte header (the size of an upstream assertion).
//   --codec nio    NIOHTTP1's server and client codecs (typed parts through the pipeline)
//   --codec decoder NIO's request decoder on the client side, the rest framed as bytes (the
//                  gateway's data plane's shape)
//   --codec bytes  HTTP/1.1 framed over the raw bytes: the head is found and forwarded as one
//                  buffer, the response streamed back counting its Content-Length
//   --codec h2-answer  HTTP/2 (h2c) through swift-nio-http2's stream channels, each request
//                  answered by the floor itself (no upstream): HTTP/2's own cost in SwiftNIO
//   --codec h2-frames  HTTP/2 (h2c) through swift-nio-http2's connection handler alone, every
//                  stream's frames answered by one handler on the connection (no stream channels)
//   --codec h2-proxy   HTTP/2 (h2c) to HTTP/1.1 upstreams through swift-nio-http2's connection
//                  handler alone: the least a proxy on it can cost (see H2ProxyHandler)
// Requests with a body or a chunked response are outside what the floor measures: they get 501.
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOHTTP2
import NIOHTTP1
import NIOPosix

struct Options {
    var listen = 18405
    var upstream = 18401
    var codec = "bytes"
    var threads = 2

    init(_ arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let name = iterator.next() {
            let value = iterator.next() ?? ""
            switch name {
            case "--listen": listen = Int(value) ?? listen
            case "--upstream": upstream = Int(value) ?? upstream
            case "--codec": codec = value
            case "--threads": threads = Int(value) ?? threads
            default: print("floor-proxy: unknown option \(name)"); exit(2)
            }
        }
    }
}

let assertionHeaderName = "X-Floor-Assertion"
let assertionHeaderValue = String(repeating: "a", count: 200 - assertionHeaderName.count - 4)

/// Opens the keep-alive upstream connection for `client` on its event loop; `connected` runs
/// there with it, and a failed connection closes the client.
func connectUpstream(
    _ address: SocketAddress, for client: Channel, _ handlers: @escaping (ChannelPipeline.SynchronousOperations) throws -> Void,
    connected: @escaping (Channel) -> Void
) {
    ClientBootstrap(group: client.eventLoop)
        .channelOption(.tcpOption(.tcp_nodelay), value: 1)
        .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try handlers(channel.pipeline.syncOperations) } }
        .connect(to: address)
        .whenComplete { result in
            switch result {
            case .success(let channel): connected(channel)
            case .failure: client.close(promise: nil)
            }
        }
}

let options = Options(CommandLine.arguments)
let group = MultiThreadedEventLoopGroup(numberOfThreads: options.threads)
let upstream = try SocketAddress(ipAddress: "127.0.0.1", port: options.upstream)
let bootstrap = ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 1024)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            switch options.codec {
            case "nio":
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                try channel.pipeline.syncOperations.addHandler(CodecProxyHandler(upstream: upstream))
            case "h2-answer":
                try H2AnswerHandler.configure(channel)
            case "h2-frames":
                try H2FramesAnswerHandler.configure(channel)
            case "h2-proxy":
                try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server))
                try channel.pipeline.syncOperations.addHandler(H2ProxyHandler(upstream: upstream))
            case "decoder":
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
                try channel.pipeline.syncOperations.addHandler(DecoderProxyHandler(upstream: upstream))
            default:
                try channel.pipeline.syncOperations.addHandler(ByteProxyHandler(upstream: upstream))
            }
        }
    }
let server = try await bootstrap.bind(host: "127.0.0.1", port: options.listen).get()
print("floor-proxy (\(options.codec)) listening on 127.0.0.1:\(options.listen), upstream 127.0.0.1:\(options.upstream)")
try await server.closeFuture.get()
