import AgentLink
import HummingbirdWebSocket
import JOSE
import NIOCore
import RuntimeAPI
import Synchronization

/// The Runtime's side of one agent link: the streams the gateway opened on it
/// and the agent channel each one speaks to.
///
/// Messages of one stream are answered in order, one at a time; streams run
/// side by side. A stream with nothing waiting costs a dictionary entry: no
/// task, no buffer. The session is not read when a stream opens (the gateway
/// checked it at the upgrade); every intent checks it again, and an intent on
/// an ended session closes the stream with 1008.
final class AgentLinkStreams: Sendable {
    private struct Stream {
        /// Whom the stream acts for. The execution service is the link's, not copied into every
        /// stream's entry: with it, an entry was about 650 bytes of every idle agent socket.
        let sessionID: String
        let caller: RuntimeCaller
        var waiting: [ByteBuffer] = []
        /// A drainer is answering this stream's messages.
        var busy = false
    }

    /// Messages a stream may have waiting before it is closed (the gateway rate-limits each socket well below this).
    static let maximumWaiting = 256

    let executions: ExecutionService
    let outbound: WebSocketOutboundWriter
    private let streams = Mutex<[UInt64: Stream]>([:])

    init(executions: ExecutionService, outbound: WebSocketOutboundWriter) {
        self.executions = executions
        self.outbound = outbound
    }

    /// What the caller must do after `receive`: start a drainer for a stream, or nothing.
    enum Next {
        case drain(UInt64)
        case none
    }

    /// Applies one link message; a stream that now has work and no drainer needs one started.
    func receive(_ message: ByteBuffer) async -> Next {
        let frame: AgentLinkFrame
        do {
            frame = try AgentLinkFrame(reading: message)
        } catch {
            // Not a frame: nothing can be answered on a stream; the link stays up.
            return .none
        }
        switch frame {
        case .open(let id, let identity):
            streams.withLock { $0[id] = Stream(sessionID: identity.sessionID, caller: identity.caller) }
            return .none
        case .text(let id, let text):
            enum Outcome { case drain, none, unknown, overflow }
            let outcome = streams.withLock { streams -> Outcome in
                guard var stream = streams[id] else { return .unknown }
                guard stream.waiting.count < Self.maximumWaiting else {
                    streams[id] = nil
                    return .overflow
                }
                stream.waiting.append(text)
                defer { stream.busy = true; streams[id] = stream }
                return stream.busy ? .none : .drain
            }
            switch outcome {
            case .drain: return .drain(id)
            case .none: return .none
            case .unknown: await send(.close(stream: id, code: 1008, reason: "no such stream"))
            case .overflow: await send(.close(stream: id, code: 1008, reason: "too many messages waiting"))
            }
            return .none
        case .binary(let id, _):
            guard streams.withLock({ $0[id] != nil }) else { return .none }
            await send(.text(stream: id, Self.buffer(AgentChannel.error("invalid_frame", "frames must be text (JSON)"))))
            return .none
        case .close(let id, _, _):
            _ = streams.withLock { $0.removeValue(forKey: id) }
            return .none
        }
    }

    /// Answers a stream's waiting messages in order until none is left.
    func drain(_ id: UInt64) async {
        while true {
            let next = streams.withLock { streams -> (AgentChannel, ByteBuffer)? in
                guard var stream = streams[id] else { return nil }
                guard !stream.waiting.isEmpty else {
                    stream.busy = false
                    streams[id] = stream
                    return nil
                }
                let message = stream.waiting.removeFirst()
                streams[id] = stream
                return (AgentChannel(executions: executions, sessionID: stream.sessionID, caller: stream.caller), message)
            }
            guard let (channel, message) = next else { return }
            switch await channel.handle(text: String(buffer: message)) {
            case .reply(let reply):
                await send(.text(stream: id, Self.buffer(reply)))
            case .replyAndClose(let reply):
                _ = streams.withLock { $0.removeValue(forKey: id) }
                await send(.text(stream: id, Self.buffer(reply)))
                await send(.close(stream: id, code: 1008, reason: "session ended"))
                return
            }
        }
    }

    private func send(_ frame: AgentLinkFrame) async {
        try? await outbound.write(.binary(frame.buffer()))
    }

    static func buffer(_ value: JSONValue) -> ByteBuffer {
        ByteBuffer(bytes: JSONWriter.bytes(value))
    }
}
