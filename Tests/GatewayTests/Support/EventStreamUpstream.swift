import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdHTTP2
import Logging
import NIOCore
import Synchronization

/// An MCP server stand-in that answers every POST and GET with an event stream: one progress
/// notification every 100 ms, for a minute. With `?split=1` each event is written in two halves
/// 150 ms apart, so an end asked for between them must wait for the event's end.
///
/// A `notifications/cancelled` POST is answered 202 and recorded, with when a stream's client went
/// away (its write failed): what an MCP server sees of a cancellation. With `?encoded=1` the stream is
/// labelled `Content-Encoding: br` (its bytes stay plain: what a gateway must not add to is the label). With `http2` it speaks
/// HTTP/2 with prior knowledge (h2c), where the client going away is its stream reset.
enum EventStreamUpstream {
    /// What the stand-in saw of cancellations.
    final class Seen: Sendable {
        struct Cancellation: Sendable {
            let body: String
            let sessionID: String?
            let hasAssertion: Bool
            /// The `Authorization` it came with, if any (a connected token must not be on it once the connection ended).
            let authorization: String?
            let at: ContinuousClock.Instant
        }
        let state = Mutex<(cancellations: [Cancellation], closedStreams: [ContinuousClock.Instant], callAuthorizations: [String?])>(([], [], []))
        var cancellations: [Cancellation] { state.withLock { $0.cancellations } }
        /// The `Authorization` of each request answered with a stream, in order (`nil`: none came).
        var callAuthorizations: [String?] { state.withLock { $0.callAuthorizations } }
        var closedStreams: [ContinuousClock.Instant] { state.withLock { $0.closedStreams } }
    }

    static func start(seen: Seen = Seen(), http2: Bool = false) async throws -> BackgroundServer {
        let router = Router()
        let handler: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            let body = String(buffer: try await request.body.collect(upTo: 1 << 20))
            if body.contains("notifications/cancelled") {
                let cancellation = Seen.Cancellation(
                    body: body, sessionID: request.headers[HTTPField.Name("Mcp-Session-Id")!],
                    hasAssertion: request.headers[HTTPField.Name("X-Portcullis-Assertion")!] != nil, authorization: request.headers[.authorization], at: .now)
                seen.state.withLock { $0.cancellations.append(cancellation) }
                return Response(status: .accepted)
            }
            seen.state.withLock { $0.callAuthorizations.append(request.headers[.authorization]) }
            let split = request.uri.queryParameters.get("split") == "1"
            var headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-store"]
            if request.uri.queryParameters.get("encoded") == "1" { headers[.contentEncoding] = "br" }
            return Response(
                status: .ok, headers: headers,
                body: ResponseBody { writer in
                    do {
                        try await Self.events(&writer, split: split)
                    } catch {
                        seen.state.withLock { $0.closedStreams.append(.now) }
                        throw error
                    }
                })
        }
        router.post("/**", use: handler)
        router.get("/**", use: handler)
        router.post("/", use: handler)
        router.get("/", use: handler)
        return try await BackgroundServer.start { onPort in
            Application(
                router: router, server: http2 ? .plaintextHTTP2() : .http1(), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.event-upstream"))
        }
    }

    static func events(_ writer: inout any ResponseBodyWriter, split: Bool) async throws {
                    for number in 1...600 {
                        let event = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":\(number)}}\n\n"
                        if split {
                            let bytes = Array(event.utf8)
                            try await writer.write(ByteBuffer(bytes: bytes[0..<30]))
                            try await Task.sleep(for: .milliseconds(150))
                            try await writer.write(ByteBuffer(bytes: bytes[30...]))
                        } else {
                            try await writer.write(ByteBuffer(string: event))
                        }
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    try await writer.finish(nil)
    }
}
