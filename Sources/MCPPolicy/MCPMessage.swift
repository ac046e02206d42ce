import JOSE

/// One JSON-RPC message of an MCP request body, as far as the gateway decides on it.
public struct MCPMessage: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// A request: a method and an id; it gets an answer.
        case request
        /// A notification: a method and no id; nothing answers it.
        case notification
        /// The client's answer to a request of the server's (sampling, elicitation): an id, a result or an error.
        case response
    }

    public let kind: Kind
    /// The request's `id` (a string or an integer), echoed in the gateway's error for it.
    public let id: JSONValue?
    /// The method (`nil` for a response).
    public let method: String?
    /// What the method acts on: `params.name` for `tools/call` and `prompts/get`, `params.uri` for
    /// `resources/read`, `resources/subscribe` and `resources/unsubscribe`; `nil` for other methods.
    public let name: String?

    public init(kind: Kind, id: JSONValue?, method: String?, name: String?) {
        self.kind = kind
        self.id = id
        self.method = method
        self.name = name
    }

    /// The methods that act on one named thing, and the member of `params` that names it.
    public static func nameMember(of method: String) -> String? {
        switch method {
        case "tools/call", "prompts/get": "name"
        case "resources/read", "resources/subscribe", "resources/unsubscribe": "uri"
        default: nil
        }
    }
}

/// An MCP request body: one message, or a JSON-RPC batch (2025-03-26 and earlier).
public enum MCPBody: Sendable, Equatable {
    case single(MCPMessage)
    case batch([MCPMessage])

    public var messages: [MCPMessage] {
        switch self {
        case .single(let message): [message]
        case .batch(let messages): messages
        }
    }

    /// The most messages a batch may hold.
    public static let maximumBatch = 64
    /// The deepest nesting read (arguments are the tool's; the gateway reads only the envelope, but all of it is checked).
    public static let maximumDepth = 64

    /// Reads a body strictly: JSON (RFC 8259, no duplicate member names at any depth, valid UTF-8,
    /// at most `maximumDepth` deep), each message JSON-RPC 2.0 with the members its kind needs.
    ///
    /// A body another parser could read otherwise (a duplicate `method` or `name`, a lone
    /// surrogate) is refused here, so the gateway and the MCP server never decide on different names.
    public static func read(_ bytes: [UInt8]) throws(MCPBodyError) -> MCPBody {
        let value: JSONValue
        do {
            value = try StrictJSONReader(maxDepth: maximumDepth).parse(bytes)
        } catch {
            throw MCPBodyError(.parse, "the body is not JSON the gateway can decide on (\(error.message))")
        }
        switch value {
        case .object(let object):
            return .single(try message(object, at: nil))
        case .array(let items):
            guard !items.isEmpty else { throw MCPBodyError(.invalidRequest, "the body is an empty batch") }
            guard items.count <= maximumBatch else { throw MCPBodyError(.invalidRequest, "a batch holds at most \(maximumBatch) messages; send fewer at once") }
            var messages: [MCPMessage] = []
            messages.reserveCapacity(items.count)
            for (index, item) in items.enumerated() {
                guard case .object(let object) = item else { throw MCPBodyError(.invalidRequest, "batch element \(index) is not a JSON-RPC message (an object)") }
                messages.append(try message(object, at: index))
            }
            return .batch(messages)
        default:
            throw MCPBodyError(.invalidRequest, "the body is not a JSON-RPC message (an object) or a batch of them")
        }
    }

    private static func message(_ object: JSONObject, at index: Int?) throws(MCPBodyError) -> MCPMessage {
        let place = index.map { "batch element \($0)" } ?? "the message"
        guard object["jsonrpc"] == .string("2.0") else { throw MCPBodyError(.invalidRequest, "\(place) is not JSON-RPC 2.0 (jsonrpc must be \"2.0\")") }
        let id = object["id"]
        if let id {
            switch id {
            case .string: break
            case .number(let number) where number == number.rounded() && abs(number) < 9_007_199_254_740_992: break
            default: throw MCPBodyError(.invalidRequest, "\(place) has an id that is neither a string nor an integer")
            }
        }
        guard let methodValue = object["method"] else {
            guard id != nil, object["result"] != nil || object["error"] != nil else {
                throw MCPBodyError(.invalidRequest, "\(place) has no method, and is not a response (an id with a result or an error)")
            }
            return MCPMessage(kind: .response, id: id, method: nil, name: nil)
        }
        guard case .string(let method) = methodValue, !method.isEmpty else { throw MCPBodyError(.invalidRequest, "\(place) has a method that is not a string") }
        var name: String?
        if let member = MCPMessage.nameMember(of: method) {
            guard case .object(let params)? = object["params"], case .string(let named)? = params[member] else {
                throw MCPBodyError(.invalidRequest, "\(place) calls \(MCPRequestHeaders.printable(method)) without params.\(member) (a string)", id: id)
            }
            name = named
        }
        return MCPMessage(kind: id == nil ? .notification : .request, id: id, method: method, name: name)
    }
}
