import Foundation
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
    /// `resources/read`, `resources/subscribe` and `resources/unsubscribe`, `params.ref`'s name or
    /// URI for `completion/complete`; `nil` for other methods.
    public let name: String?
    /// For `completion/complete`: whether its `ref` names a prompt (`ref/prompt`) or a resource (`ref/resource`).
    public let completes: String?

    public init(kind: Kind, id: JSONValue?, method: String?, name: String?, completes: String? = nil) {
        self.kind = kind
        self.id = id
        self.method = method
        self.name = name
        self.completes = completes
    }

    /// Whether a resource URI is in the form a server would not rewrite: a lower-case scheme, no
    /// userinfo, no backslash, no dot segment (`.` or `..`, percent-encoded or not), no encoded
    /// separator (`%2f`, `%5c`) before its query, no control character. Another form is refused rather than matched byte for byte against rules that
    /// the server's own URL parsing would then not agree with (`file:///docs/../etc/passwd`).
    public static func isNormalURI(_ uri: String) -> Bool {
        let bytes = Array(uri.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return false }
        guard bytes[0..<colon].allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E }),
            (0x61...0x7A).contains(bytes[0])
        else { return false }
        guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\\") }) else { return false }
        let rest = bytes[(colon + 1)...]
        if rest.starts(with: Array("//".utf8)) {
            let authority = rest.dropFirst(2).prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
            if authority.contains(UInt8(ascii: "@")) { return false }
        }
        // An encoded separator (`%2f`, `%5c`, any case): a server that decodes before it splits
        // would find segments the rules never saw (`file:///docs/x%2f..%2f..%2fetc%2fpasswd`).
        let lowered = String(decoding: rest.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }, as: UTF8.self).lowercased()
        if lowered.contains("%2f") || lowered.contains("%5c") { return false }
        // Dot segments, with `%2e` read as a dot (any case).
        for segment in lowered.replacingOccurrences(of: "%2e", with: ".").split(separator: "/", omittingEmptySubsequences: false) where segment == "." || segment == ".." {
            return false
        }
        return true
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
        // Read as every decoder reads it, before anything is decided on it (MemberNameFold).
        try unambiguous(object, reads: envelopeNames, at: place, id: nil)
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
        // No control character (NUL above all): a server keeping strings as C strings would read less of it.
        guard !Self.hasControl(method) else { throw MCPBodyError(.invalidRequest, "\(place) has a method holding a control character", id: id) }
        if case .object(let params)? = object["params"] {
            try unambiguous(params, reads: paramsNames, at: place + "'s params", id: id)
            if method == "completion/complete", case .object(let ref)? = params["ref"] {
                try unambiguous(ref, reads: refNames, at: place + "'s params.ref", id: id)
            }
        }
        var name: String?
        var completes: String?
        if let member = MCPMessage.nameMember(of: method) {
            guard case .object(let params)? = object["params"], case .string(let named)? = params[member] else {
                throw MCPBodyError(.invalidRequest, "\(place) calls \(MCPRequestHeaders.printable(method)) without params.\(member) (a string)", id: id)
            }
            name = named
        } else if method == "completion/complete" {
            // Completions of a prompt's or a resource's arguments are decided as that prompt or resource.
            guard case .object(let params)? = object["params"], case .object(let ref)? = params["ref"], case .string(let type)? = ref["type"],
                let member = type == "ref/prompt" ? "name" : type == "ref/resource" ? "uri" : nil, case .string(let named)? = ref[member]
            else {
                throw MCPBodyError(.invalidRequest, "\(place) asks for completions without params.ref (ref/prompt with a name, or ref/resource with a uri)", id: id)
            }
            (name, completes) = (named, type)
        }
        if let name, Self.hasControl(name) {
            throw MCPBodyError(.invalidRequest, "\(place) names what it acts on with a control character in it", id: id)
        }
        if let name, MCPMessage.nameMember(of: method) == "uri" || completes == "ref/resource", !MCPMessage.isNormalURI(name) {
            throw MCPBodyError(
                .invalidRequest,
                "\(place) names a resource URI not in its normal form (a lower-case scheme, no userinfo, backslash or dot segment); send the URI as the server lists it",
                id: id)
        }
        return MCPMessage(kind: id == nil ? .notification : .request, id: id, method: method, name: name, completes: completes)
    }

    /// Whether `text` holds a C0 control character or DEL.
    static func hasControl(_ text: String) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// The members the gateway reads of a message, of its `params` and of a completion's `params.ref`.
    static let envelopeNames = MemberNameFold.Reads(["jsonrpc", "id", "method", "params", "result", "error"])
    static let paramsNames = MemberNameFold.Reads(["name", "uri", "ref"])
    static let refNames = MemberNameFold.Reads(["type", "name", "uri"])

    /// Refuses an object that a decoder matching names loosely would read otherwise than the gateway.
    private static func unambiguous(_ object: JSONObject, reads: MemberNameFold.Reads, at place: @autoclosure () -> String, id: JSONValue?) throws(MCPBodyError) {
        if let problem = MemberNameFold.ambiguity(in: object, reads: reads) {
            throw MCPBodyError(
                .ambiguousMember,
                "\(place()) has \(problem), which a server decoding names loosely would read otherwise; send each member once, spelled exactly as MCP spells it",
                id: id)
        }
    }
}
