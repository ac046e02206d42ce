import JOSE

/// The answer that asks an MCP client to send its person to a URL before a request can run: a
/// URL-mode elicitation, in the form the request's protocol version knows.
///
/// The URL is the gateway's own page, never pre-authenticated (MCP's "Safe URL Handling"): it
/// asks for the person's own browser session. It is in the message too, so a client without URL
/// elicitation shows the person where to go.
public enum URLElicitationAnswer {
    /// MCP's URLElicitationRequiredError (2025-11-25).
    public static let errorCode = -32042
    /// The first protocol version that asks through a result (`InputRequiredResult`) instead of the error.
    public static let inputRequiredVersion = "2026-07-28"

    /// MCP's `notifications/elicitation/complete` for `elicitationID` (2025-11-25): the person
    /// finished what the link asked of them, and the client may retry without waiting for them to say so.
    public static func completion(elicitationID: String) -> JSONValue {
        .object([
            "jsonrpc": "2.0", "method": "notifications/elicitation/complete",
            "params": .object(["elicitationId": .string(elicitationID)]),
        ])
    }

    /// The answer to the request `id`: a 2026-07-28 client gets an `InputRequiredResult` whose one
    /// input request (`inputKey`) is `elicitation/create` in URL mode; an earlier one gets
    /// URLElicitationRequiredError (`-32042`) with `elicitationID`. `data.code` carries the
    /// gateway's stable code, as its other answers do.
    public static func answer(
        id: JSONValue, protocolVersion: String?, elicitationID: String, inputKey: String, url: String, message: String, code: String
    ) -> JSONValue {
        // A version is a date (YYYY-MM-DD): compared as text only when it is one.
        if let protocolVersion, protocolVersion.utf8.count == 10, protocolVersion.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }),
            protocolVersion >= inputRequiredVersion
        {
            return .object([
                "jsonrpc": "2.0", "id": id,
                "result": .object([
                    "resultType": "input_required",
                    "inputRequests": .object([
                        inputKey: .object([
                            "method": "elicitation/create",
                            "params": .object(["mode": "url", "url": .string(url), "message": .string(message)]),
                        ])
                    ]),
                ]),
            ])
        }
        return .object([
            "jsonrpc": "2.0", "id": id,
            "error": .object([
                "code": .number(Double(errorCode)), "message": .string(message),
                "data": .object([
                    "code": .string(code),
                    "elicitations": .array([
                        .object(["mode": "url", "elicitationId": .string(elicitationID), "url": .string(url), "message": .string(message)])
                    ]),
                ]),
            ]),
        ])
    }
}
