/// The attribute names the gateway's spans carry: OpenTelemetry's semantic conventions (HTTP, MCP,
/// GenAI), and the gateway's own under `portcullis.`.
public enum TraceAttribute {
    public static let httpMethod = "http.request.method"
    public static let httpStatus = "http.response.status_code"
    public static let httpRoute = "http.route"
    public static let urlPath = "url.path"
    public static let urlScheme = "url.scheme"
    public static let serverAddress = "server.address"
    public static let serverPort = "server.port"
    public static let clientAddress = "client.address"
    public static let protocolVersion = "network.protocol.version"
    public static let errorType = "error.type"
    public static let userID = "user.id"
    public static let mcpMethod = "mcp.method.name"
    public static let mcpSession = "mcp.session.id"
    public static let mcpProtocolVersion = "mcp.protocol.version"
    public static let toolName = "gen_ai.tool.name"
    public static let operationName = "gen_ai.operation.name"
    public static let clientID = "portcullis.client_id"
    public static let tenantID = "portcullis.tenant_id"
    /// `allowed`, or the refusal's stable code (`token_expired`, `session_forbidden`).
    public static let decision = "portcullis.decision"
    public static let requestID = "portcullis.request_id"
    /// Who asked for a decision: `forward_auth` or `ext_authz`.
    public static let asker = "portcullis.asker"
    /// Whom a call of the gateway's went to: `provider`, `runtime`.
    public static let peer = "portcullis.peer"
    /// A store call's database: `sqlite` or `postgresql`.
    public static let databaseSystem = "db.system.name"
    /// A store call's operation: the store method's name (`insertSession`).
    public static let databaseOperation = "db.operation.name"
}
