import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import Synchronization

/// A WebSocket server for a route's upstream (Hummingbird's): it echoes every message, and keeps
/// the handshake's fields as it received them (names lower-cased), for the tests to read.
enum WebSocketEchoUpstream {
    final class Handshakes: Sendable {
        private let list = Mutex<[[String: String]]>([])
        func append(_ fields: [String: String]) { list.withLock { $0.append(fields) } }
        var all: [[String: String]] { list.withLock { $0 } }
    }

    static func start(recording handshakes: Handshakes) async throws -> BackgroundServer {
        let router = Router()
        router.get("/**") { _, _ in Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "plain"))) }
        return try await BackgroundServer.start { onPort in
            Application(
                router: router,
                server: .http1WebSocketUpgrade(configuration: .init(ws: .init(maxFrameSize: 1 << 20))) { request, _, _ in
                    var fields: [String: String] = [":path": request.path ?? ""]
                    for field in request.headerFields { fields[field.name.canonicalName] = field.value }
                    handshakes.append(fields)
                    return .upgrade([:]) { inbound, outbound, _ in
                        for try await message in inbound.messages(maxSize: 1 << 20) {
                            switch message {
                            case .text(let text): try await outbound.write(.text(text))
                            case .binary(let bytes): try await outbound.write(.binary(bytes))
                            }
                        }
                    }
                },
                configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.ws-upstream"))
        }
    }
}
