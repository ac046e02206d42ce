import Foundation
import Hummingbird
import Logging
import NIOCore

/// An MCP server stand-in that answers every POST and GET with an event stream: one progress
/// notification every 100 ms, for a minute. With `?split=1` each event is written in two halves
/// 150 ms apart, so an end asked for between them must wait for the event's end.
enum EventStreamUpstream {
    static func start() async throws -> BackgroundServer {
        let router = Router()
        let handler: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            _ = try await request.body.collect(upTo: 1 << 20)
            let split = request.uri.queryParameters.get("split") == "1"
            return Response(
                status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
                body: ResponseBody { writer in
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
                })
        }
        router.post("/**", use: handler)
        router.get("/**", use: handler)
        router.post("/", use: handler)
        router.get("/", use: handler)
        return try await BackgroundServer.start { onPort in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.event-upstream"))
        }
    }
}
