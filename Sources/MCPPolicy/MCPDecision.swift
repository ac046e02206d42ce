/// What the gateway does with one MCP message, or a whole body.
public enum MCPDecision: Sendable, Equatable {
    /// Forwarded to the MCP server.
    case allowed
    /// Refused until the client holds more scopes: 403 `insufficient_scope` naming every scope
    /// needed (the route's and the rule's), so the client can ask the person for them (SEP-835).
    case needsScopes([String])
    /// Refused for this caller whatever it asks: answered as a JSON-RPC error, never forwarded.
    case refused(Refusal)

    /// Why a message was refused.
    public struct Refusal: Sendable, Equatable {
        /// Stable: `mcp_tool_refused`, `mcp_prompt_refused`, `mcp_resource_refused`, `mcp_method_refused`.
        public let code: String
        /// One sentence the client shows a person: what was refused, never the claim values that
        /// would pass (an agent must not learn the rule to game it).
        public let message: String
        /// The requirement that failed, for the gateway's log only (`nil` when `message` says all).
        public let detail: String?
        /// The JSON-RPC error code: -32601 (Method not found) for a method the gateway does not
        /// pass, as the server would answer a method it lacks; the policy's own -31403 otherwise.
        public let rpcCode: Int

        public init(code: String, message: String, rpcCode: Int = JSONRPCErrorAnswer.refusedCode, detail: String? = nil) {
            self.code = code
            self.message = message
            self.rpcCode = rpcCode
            self.detail = detail
        }
    }

    /// The access log's and the metrics' word for it.
    public var label: String {
        switch self {
        case .allowed: "allowed"
        case .needsScopes: "insufficient_scope"
        case .refused(let refusal): refusal.code
        }
    }
}
