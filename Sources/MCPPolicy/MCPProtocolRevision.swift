/// The MCP revision a request speaks, from its `MCP-Protocol-Version` field (2025-06-18 and later):
/// what decides how a refusal is answered, so that a client meets the status its revision expects.
public struct MCPProtocolRevision: Sendable, Comparable {
    /// `YYYY-MM-DD`, as the field carries it.
    public let date: String

    /// The first revision whose Streamable HTTP transport answers a method the server does not
    /// implement with HTTP 404 and -32601 (earlier ones: an ordinary answer holding the error).
    public static let methodNotFoundIs404 = MCPProtocolRevision(checked: "2026-07-28")

    /// The first revision whose Streamable HTTP transport takes a closed request stream as the
    /// cancellation of its request, and expects no `notifications/cancelled` (earlier ones: a
    /// disconnect is not a cancellation; the client sends the notification).
    public static let disconnectCancels = MCPProtocolRevision(checked: "2026-07-28")

    /// The revision that brought `notifications/elicitation/complete`, and the one that took it away
    /// (2026-07-28's clients learn a URL elicitation's end by asking again).
    public static let elicitationCompleteSince = MCPProtocolRevision(checked: "2025-11-25")
    public static let elicitationCompleteUntil = MCPProtocolRevision(checked: "2026-07-28")

    /// The revision of `values` (every `MCP-Protocol-Version` sent): `nil` unless there is exactly
    /// one and it is a date; a request without one speaks 2025-03-26 (the transport's own rule).
    public init?(fields values: [String]) {
        guard values.count == 1, Self.isDate(values[0]) else { return nil }
        date = values[0]
    }

    private init(checked date: String) { self.date = date }

    /// Whether a refused method is answered 404 (2026-07-28 and later) rather than 200.
    public static func answersUnknownMethodWith404(_ values: [String]) -> Bool {
        MCPProtocolRevision(fields: values).map { $0 >= methodNotFoundIs404 } ?? false
    }

    /// Whether a request cancelled under way is told to its server with `notifications/cancelled`
    /// (before 2026-07-28, and a request that names no single revision), beside its closed stream.
    public static func cancelsWithNotification(_ values: [String]) -> Bool {
        MCPProtocolRevision(fields: values).map { $0 < disconnectCancels } ?? true
    }

    /// Whether a stream opened with `values` may carry `notifications/elicitation/complete`: it
    /// names one revision that has it (2025-11-25), so no client meets a method its revision lacks.
    public static func hearsElicitationComplete(_ values: [String]) -> Bool {
        MCPProtocolRevision(fields: values).map { $0 >= elicitationCompleteSince && $0 < elicitationCompleteUntil } ?? false
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.date < rhs.date }

    private static func isDate(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else { return false }
        return bytes.enumerated().allSatisfy { $0.offset == 4 || $0.offset == 7 || (0x30...0x39).contains($0.element) }
    }
}
