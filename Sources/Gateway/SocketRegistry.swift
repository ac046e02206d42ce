import Synchronization

/// Why the gateway is closing a live socket.
public struct SocketCloseRequest: Sendable, Equatable {
    /// WebSocket close code (1008 policy violation for session ends).
    public let code: UInt16
    public let reason: String
}

/// One registered socket: its place in the registry and the close requests addressed to it.
struct SocketRegistration: Sendable {
    let id: UInt64
    let sessionID: String
    /// Yields the first close request only (a later one never replaces the first reason).
    let closeRequests: AsyncStream<SocketCloseRequest>
}

/// The open agent sockets of this gateway, by session.
///
/// Enforces the contract's sockets per session at registration (count and
/// insert are one step under one lock, so racing upgrades cannot exceed it),
/// and delivers a close request to every socket of a session or an account
/// when it is logged out, revoked or disabled.
public final class SocketRegistry: Sendable {
    private struct Entry {
        var userID: String
        var tenantID: String
        var sockets: [UInt64: AsyncStream<SocketCloseRequest>.Continuation] = [:]
    }

    private let state = Mutex<(next: UInt64, sessions: [String: Entry])>((0, [:]))

    public init() {}

    /// Registers a socket of `userID`/`tenantID` on `sessionID` if the session has
    /// fewer than `limit` open; `nil` (nothing registered) when it has `limit` already.
    func register(sessionID: String, userID: String, tenantID: String, limit: Int) -> SocketRegistration? {
        let (stream, continuation) = AsyncStream<SocketCloseRequest>.makeStream(bufferingPolicy: .bufferingOldest(1))
        let id = state.withLock { state -> UInt64? in
            var entry = state.sessions[sessionID] ?? Entry(userID: userID, tenantID: tenantID)
            guard entry.sockets.count < limit else { return nil }
            state.next += 1
            entry.sockets[state.next] = continuation
            state.sessions[sessionID] = entry
            return state.next
        }
        guard let id else {
            continuation.finish()
            return nil
        }
        return SocketRegistration(id: id, sessionID: sessionID, closeRequests: stream)
    }

    /// Removes a socket; removing one twice is harmless.
    func unregister(_ registration: SocketRegistration) {
        let continuation = state.withLock { state -> AsyncStream<SocketCloseRequest>.Continuation? in
            let removed = state.sessions[registration.sessionID]?.sockets.removeValue(forKey: registration.id)
            if state.sessions[registration.sessionID]?.sockets.isEmpty == true { state.sessions[registration.sessionID] = nil }
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

    /// Asks every socket of an account (all its sessions) to close.
    public func close(userID: String, tenantID: String, code: UInt16 = 1008, reason: String) {
        let continuations = state.withLock { state in
            state.sessions.values.filter { $0.userID == userID && $0.tenantID == tenantID }.flatMap { Array($0.sockets.values) }
        }
        for continuation in continuations { continuation.yield(SocketCloseRequest(code: code, reason: reason)) }
    }

    /// The sessions that have sockets open now.
    var sessionIDs: [String] { state.withLock { Array($0.sessions.keys) } }
}
