import Foundation
import JOSE
import MCPPolicy
import Testing

/// Issue 64 §1: whatever JSON decoder an MCP server uses, it reads the method, name, URI and id
/// the gateway decided on and logged. The server here is Go's `encoding/json` (names matched in
/// any case with Unicode's simple folding, the last match winning); exact duplicates, which
/// first- or last-wins decoders would split on, are refused by the strict reader.
@Suite("MCP routes: one reading of a body, whatever the server's decoder", .enabled(if: GoDecoderServer.enabled))
struct MCPDecoderDifferentialTests {
    /// search_* for anyone, nothing else among tools; resources under file:///public/ only.
    static let policy = MCPCallPolicy(
        tools: [MCPRule(pattern: NamePattern("search_*")!)], resources: [MCPRule(pattern: NamePattern("file:///public/*")!)], maximumBodyBytes: 8192)

    static func withGateway(_ body: (GatewayFixture, GoDecoderServer, String) async throws -> Void) async throws {
        let server = try await GoDecoderServer()
        defer { server.stop() }
        let fixture = try await GatewayFixture { configuration in
            configuration.routes = [try! MCPRouteTests.mcpRoute("/mcp/gh", upstream: server.port, scopes: ["tools"], policy: Self.policy, base: "/mcp")]
        }
        defer { Task { try? await fixture.stop() } }
        try await body(fixture, server, try MCPToolPolicyTests.token(fixture, groups: ["staff"]))
    }

    @Test(
        "a body with a member another decoder would read in place of the one decided on (Name beside name, Method beside or instead of method, mEthod, paramſ, PARAMS, ID, URI, a ref's Name, in a batch too) is 400 -32600 mcp_member_ambiguous, and the Go server never hears of it"
    )
    func ambiguousMembersRefused() async throws {
        try await Self.withGateway { fixture, server, token in
            let bodies = [
                #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_issues","Name":"delete_repository"}}"#,
                #"{"jsonrpc":"2.0","id":2,"method":"ping","Method":"tools/call","params":{"name":"drop_tables"}}"#,
                #"{"jsonrpc":"2.0","id":3,"mEthod":"tools/call","method":"ping","params":{"name":"drop_tables"}}"#,
                #"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"search_issues"},"paramſ":{"name":"drop_tables"}}"#,
                #"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"search_issues"},"param\u017f":{"name":"drop_tables"}}"#,
                #"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"search_issues"},"PARAMS":{"name":"drop_tables"}}"#,
                // No `method` at all: the gateway would read a response; Go reads a call.
                #"{"jsonrpc":"2.0","id":7,"result":{},"Method":"tools/call","params":{"name":"drop_tables"}}"#,
                #"{"jsonrpc":"2.0","id":8,"ID":9,"method":"tools/call","params":{"name":"search_issues"}}"#,
                #"{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"file:///public/a","URI":"file:///secret/b"}}"#,
                #"{"jsonrpc":"2.0","id":11,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///public/a","Uri":"file:///secret/b"},"argument":{"name":"a","value":""}}}"#,
                #"[{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"search_issues","nAme":"drop_tables"}}]"#,
                // Two members that fold alike, though the gateway reads neither (the Kelvin sign is k).
                #"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"search_issues","\u212Aey":1,"key":2}}"#,
            ]
            for body in bodies {
                let refused = try await fixture.send(.POST, "/mcp/gh", bearer: token, body: body)
                #expect(refused.status == 400, "\(body): \(refused.raw)")
                let answer = try StrictJSONReader().parse(Array(refused.raw.utf8))
                let error = answer.objectValue?["error"]?.objectValue
                #expect(error?["code"] == -32600 && error?.value(atPath: ["data", "code"]) == "mcp_member_ambiguous", "\(body): \(refused.raw)")
            }
            // Exact duplicates (a first-wins and a last-wins decoder would disagree) are not JSON to the gateway.
            let duplicate = try await fixture.send(
                .POST, "/mcp/gh", bearer: token, body: #"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"search_issues","name":"drop_tables"}}"#)
            #expect(duplicate.status == 400 && duplicate.json.value(atPath: ["error", "code"]) == -32700, "\(duplicate.raw)")
            let heard = try server.calls()
            #expect(heard.isEmpty, "\(heard)")

            // What the gateway does not read (a tool's arguments) is the tool's, and camelCase members pass.
            let ordinary = [
                #"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"search_issues","arguments":{"name":"a","Name":"b"},"_meta":{"progressToken":1}}}"#,
                #"{"jsonrpc":"2.0","id":21,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
                #"{"jsonrpc":"2.0","id":22,"method":"resources/read","params":{"uri":"file:///public/a"}}"#,
            ]
            for body in ordinary {
                let passed = try await fixture.send(.POST, "/mcp/gh", bearer: token, body: body)
                #expect(passed.status == 200 && passed.json["result"] != nil, "\(body): \(passed.raw)")
            }
            #expect(try server.calls().map(\.description) == ["tools/call name=search_issues uri= ref=", "initialize name= uri= ref=", "resources/read name= uri=file:///public/a ref="])
        }
    }

    @Test("every spelling and order of a second method, params and name beside the real ones: what the gateway forwards, Go reads as the call it allowed (tools/call search_issues), and only bodies with no second spelling are forwarded")
    func everySpellingReadAlike() async throws {
        try await Self.withGateway { fixture, server, token in
            let methods: [String?] = [nil, "Method", "METHOD", "mEthod", "method\u{17F}"]
            let params: [String?] = [nil, "Params", "paramſ", #"param\u017F"#, "PARAMS"]
            let names: [String?] = [nil, "Name", "nAme", "NAME"]
            var forwarded = 0
            var id = 100
            for method in methods {
                for param in params {
                    for name in names {
                        for extrasFirst in [false, true] {
                            id += 1
                            let inner = ["\"name\":\"search_issues\""] + (name.map { ["\"\($0)\":\"drop_tables\""] } ?? [])
                            var outer = ["\"jsonrpc\":\"2.0\"", "\"id\":\(id)", "\"method\":\"tools/call\""]
                            var extras: [String] = []
                            if let method { extras.append("\"\(method)\":\"ping\"") }
                            if let param { extras.append("\"\(param)\":{\"name\":\"drop_tables\"}") }
                            let paramsMember = "\"params\":{" + (extrasFirst ? inner.reversed() : inner).joined(separator: ",") + "}"
                            outer = extrasFirst ? extras + outer + [paramsMember] : outer + [paramsMember] + extras
                            let body = "{" + outer.joined(separator: ",") + "}"
                            let before = try server.calls().count
                            let answer = try await fixture.send(.POST, "/mcp/gh", bearer: token, body: body)
                            let heard = try server.calls()
                            if heard.count > before {
                                forwarded += 1
                                #expect(heard.count == before + 1 && heard.last?.description == "tools/call name=search_issues uri= ref=", "\(body): \(heard.last.map(String.init(describing:)) ?? "")")
                            } else {
                                #expect(answer.status == 400, "\(body): \(answer.raw)")
                            }
                        }
                    }
                }
            }
            // The plain body, and the one beside `methodſ` (which folds to `methods`, another name,
            // that Go too leaves alone), each in both orders.
            #expect(forwarded == 4, "only the bodies with no second spelling pass: \(forwarded)")
        }
    }
}
