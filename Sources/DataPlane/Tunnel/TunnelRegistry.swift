import NIOCore
import Synchronization

/// The WebSocket tunnels open to routes, the MCP requests under way (an SSE stream above all) and
/// the requests under way that carry a person's token at a connected service,
/// with the gateway session, account and token they were opened with: a logout, a back-channel
/// logout, a disabled account or a revoked token closes them (1008, its reason) as it closes agent
/// sockets (`SocketRegistry` forwards its closes here).
package final class TunnelRegistry: Sendable {
    package struct Entry: Sendable {
        let sessionID: String?
        let userID: String?
        let tenantID: String?
        /// The id (`jti`) of the token it was opened with: its revocation closes it.
        let tokenID: String?
        /// Asks the tunnel, on its event loop, to close with a code and reason.
        let close: @Sendable (UInt16, String) -> Void
        /// The connected service whose token it carries upstream (`upstream_credential`): a disconnect closes it.
        var connection: String? = nil
        /// How a disconnect of `connection` ends it, when not as `close` does (an MCP request answers 403, not 401).
        var endConnection: (@Sendable (String) -> Void)? = nil
        /// The OAuth client of the token it was opened with (`""` for a token that names none).
        var clientID: String = ""
        /// Tells an MCP client on this stream that a URL elicitation it was given is complete (its id);
        /// `nil` for what cannot carry one (anything but an MCP request on a route with a connection).
        var elicitationComplete: (@Sendable (String) -> Void)? = nil
    }

    private let state = Mutex<(next: UInt64, tunnels: [UInt64: Entry])>((0, [:]))

    package init() {}

    /// Registers an open tunnel; the id unregisters it.
    func register(_ entry: Entry) -> UInt64 {
        state.withLock { state in
            state.next += 1
            state.tunnels[state.next] = entry
            return state.next
        }
    }

    func unregister(_ id: UInt64) {
        _ = state.withLock { $0.tunnels.removeValue(forKey: id) }
    }

    /// The sessions tunnels were opened in (their ends are watched for, as agent sockets' are).
    package var sessionIDs: Set<String> { state.withLock { Set($0.tunnels.values.compactMap(\.sessionID)) } }

    /// Closes the tunnels opened in `sessionID`.
    package func close(sessionID: String, code: UInt16 = 1008, reason: String) {
        close(code: code, reason: reason) { $0.sessionID == sessionID }
    }

    /// Closes the tunnels and MCP requests under way of an account; how many.
    @discardableResult
    package func close(userID: String, tenantID: String, code: UInt16 = 1008, reason: String) -> Int {
        close(code: code, reason: reason) { $0.userID == userID && $0.tenantID == tenantID }
    }

    /// Closes the tunnels and requests under way that carry the account's token at `connection` (it was disconnected); how many.
    @discardableResult
    package func close(userID: String, tenantID: String, connection: String, code: UInt16 = 1008, reason: String) -> Int {
        let chosen = state.withLock { $0.tunnels.values.filter { $0.connection == connection && $0.userID == userID && $0.tenantID == tenantID } }
        for entry in chosen {
            if let endConnection = entry.endConnection { endConnection(reason) } else { entry.close(code, reason) }
        }
        return chosen.count
    }

    /// Tells the MCP streams of `completion`'s person and client on routes with its connection that
    /// its elicitation is complete (each stream decides whether it can carry the notification); how many were asked.
    @discardableResult
    package func completeElicitation(id: String, userID: String, tenantID: String, connection: String, clientID: String) -> Int {
        let chosen = state.withLock {
            $0.tunnels.values.compactMap { entry in
                entry.connection == connection && entry.userID == userID && entry.tenantID == tenantID && entry.clientID == clientID
                    ? entry.elicitationComplete : nil
            }
        }
        for tell in chosen { tell(id) }
        return chosen.count
    }

    /// Closes the tunnels and streams opened with a token (it was revoked); how many.
    @discardableResult
    package func close(tokenID: String, code: UInt16 = 1008, reason: String) -> Int {
        close(code: code, reason: reason) { $0.tokenID == tokenID }
    }

    /// Closes every tunnel (the gateway is shutting down).
    package func closeAll(code: UInt16 = 1001, reason: String) {
        close(code: code, reason: reason) { _ in true }
    }

    @discardableResult
    private func close(code: UInt16, reason: String, where matches: (Entry) -> Bool) -> Int {
        let chosen = state.withLock { $0.tunnels.values.filter(matches) }
        for entry in chosen { entry.close(code, reason) }
        return chosen.count
    }
}
