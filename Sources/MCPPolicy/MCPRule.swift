import TrafficCop

/// One rule of an MCP route's `tools`, `prompts` or `resources`: the names it covers, who may
/// call them, and the scopes the client must hold for them.
public struct MCPRule: Sendable, Equatable {
    /// `name` (a tool or prompt) or `uri` (a resource): exact, or a glob.
    public let pattern: NamePattern
    /// `require`: who may call it, in the language of a route's `require` (scopes aside); `nil`: anyone the route admits.
    public let policy: RoutePolicy?
    /// `scopes`: what the client's token must hold; without them the call is refused with a
    /// step-up challenge (the person grants them at consent), not as forbidden.
    public let scopes: [String]

    public init(pattern: NamePattern, policy: RoutePolicy? = nil, scopes: [String] = []) {
        self.pattern = pattern
        self.policy = policy
        self.scopes = scopes
    }
}
