import NIOCore
import RuntimeAPI

/// One frame of the agent link: the gateway's agent sockets multiplexed over
/// a few long-lived WebSocket connections to the Runtime.
///
/// The gateway checks a socket's token, session and ownership once, at its
/// upgrade, and then opens a *stream* on a link that the Runtime admitted
/// with one assertion; every later frame names its stream. Each frame is one
/// binary WebSocket message:
///
///     kind (1 byte) | stream id (8 bytes, big endian) | payload
///
/// - `open` (gateway to Runtime): the payload names the session, user and
///   tenant the gateway verified, each a 2-byte length and UTF-8 bytes.
/// - `text`, `binary` (both ways): one agent message.
/// - `close` (both ways): a 2-byte close code, then a UTF-8 reason. The
///   stream is over for the side that sends it.
public enum AgentLinkFrame: Sendable, Equatable {
    case open(stream: UInt64, AgentStreamIdentity)
    case text(stream: UInt64, ByteBuffer)
    case binary(stream: UInt64, ByteBuffer)
    case close(stream: UInt64, code: UInt16, reason: String)

    /// The bytes a frame adds to the message it carries.
    public static let overhead = 9

    enum Kind: UInt8 {
        case open = 1, text = 2, binary = 3, close = 4
    }

    /// The stream the frame belongs to.
    public var stream: UInt64 {
        switch self {
        case .open(let stream, _), .text(let stream, _), .binary(let stream, _), .close(let stream, _, _): stream
        }
    }

    /// Writes the frame into `buffer` (one binary WebSocket message).
    public func write(into buffer: inout ByteBuffer) {
        switch self {
        case .open(let stream, let identity):
            buffer.writeInteger(Kind.open.rawValue)
            buffer.writeInteger(stream)
            for value in [identity.sessionID, identity.userID, identity.tenantID] {
                buffer.writeInteger(UInt16(truncatingIfNeeded: value.utf8.count))
                buffer.writeString(value)
            }
        case .text(let stream, var message):
            buffer.writeInteger(Kind.text.rawValue)
            buffer.writeInteger(stream)
            buffer.writeBuffer(&message)
        case .binary(let stream, var message):
            buffer.writeInteger(Kind.binary.rawValue)
            buffer.writeInteger(stream)
            buffer.writeBuffer(&message)
        case .close(let stream, let code, let reason):
            buffer.writeInteger(Kind.close.rawValue)
            buffer.writeInteger(stream)
            buffer.writeInteger(code)
            buffer.writeBytes(reason.utf8.prefix(123))
        }
    }

    /// The frame in a fresh buffer.
    public func buffer(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: Self.overhead + 64)
        write(into: &buffer)
        return buffer
    }

    /// Reads one frame from a whole binary message; the message's payload is a slice, not a copy.
    ///
    /// - Throws: `AgentLinkFrameError` when the message is not a frame.
    public init(reading message: ByteBuffer) throws(AgentLinkFrameError) {
        var message = message
        guard let rawKind = message.readInteger(as: UInt8.self), let kind = Kind(rawValue: rawKind) else {
            throw AgentLinkFrameError("the frame's kind is missing or unknown")
        }
        guard let stream = message.readInteger(as: UInt64.self) else { throw AgentLinkFrameError("the frame has no stream id") }
        switch kind {
        case .open:
            var values: [String] = []
            for _ in 0..<3 {
                guard let length = message.readInteger(as: UInt16.self), let value = message.readString(length: Int(length)), !value.isEmpty else {
                    throw AgentLinkFrameError("an open frame names a session, a user and a tenant")
                }
                values.append(value)
            }
            self = .open(stream: stream, AgentStreamIdentity(sessionID: values[0], userID: values[1], tenantID: values[2]))
        case .text:
            self = .text(stream: stream, message)
        case .binary:
            self = .binary(stream: stream, message)
        case .close:
            guard let code = message.readInteger(as: UInt16.self) else { throw AgentLinkFrameError("a close frame carries a close code") }
            self = .close(stream: stream, code: code, reason: message.readString(length: message.readableBytes) ?? "")
        }
    }
}

/// Who a link stream is for: the session the gateway verified and its owner.
public struct AgentStreamIdentity: Sendable, Equatable {
    public let sessionID: String
    public let userID: String
    public let tenantID: String

    public init(sessionID: String, userID: String, tenantID: String) {
        self.sessionID = sessionID
        self.userID = userID
        self.tenantID = tenantID
    }

    /// The caller the Runtime acts for on this stream.
    public var caller: RuntimeCaller { RuntimeCaller(userID: userID, tenantID: tenantID, sessionID: sessionID) }
}

/// A link message that is not an `AgentLinkFrame`.
public struct AgentLinkFrameError: Error, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
}
