import EdgeHTTP
import NIOHTTP1

/// The fields an MCP POST is decided by, every value of each, read in one pass over its head.
///
/// Asked by name one at a time they cost a walk of the head each (and an array each) on every
/// call; a name matches in any letter case, the length compared first.
struct MCPPostFields {
    /// `Content-Type`: one field, `application/json`, is taken.
    private(set) var contentTypes: [String] = []
    /// `Content-Encoding`: none, or `identity`, is taken.
    private(set) var contentEncodings: [String] = []
    /// `Mcp-Method` and `Mcp-Name` (2026-07-28), checked against the body.
    private(set) var methods: [String] = []
    private(set) var names: [String] = []
    /// `MCP-Protocol-Version`: the revision a refusal is answered in (MCPProtocolRevision).
    private(set) var protocolVersions: [String] = []
    /// `traceparent`: passed on when valid and alone, else a trace is started.
    private(set) var traceparents: [String] = []

    init(_ headers: HTTPHeaders) {
        for (name, value) in headers {
            switch name.utf8.count {
            case 8 where HeaderScreen.equalsLowercased(name.utf8, "mcp-name"): names.append(value)
            case 10 where HeaderScreen.equalsLowercased(name.utf8, "mcp-method"): methods.append(value)
            case 11 where HeaderScreen.equalsLowercased(name.utf8, "traceparent"): traceparents.append(value)
            case 12 where HeaderScreen.equalsLowercased(name.utf8, "content-type"): contentTypes.append(value)
            case 16 where HeaderScreen.equalsLowercased(name.utf8, "content-encoding"): contentEncodings.append(value)
            case 20 where HeaderScreen.equalsLowercased(name.utf8, "mcp-protocol-version"): protocolVersions.append(value)
            default: break
            }
        }
    }
}
