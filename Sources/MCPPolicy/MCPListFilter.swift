import JOSE

/// Filters the answer to a `tools/list`, `prompts/list` or `resources/list` to the entries the
/// caller may use, so an agent is never offered what it would be refused.
///
/// The answer is the server's JSON-RPC response (a JSON body, or one event of an SSE stream);
/// entries are cut out of its bytes and nothing else changes. Only the response to the request's
/// own `id` is filtered; every other message passes as it came.
public struct MCPListFilter: Sendable {
    /// The list method asked (`tools/list`).
    public let method: String
    /// The request's id: the response carrying it is the one filtered.
    public let id: JSONValue
    /// Whether an entry's name (or URI) stays.
    let keeps: @Sendable (String) -> Bool
    /// The most bytes of one answer (or one SSE event) the gateway holds to filter.
    public static let maximumBytes = 8 << 20

    public init(method: String, id: JSONValue, keeps: @escaping @Sendable (String) -> Bool) {
        self.method = method
        self.id = id
        self.keeps = keeps
    }

    /// The member of `result` listing the entries, and the entry member naming each.
    private var listMember: (list: String, name: String) {
        switch method {
        case "prompts/list": ("prompts", "name")
        case "resources/list": ("resources", "uri")
        default: ("tools", "name")
        }
    }

    /// `document` with the entries the caller may not use cut out; `nil` when it is not the
    /// response to this request (it then passes as it came). Throws when it is not JSON.
    public func filtered(_ document: [UInt8]) throws(JSONReadError) -> [UInt8]? {
        guard case .object(let object) = try StrictJSONReader(maxDepth: MCPBody.maximumDepth).parse(document), object["id"] == id,
            case .object? = object["result"]
        else { return nil }
        let spans = JSONSpans(bytes: document)
        let (list, nameMember) = listMember
        guard let result = spans.member("result", in: 0..<document.count), let entries = spans.member(list, in: result),
            let elements = spans.elements(of: entries)
        else { return nil }
        var kept: [Range<Int>] = []
        for element in elements {
            let entry = try? StrictJSONReader(maxDepth: MCPBody.maximumDepth).parse(Array(document[element]))
            // An entry without a name is no one's to call: it goes.
            guard case .object(let fields)? = entry, case .string(let name)? = fields[nameMember], keeps(name) else { continue }
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
}
