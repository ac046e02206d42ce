import Synchronization

/// Why the gateway is closing a live socket.
public struct SocketCloseRequest: Sendable, Equatable {
    /// WebSocket close code (1008 policy violation for session ends).
    public let code: UInt16
    public let reason: String
}

/// The open agent sockets of this gateway, by session.
///
/// Counts sockets per session for the contract, and delivers a close request
/// to every socket of a session when it is logged out or revoked.
public final class SocketRegistry: Sendable {
    private struct Entry {
        var sockets: [UInt64: AsyncStream<SocketCloseRequest>.Continuation] = [:]
    }

    private let state = Mutex<(next: UInt64, sessions: [String: Entry])>((0, [:]))

    public init() {}

    /// Registers a socket on `sessionID`; the stream yields once if the gateway closes it.
    func register(sessionID: String) -> (id: UInt64, closeRequests: AsyncStream<SocketCloseRequest>) {
        let (stream, continuation) = AsyncStream<SocketCloseRequest>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> UInt64 in
            state.next += 1
            state.sessions[sessionID, default: Entry()].sockets[state.next] = continuation
            return state.next
        }
        return (id, stream)
    }

    func unregister(sessionID: String, id: UInt64) {
        let continuation = state.withLock { state -> AsyncStream<SocketCloseRequest>.Continuation? in
            let removed = state.sessions[sessionID]?.sockets.removeValue(forKey: id)
            if state.sessions[sessionID]?.sockets.isEmpty == true { state.sessions[sessionID] = nil }
            return removed
        }
        continuation?.finish()
    }

    /// Open sockets on `sessionID`.
    public func count(sessionID: String) -> Int {
        state.withLock { $0.sessions[sessionID]?.sockets.count ?? 0 }
    }

    /// Open sockets in all.
    public var total: Int {
        state.withLock { $0.sessions.values.reduce(0) { $0 + $1.sockets.count } }
    }

    /// Asks every socket on `sessionID` to close with `code` and `reason`.
    public func close(sessionID: String, code: UInt16 = 1008, reason: String) {
        let continuations = state.withLock { Array(($0.sessions[sessionID]?.sockets ?? [:]).values) }
        for continuation in continuations { continuation.yield(SocketCloseRequest(code: code, reason: reason)) }
    }

    /// The sessions that have sockets open now.
    var sessionIDs: [String] { state.withLock { Array($0.sessions.keys) } }
}
