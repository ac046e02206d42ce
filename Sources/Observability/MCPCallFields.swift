/// What the access log line of an MCP request adds: who called, what, and what the gateway decided.
///
/// Never the call's arguments, its result, or a token: the method, the name it acts on (a
/// resource's URI without its query or fragment), and the decision.
public struct MCPCallFields: Sendable, Equatable {
    /// The JSON-RPC method (`tools/call`), `batch` for a batch, `nil` for a GET stream or a DELETE.
    public var method: String?
    /// The tool or prompt name, or the resource URI, when the method names one.
    public var name: String?
    public var clientID: String?
    public var tenantID: String?
    /// `allowed`, `insufficient_scope`, or the refusal's code.
    public var decision: String
    /// The W3C trace id the MCP server got (the client's, or one started here).
    public var traceID: String?
    /// Why the gateway ended the request under way (`access_ended: session ended`, `client_gone`), if it did.
    public var ended: String?
    /// The metrics' labels, bounded by the configuration (`MCPCallPolicy.labels`): never a client's free text.
    public var methodLabel: String?
    public var nameLabel: String?

    public init(method: String? = nil, name: String? = nil, clientID: String? = nil, tenantID: String? = nil, decision: String, traceID: String? = nil) {
        self.method = method
        self.name = name
        self.clientID = clientID
        self.tenantID = tenantID
        self.decision = decision
        self.traceID = traceID
    }

    /// The same fields with another decision.
    public func deciding(_ decision: String) -> MCPCallFields {
        var fields = self
        fields.decision = decision
        return fields
    }

    /// A resource URI as logged: without userinfo, query and fragment, where credentials would ride; at most 256 characters.
    public static func loggedName(_ name: String) -> String {
        var kept = name
        if let cut = kept.firstIndex(where: { $0 == "?" || $0 == "#" }) { kept = String(kept[..<cut]) }
        if let scheme = kept.range(of: "://") {
            let authorityEnd = kept[scheme.upperBound...].firstIndex(of: "/") ?? kept.endIndex
            if let at = kept[scheme.upperBound..<authorityEnd].lastIndex(of: "@") {
                kept.removeSubrange(scheme.upperBound...at)
            }
        }
        return String(kept.prefix(256))
    }

    /// The fields by name, as the log line writes them.
    var pairs: [(String, String)] {
        var pairs: [(String, String)] = []
        if let clientID { pairs.append(("client_id", clientID)) }
        pairs.append(("mcp_decision", decision))
        if let ended { pairs.append(("mcp_ended", ended)) }
        if let method { pairs.append(("mcp_method", method)) }
        if let name { pairs.append(("mcp_name", name)) }
        if let tenantID { pairs.append(("tenant_id", tenantID)) }
        if let traceID { pairs.append(("trace_id", traceID)) }
        return pairs
    }
}
