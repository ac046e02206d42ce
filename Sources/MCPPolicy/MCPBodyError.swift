import JOSE

/// Why an MCP request body could not be decided on: answered, never forwarded.
public struct MCPBodyError: Error, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Not JSON (JSON-RPC's parse error, -32700).
        case parse
        /// JSON, but not a JSON-RPC message the gateway reads (-32600).
        case invalidRequest
        /// A member another JSON decoder could read in place of the one the gateway decides on
        /// (`Method` beside `method`, `paramſ` beside `params`): -32600, refused whatever the rules.
        case ambiguousMember
        /// `Mcp-Method` or `Mcp-Name` disagree with the body, or are malformed (MCP's HeaderMismatch, -32020).
        case headerMismatch
    }

    public let kind: Kind
    /// One sentence naming the problem (never a value from the body but the method or name).
    public let message: String
    /// The message's id, when one was read.
    public let id: JSONValue?

    public init(_ kind: Kind, _ message: String, id: JSONValue? = nil) {
        self.kind = kind
        self.message = message
        self.id = id
    }

    /// The gateway's stable code for it.
    public var code: String {
        switch kind {
        case .parse: "mcp_body_unreadable"
        case .invalidRequest: "mcp_invalid_request"
        case .ambiguousMember: "mcp_member_ambiguous"
        case .headerMismatch: "mcp_header_mismatch"
        }
    }

    /// The JSON-RPC error code.
    public var rpcCode: Int {
        switch kind {
        case .parse: -32700
        case .invalidRequest, .ambiguousMember: -32600
        case .headerMismatch: -32020
        }
    }
}
