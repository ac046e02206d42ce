import JOSE

/// Filters the answers to `tools/list`, `prompts/list`, `resources/list` and
/// `resources/templates/list` to the entries the caller may use, so an agent is never offered
/// what it would be refused.
///
/// An answer is the server's JSON-RPC response (a JSON body, or one event of an SSE stream);
/// entries are cut out of its bytes and nothing else changes. With an `id`, only the response to
/// that request is filtered (a POST's own answer); without one, every response carrying a filtered
/// list is (a GET stream, where a resumed request's answer may come again).
public struct MCPListFilter: Sendable {
    /// The request's id: the response carrying it is the one filtered; `nil`: any response.
    public let id: JSONValue?
    /// The lists filtered: the method, the member of `result` listing the entries, and the member naming each.
    let lists: [(method: String, member: String, name: String)]
    /// Whether an entry of a list method's answer stays, by its name (or URI).
    let keeps: @Sendable (_ method: String, _ name: String) -> Bool
    /// The most bytes of one answer (or one SSE event) the gateway holds to filter.
    public static let maximumBytes = 8 << 20

    /// A filter of the answer to one list request.
    public init(method: String, id: JSONValue, keeps: @escaping @Sendable (_ method: String, _ name: String) -> Bool) {
        self.id = id
        self.lists = Self.lists(for: [method])
        self.keeps = keeps
    }

    /// The check of a request's answer on a route that filters lists, where the request is not a
    /// filtered list: only the response to `id` may come on it (a response to another id could be
    /// a list request's, passed past its filter), and it is passed as it came.
    public init(answerTo id: JSONValue) {
        self.id = id
        self.lists = []
        self.keeps = { _, _ in true }
    }

    /// A filter of every response on a stream carrying one of `methods`' lists.
    public init(streamOf methods: [String], keeps: @escaping @Sendable (_ method: String, _ name: String) -> Bool) {
        self.id = nil
        self.lists = Self.lists(for: methods)
        self.keeps = keeps
    }

    static func lists(for methods: [String]) -> [(method: String, member: String, name: String)] {
        methods.compactMap { method in
            switch method {
            case "tools/list": (method, "tools", "name")
            case "prompts/list": (method, "prompts", "name")
            case "resources/list": (method, "resources", "uri")
            case "resources/templates/list": (method, "resourceTemplates", "uriTemplate")
            default: nil
            }
        }
    }

    /// Why an answer is not passed: it could carry a list the gateway would not have read.
    public enum Unfilterable: Error, Sendable, Equatable {
        /// A JSON array: a batch of messages, any of which could be the list's response.
        case batch
        /// A member a client matching names loosely could read as the one filtered (`Tools` beside `tools`).
        case ambiguous
        /// A JSON answer to a list request that is not exactly one response with the request's id.
        case notTheResponse
    }

    /// `document` with the entries the caller may not use cut out; `nil` when it is not a response
    /// this filter is for, or carries no list (it then passes as it came). Throws when it is not
    /// JSON, is a batch, or has a member a loose decoder would read otherwise (`Unfilterable`).
    public func filtered(_ document: [UInt8]) throws -> [UInt8]? {
        try filtered(document, read: try StrictJSONReader(maxDepth: MCPBody.maximumDepth).parse(document))
    }

    /// `filtered(_:)` of a document already read (`value`), so that it is read once.
    private func filtered(_ document: [UInt8], read value: JSONValue) throws -> [UInt8]? {
        if case .array = value { throw Unfilterable.batch }
        guard case .object(let object) = value else { return nil }
        if MemberNameFold.ambiguity(in: object, reads: ["jsonrpc", "id", "result", "error"]) != nil { throw Unfilterable.ambiguous }
        // On a list request's own stream, a response to any other id is not passed unread: a
        // client may take it for the answer (`"1"` for `1`: the TypeScript SDK reads `Number(id)`).
        // A message with a method and a result is read as a response by some clients: so is it here.
        if let id, object["result"] != nil || object["error"] != nil, object["id"] != id { throw Unfilterable.notTheResponse }
        guard case .object(let result)? = object["result"] else { return nil }
        if let id { guard object["id"] == id else { return nil } } else { guard object["id"] != nil else { return nil } }
        if MemberNameFold.ambiguity(in: result, reads: lists.map(\.member)) != nil { throw Unfilterable.ambiguous }
        guard let list = lists.first(where: { result[$0.member] != nil }) else { return nil }
        let spans = JSONSpans(bytes: document)
        guard let resultSpan = spans.member("result", in: 0..<document.count), let entries = spans.member(list.member, in: resultSpan),
            let elements = spans.elements(of: entries)
        else { return nil }
        var kept: [Range<Int>] = []
        for element in elements {
            let entry = try? StrictJSONReader(maxDepth: MCPBody.maximumDepth).parse(Array(document[element]))
            // An entry without a name is no one's to call: it goes.
            guard case .object(let fields)? = entry else { continue }
            // An entry a loose decoder reads another name of (`Name` beside `name`) is not passed.
            if MemberNameFold.ambiguity(in: fields, reads: [list.name]) != nil { throw Unfilterable.ambiguous }
            guard case .string(let name)? = fields[list.name], keeps(list.method, name) else { continue }
            kept.append(element)
        }
        guard kept.count != elements.count else { return document }
        var out: [UInt8] = []
        out.reserveCapacity(document.count)
        out.append(contentsOf: document[0..<(entries.lowerBound + 1)])  // through the `[`
        for (index, element) in kept.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: document[element])
        }
        out.append(contentsOf: document[(entries.upperBound - 1)...])  // from the `]`
        return out
    }

    /// A whole JSON answer (not an event stream), filtered: it must be exactly one JSON-RPC
    /// response (a result or an error) with the request's id (any id for a stream's filter);
    /// anything else throws and is refused, never passed unread.
    public func filteredAnswer(_ document: [UInt8]) throws -> [UInt8] {
        let value = try StrictJSONReader(maxDepth: MCPBody.maximumDepth).parse(document)
        guard case .object(let object) = value, let answered = object["id"], id == nil || answered == id, object["result"] != nil || object["error"] != nil else {
            throw Unfilterable.notTheResponse
        }
        return try filtered(document, read: value) ?? document
    }
}
