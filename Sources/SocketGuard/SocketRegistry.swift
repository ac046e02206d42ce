import DataPlane
import NIOCore
import Synchronization

/// Why the gateway is closing a live socket.
public struct SocketCloseRequest: Sendable, Equatable {
    /// WebSocket close code (1008 policy violation for session ends).
    public let code: UInt16
    public let reason: String
}

/// One registered socket: its place in the registry and where close requests for it go.
package struct SocketRegistration: Sendable {
    let id: UInt64
    let sessionID: String
    let target: SocketCloseTarget
}

/// Where the registry delivers a close request for one socket.
///
/// A socket is registered at admission, before its 101 and before the
/// handler that serves it exists; a request that arrives in between is kept
/// and delivered when the handler attaches. Only the first request counts (a
/// later one never replaces the first reason).
package final class SocketCloseTarget: Sendable {
    typealias Delivery = @Sendable (SocketCloseRequest) -> Void

    private enum State {
        case waiting(SocketCloseRequest?)
        case attached(any EventLoop, Delivery)
        case delivered
    }

    private let state = Mutex(State.waiting(nil))

    /// Takes a request: where and how to deliver it now, or `nil` (kept for later, or dropped as a second request).
    func take(_ request: SocketCloseRequest) -> (any EventLoop, Delivery)? {
        state.withLock { state -> (any EventLoop, Delivery)? in
            switch state {
            case .waiting(nil):
                state = .waiting(request)
                return nil
            case .attached(let eventLoop, let deliver):
                state = .delivered
                return (eventLoop, deliver)
            case .waiting, .delivered:
                return nil
            }
        }
    }

    /// Routes requests to `deliver`, run on `eventLoop`, from now on; one that came earlier is delivered at once
    /// (call this on `eventLoop`).
    func attach(on eventLoop: any EventLoop, _ deliver: @escaping Delivery) {
        let early = state.withLock { state -> SocketCloseRequest? in
            guard case .waiting(let early) = state else { return nil }
            state = early == nil ? .attached(eventLoop, deliver) : .delivered
            return early
        }
        if let early { deliver(early) }
    }

    /// The socket is gone: nothing more is delivered (and the closure is released).
    func detach() {
        state.withLock { $0 = .delivered }
    }

    /// Delivers `request` to every target, one task per event loop for all of that loop's sockets
    /// (a logout of a session with 20,000 sockets wakes each loop once, not 20,000 times).
    static func deliver<Targets: Sequence>(_ request: SocketCloseRequest, to targets: Targets) where Targets.Element == SocketCloseTarget {
        var byLoop: [ObjectIdentifier: (eventLoop: any EventLoop, deliveries: [Delivery])] = [:]
        for target in targets {
            guard let (eventLoop, deliver) = target.take(request) else { continue }
            byLoop[ObjectIdentifier(eventLoop), default: (eventLoop, [])].deliveries.append(deliver)
        }
        for (eventLoop, deliveries) in byLoop.values {
            eventLoop.execute { for deliver in deliveries { deliver(request) } }
        }
    }
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
        var sockets: [UInt64: SocketCloseTarget] = [:]

        /// Adds a socket unless `limit` are open; in place, so the session's table is never copied.
        mutating func insert(_ target: SocketCloseTarget, id: UInt64, limit: Int) -> Bool {
            guard sockets.count < limit else { return false }
            sockets[id] = target
            return true
        }
    }

    private let state = Mutex<(next: UInt64, sessions: [String: Entry])>((0, [:]))
    /// The WebSocket tunnels to routes: every close below reaches them too.
    let tunnels: TunnelRegistry?

    public init() { tunnels = nil }

    /// A registry whose closes also close the tunnels of the same session or account.
    package init(tunnels: TunnelRegistry) { self.tunnels = tunnels }

    /// Registers a socket of `userID`/`tenantID` on `sessionID` if the session has
    /// fewer than `limit` open; `nil` (nothing registered) when it has `limit` already.
    func register(sessionID: String, userID: String, tenantID: String, limit: Int) -> SocketRegistration? {
        let target = SocketCloseTarget()
        let id = state.withLock { state -> UInt64? in
            let id = state.next + 1
            guard state.sessions[sessionID, default: Entry(userID: userID, tenantID: tenantID)].insert(target, id: id, limit: limit) else {
                return nil
            }
            state.next = id
            return id
        }
        guard let id else { return nil }
        return SocketRegistration(id: id, sessionID: sessionID, target: target)
    }

    /// Removes a socket; removing one twice is harmless.
    package func unregister(_ registration: SocketRegistration) {
        state.withLock { state in
            state.sessions[registration.sessionID]?.sockets.removeValue(forKey: registration.id)
            if state.sessions[registration.sessionID]?.sockets.isEmpty == true { state.sessions[registration.sessionID] = nil }
        }
        registration.target.detach()
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
        let targets = state.withLock { Array(($0.sessions[sessionID]?.sockets ?? [:]).values) }
        SocketCloseTarget.deliver(SocketCloseRequest(code: code, reason: reason), to: targets)
        tunnels?.close(sessionID: sessionID, code: code, reason: reason)
    }

    /// Asks every socket of an account (all its sessions) to close, with its tunnels and MCP
    /// requests under way; how many were asked.
    @discardableResult
    public func close(userID: String, tenantID: String, code: UInt16 = 1008, reason: String) -> Int {
        let targets = state.withLock { state in
            state.sessions.values.filter { $0.userID == userID && $0.tenantID == tenantID }.flatMap { Array($0.sockets.values) }
        }
        SocketCloseTarget.deliver(SocketCloseRequest(code: code, reason: reason), to: targets)
        return targets.count + (tunnels?.close(userID: userID, tenantID: tenantID, code: code, reason: reason) ?? 0)
    }

    /// Ends the requests under way, tunnels and MCP streams that carry an account's token at the
    /// connected service `connection` (it was disconnected); how many.
    @discardableResult
    public func close(userID: String, tenantID: String, connection: String, code: UInt16 = 1008, reason: String) -> Int {
        tunnels?.close(userID: userID, tenantID: tenantID, connection: connection, code: code, reason: reason) ?? 0
    }

    /// Tells the person's client, on its MCP streams to routes with `connection`, that the URL
    /// elicitation `id` is complete (they connected the service); how many streams were asked.
    @discardableResult
    public func completeElicitation(id: String, userID: String, tenantID: String, connection: String, clientID: String) -> Int {
        tunnels?.completeElicitation(id: id, userID: userID, tenantID: tenantID, connection: connection, clientID: clientID) ?? 0
    }

    /// Closes the WebSocket tunnels and MCP streams opened with the token `tokenID` (it was revoked).
    @discardableResult
    public func close(tokenID: String, code: UInt16 = 1008, reason: String) -> Int {
        tunnels?.close(tokenID: tokenID, code: code, reason: reason) ?? 0
    }

    /// Asks every socket to close (the gateway is shutting down).
    public func closeAll(code: UInt16 = 1001, reason: String) {
        let targets = state.withLock { state in state.sessions.values.flatMap { Array($0.sockets.values) } }
        SocketCloseTarget.deliver(SocketCloseRequest(code: code, reason: reason), to: targets)
        tunnels?.closeAll(code: code, reason: reason)
    }

    /// The sessions that have sockets open now (agent sockets, and WebSocket tunnels to routes):
    /// their ends are watched for.
    package var sessionIDs: [String] {
        let agents = state.withLock { Array($0.sessions.keys) }
        guard let tunnels else { return agents }
        return Array(Set(agents).union(tunnels.sessionIDs))
    }
}
