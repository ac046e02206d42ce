import JOSE

// libFuzzer target: bytes -> MCPBody.read (an MCP POST's body, as the gateway decides on it).
// Oracle: whatever is accepted, a server decoding as Go's encoding/json does (member names matched
// under Unicode's simple case folding, upper(lower(r)), the last match winning) reads the same
// method, params, name, URI, ref and id as the gateway: in every object the gateway reads (a
// request's or a notification's params; a response's are read by nobody), the one
// member such a decoder matches to each name is the member spelled exactly so. A first-wins or a
// last-wins decoder reads alike since no name is there twice.

/// A loose decoder's fold of one scalar, from Unicode's case mappings (simple ones: a single
/// scalar), upper(lower(r)) as Go's encoding/json has it; İ, whose full lower case is i with a
/// combining dot, is taken to lower to i as .NET's invariant culture may, stricter than Go (whose
/// case orbit leaves İ and ı alone).
func goFold(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
    let lower = scalar.properties.lowercaseMapping.unicodeScalars
    var lowered = scalar
    if lower.count == 1, let only = lower.first { lowered = only } else if scalar.value == 0x130 { lowered = "i" }
    let upper = lowered.properties.uppercaseMapping.unicodeScalars
    return upper.count == 1 ? upper.first! : lowered
}

func goFold(_ name: String) -> [Unicode.Scalar] { name.unicodeScalars.map(goFold) }

/// The members of `object` that Go would match to `name`.
func goMatches(_ object: JSONObject, _ name: String) -> [String] {
    let key = goFold(name)
    return object.names.filter { goFold($0) == key }
}

func checkReadAlike(_ object: JSONObject, reads: [String], _ where_: String) {
    for name in reads {
        let matched = goMatches(object, name)
        guard matched.isEmpty || matched == [name] else {
            fatalError("\(where_): a Go server would read \(matched) as \(name)")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMCPBody(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let body = try? MCPBody.read(bytes) else { return 0 }
    guard let value = try? StrictJSONReader(maxDepth: MCPBody.maximumDepth).parse(bytes) else { fatalError("an accepted body is not strict JSON") }
    let objects: [JSONObject]
    switch value {
    case .object(let object): objects = [object]
    case .array(let items): objects = items.compactMap(\.objectValue)
    default: fatalError("an accepted body is neither a message nor a batch")
    }
    guard objects.count == body.messages.count else { fatalError("a batch element was read as no message") }
    for (object, message) in zip(objects, body.messages) {
        checkReadAlike(object, reads: ["jsonrpc", "id", "method", "params", "result", "error"], "the message")
        guard object["method"]?.stringValue == message.method, object["id"] == message.id else { fatalError("the message's method or id is not the one decided on") }
        // A response's params are nobody's: neither the gateway nor a server reads them (no method, once folded).
        if message.method != nil, let params = object["params"]?.objectValue {
            checkReadAlike(params, reads: ["name", "uri", "ref"], "params")
            if message.method == "completion/complete", let ref = params["ref"]?.objectValue {
                checkReadAlike(ref, reads: ["type", "name", "uri"], "params.ref")
            }
        }
    }
    return 0
}
