import JOSE
import MCPPolicy
import Testing

@Suite("Member names as loose decoders read them: one reading for every server")
struct MemberNameFoldTests {
    func ambiguity(_ text: String, reads: [String] = ["jsonrpc", "id", "method", "params", "result", "error"]) throws -> String? {
        MemberNameFold.ambiguity(in: try StrictJSONReader().parseObject(Array(text.utf8)), reads: reads)
    }

    @Test("every scalar whose simple upper- or lower-case mapping is an ASCII letter folds to that letter (ſ to s, the Kelvin sign to k, İ and ı to i), as Go's encoding/json matches names")
    func foldReachesASCII() {
        var found: [UInt32] = []
        for value in UInt32(0x80)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            // A simple mapping is one scalar; İ's lower case is i with a combining dot, which Go's
            // simple mapping (unicode.ToLower) reads as i.
            let properties = scalar.properties
            let simple = [properties.uppercaseMapping, properties.lowercaseMapping, properties.titlecaseMapping].filter { $0.unicodeScalars.count == 1 }
            let dotted = properties.lowercaseMapping.unicodeScalars.count == 2 && properties.lowercaseMapping.unicodeScalars.last?.value == 0x307
            for mapping in simple + (dotted ? [properties.lowercaseMapping] : []) {
                let first = mapping.unicodeScalars.first.map(\.value) ?? 0
                guard (0x41...0x5A).contains(first) || (0x61...0x7A).contains(first) else { continue }
                found.append(value)
                let letter = String(Unicode.Scalar(UInt8(first) | 0x20))
                #expect(MemberNameFold.key(String(scalar)) == letter, "U+\(String(value, radix: 16)) folds to \(MemberNameFold.key(String(scalar)))")
            }
        }
        #expect(Set(found) == [0x130, 0x131, 0x17F, 0x212A], "\(Set(found).map { String($0, radix: 16) })")
        #expect(MemberNameFold.key("paramſ") == "params" && MemberNameFold.key("\u{212A}ind") == "kind" && MemberNameFold.key("MeThOd") == "method")
        #expect(MemberNameFold.key("Ärger") == "ärger" && MemberNameFold.key("name") == "name")
    }

    @Test("an object the gateway reads is ambiguous when a member folds to a name it reads but is spelled otherwise, or two members fold alike; other members, camelCase ones among them, are not")
    func ambiguousObjects() throws {
        #expect(try ambiguity(#"{"method":"a","Method":"b"}"#) != nil)
        #expect(try ambiguity(#"{"Method":"b"}"#) != nil)
        #expect(try ambiguity(#"{"paramſ":{}}"#) != nil)
        #expect(try ambiguity(#"{"params":{},"PARAMS":{}}"#) != nil)
        #expect(try ambiguity(#"{"Foo":1,"foo":2}"#) != nil)
        #expect(try ambiguity(#"{"Foo":1,"fOO":2}"#) != nil)
        #expect(try ambiguity(#"{"\u212Aey":1,"key":2}"#) != nil)
        #expect(try ambiguity(#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"Name":"y"}}"#) == nil)  // params is its own level
        #expect(try ambiguity(#"{"protocolVersion":"1","clientInfo":{},"capabilities":{},"_meta":{}}"#, reads: ["name", "uri", "ref"]) == nil)
        #expect(try ambiguity(#"{"Name":"x"}"#, reads: ["name", "uri", "ref"]) != nil)
        #expect(try ambiguity(#"{"name":"x","Name":"x"}"#, reads: ["name", "uri", "ref"]) != nil)
        // A name the gateway reads in camelCase: every other spelling of it, lower case too.
        #expect(try ambiguity(#"{"resourcetemplates":[]}"#, reads: ["resourceTemplates"]) != nil)
        #expect(try ambiguity(#"{"ResourceTemplates":[]}"#, reads: ["resourceTemplates"]) != nil)
        #expect(try ambiguity(#"{"resourceTemplates":[]}"#, reads: ["resourceTemplates"]) == nil)
        // A control character in a name (a C-string decoder ends the name at NUL).
        #expect(try ambiguity(#"{"method\u0000":"tools/call","method":"ping"}"#) != nil)
        #expect(try ambiguity(#"{"x\u001f":1}"#) != nil)
    }

    @Test("a large object is checked in linear time and still finds its pair, wherever it is")
    func largeObjects() throws {
        let many = (0..<20_000).map { "\"m\($0)X\":\($0)" }.joined(separator: ",")
        #expect(try ambiguity("{" + many + "}") == nil)
        #expect(try ambiguity("{" + many + #","m19999x":1}"#) != nil)
        #expect(try ambiguity(#"{"m7x":1,"# + many + "}") != nil)
    }

    @Test("the body reader refuses an ambiguous message, its params or a completion's ref with mcp_member_ambiguous (-32600), echoing the id only once it is unambiguous; a response's params are read by nobody")
    func bodyReader() throws {
        func refusal(_ text: String) -> MCPBodyError? {
            do { _ = try MCPBody.read(Array(text.utf8)) } catch { return error }
            return nil
        }
        let params = refusal(#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","Name":"b"}}"#)
        #expect(params?.code == "mcp_member_ambiguous" && params?.rpcCode == -32600 && params?.id == 3)
        let envelope = refusal(#"{"jsonrpc":"2.0","id":3,"ID":4,"method":"ping"}"#)
        #expect(envelope?.code == "mcp_member_ambiguous" && envelope?.id == nil)
        #expect(refusal(#"{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"a","NAME":"b"}}}"#)?.code == "mcp_member_ambiguous")
        #expect(refusal(#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping","mEthod":"tools/call"}]"#)?.code == "mcp_member_ambiguous")
        #expect(refusal(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"Name":"b","name":"c"}}}"#) == nil)
        // A response's params are read by nobody (no method, once folded, so no server takes it for a request):
        // members there that fold alike decide nothing (the fuzzer's find, its oracle now the same).
        #expect(refusal(#"[{"jsonrpc":"2.0","id":2,"result":{},"Methvvv":"resources/read","params":{"Uri":"","uri":"x"}}]"#) == nil)
        #expect(refusal(#"[{"jsonrpc":"2.0","id":2,"result":{},"Method":"resources/read","params":{"Uri":""}}]"#)?.code == "mcp_member_ambiguous")
        // A control character in the method or the name it acts on: refused, whatever the rules.
        #expect(refusal(#"{"jsonrpc":"2.0","id":1,"method":"tools/call\u0000","params":{"name":"a"}}"#)?.code == "mcp_invalid_request")
        #expect(refusal(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x\u0000_read"}}"#)?.code == "mcp_invalid_request")
        #expect(refusal(#"{"jsonrpc":"2.0","id":1,"method":"ping\n"}"#)?.code == "mcp_invalid_request")
    }
}
