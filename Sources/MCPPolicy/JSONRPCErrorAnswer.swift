import JOSE

/// The gateway's JSON-RPC error answers, which an MCP client shows as the error they are.
public enum JSONRPCErrorAnswer {
    /// The code of a message refused by the gateway's policy: outside JSON-RPC's reserved range
    /// (-32768 to -32000), which MCP partitions for its own codes.
    public static let refusedCode = -31403
    /// JSON-RPC's Method not found: a method the gateway does not pass, answered as a server lacking it would.
    public static let methodNotFoundCode = -32601

    /// One error response: `{"jsonrpc":"2.0","id":ID,"error":{"code":N,"message":M,"data":{"code":C}}}`.
    public static func error(id: JSONValue?, rpcCode: Int, message: String, code: String) -> JSONValue {
        .object([
            "jsonrpc": "2.0", "id": id ?? .null,
            "error": .object(["code": .number(Double(rpcCode)), "message": .string(message), "data": .object(["code": .string(code)])]),
        ])
    }

    /// The answer to a body some message of which was refused: one error for a single request;
    /// for a batch, an error for every request in it (the refused with their reason, the others
    /// as not run), since none of it is forwarded. `nil` when nothing in it awaits an answer.
    public static func refusal(for body: MCPBody, decisions: [MCPDecision]) -> [UInt8]? {
        var answers: [JSONValue] = []
        for (message, decision) in zip(body.messages, decisions) where message.kind == .request {
            switch decision {
            case .refused(let refusal):
                answers.append(error(id: message.id, rpcCode: refusal.rpcCode, message: refusal.message, code: refusal.code))
            default:
                answers.append(
                    error(id: message.id, rpcCode: refusedCode, message: "not run: another message of this batch was refused by the gateway", code: "mcp_batch_refused"))
            }
        }
        guard !answers.isEmpty else { return nil }
        if case .single = body { return JSONWriter.bytes(answers[0]) }
        return JSONWriter.bytes(.array(answers))
    }
}
