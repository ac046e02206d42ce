import ConfigurationReading
import DataPlane
import Foundation
import Gateway
import Hummingbird
import JOSE
import Logging
import MCPPolicy
import MCPResource
import NIOCore
import NIOHTTP1
import Synchronization
import Testing
import TrafficCop

/// An MCP server stand-in for list answers: `/json` answers a `tools/list` as JSON, `/sse` as an
/// event stream (a progress notification, then the response, in pieces), each with the request's
/// id and four tools; any other call is answered with what was called. Counts the calls it got.
enum ListingUpstream {
    final class Calls: Sendable {
        private let list = Mutex<[String]>([])
        func append(_ call: String) { list.withLock { $0.append(call) } }
        var all: [String] { list.withLock { $0 } }
    }

    static let tools = #"[{"name":"search_issues","inputSchema":{"type":"object"}},{"name":"delete_repository","inputSchema":{"type":"object"}},{"name":"drop_tables"},{"name":"search_code"}]"#

    static func start(recording calls: Calls) async throws -> BackgroundServer {
        let router = Router()
        let handler: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            let body = try await request.body.collect(upTo: 1 << 20)
            let message = try StrictJSONReader().parseObject(Array(body.readableBytesView))
            let method = message["method"]?.stringValue ?? ""
            let name = message.value(atPath: ["params", "name"])?.stringValue
            calls.append(method + (name.map { " " + $0 } ?? ""))
            let id = String(decoding: JSONWriter.bytes(message["id"] ?? .null), as: UTF8.self)
            let result = method == "tools/list" ? #"{"tools":\#(tools)}"# : #"{"content":[{"type":"text","text":"ran \#(name ?? method)"}]}"#
            let answer = #"{"jsonrpc":"2.0","id":\#(id),"result":\#(result)}"#
            guard request.uri.path == "/sse" else {
                return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: answer)))
            }
            let events = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\nevent: message\ndata: " + answer + "\n\n"
            let bytes = Array(events.utf8)
            return Response(
                status: .ok, headers: [.contentType: "text/event-stream"],
                body: ResponseBody { writer in
                    // In pieces that cut events and lines apart.
                    var index = 0
                    while index < bytes.count {
                        try await writer.write(ByteBuffer(bytes: bytes[index..<min(index + 37, bytes.count)]))
                        index += 37
                        try await Task.sleep(for: .milliseconds(5))
                    }
                    try await writer.finish(nil)
                })
        }
        router.post("/json", use: handler)
        router.post("/sse", use: handler)
        return try await BackgroundServer.start { onPort in
            Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await onPort($0.localAddress?.port ?? 0) }, logger: Logger(label: "test.listing-upstream"))
        }
    }
}

@Suite("MCP routes: a policy per tool, decided before the server hears of a call")
struct MCPToolPolicyTests {
    /// search_* for anyone; delete_repository for admins holding github:admin; nothing else.
    static let policy = MCPCallPolicy(tools: [
        MCPRule(pattern: NamePattern("search_*")!),
        MCPRule(pattern: NamePattern("delete_repository")!, policy: RoutePolicy(anyOf: [RoutePolicy.ClaimRule(path: "groups", contains: "admins")!]), scopes: ["github:admin"]),
    ], maximumBodyBytes: 4096)

    static func token(_ fixture: GatewayFixture, groups: [String], scope: String = "tools") throws -> String {
        let issuer = AccessTokenIssuer(keys: fixture.keys, issuer: MCPRouteTests.publicURL, audience: MCPRouteTests.publicURL + "/mcp/gh", lifetime: 300)
        let token = try issuer.issue(
            subject: "usr_mcpcaller0001", tenantID: "default", clientID: "https://client.example/agent.json", scope: scope, additionalClaims: ["groups": .array(groups.map(JSONValue.string))]
        ).token
        fixture.remember(token)
        return token
    }

    static func call(_ tool: String, id: String = "1") -> String {
        #"{"jsonrpc":"2.0","id":\#(id),"method":"tools/call","params":{"name":"\#(tool)","arguments":{"secret_argument":"s3cr3t"}}}"#
    }

    static func fixture(upstream: Int, base: String = "/json") async throws -> GatewayFixture {
        try await GatewayFixture { configuration in
            configuration.routes = [try! MCPRouteTests.mcpRoute("/mcp/gh", upstream: upstream, scopes: ["tools"], policy: Self.policy, base: base)]
        }
    }

    @Test("mcp as a map reads its rules in order (name or uri, require, scopes), methods and max_body_bytes; a rule's scopes join scopes_supported; a rule that can never match, scopes inside require, an unknown key or a standard method in methods stop start, named")
    func configuration() async throws {
        let routes = try await RoutePolicyTests.routes(
            """
                - prefix: /mcp/github
                  upstream: http://127.0.0.1:9100/mcp
                  require: {scopes: [tools]}
                  mcp:
                    tools:
                      - name: "search_*"
                      - name: delete_repository
                        require: {any_of: [{claim: groups, contains: admins}]}
                        scopes: [github:admin]
                    resources:
                      - uri: "file:///public/*"
                    methods: ["x-acme/*"]
                    max_body_bytes: 65536
                - {prefix: /mcp/none, upstream: http://127.0.0.1:9100/mcp, mcp: {tools: []}}
              public_url: https://auth.example.com

            """)
        let policy = try #require(routes[0].mcpPolicy)
        #expect(policy.tools?.map(\.pattern.text) == ["search_*", "delete_repository"] && policy.tools?[1].scopes == ["github:admin"])
        #expect(policy.tools?[1].policy?.anyOf.first?.claim == "groups" && policy.resources?.first?.pattern.text == "file:///public/*")
        #expect(policy.methods.map(\.text) == ["x-acme/*"] && policy.maximumBodyBytes == 65536 && policy.prompts == nil)
        #expect(routes[0].mcp?.supportedScopes == ["tools", "github:admin"] && routes[0].mcp?.scopes == ["tools"])
        #expect(routes[1].mcpPolicy?.tools?.isEmpty == true)
        let mistakes: [(String, String)] = [
            ("mcp: {tools: [{name: '*'}, {name: search}]}", "can never decide"),
            ("mcp: {tools: [{name: search}, {name: search}]}", "can never decide"),
            ("mcp: {tools: [{name: x, require: {scopes: [a]}}]}", "belongs beside require"),
            ("mcp: {tools: [{name: x, when: y}]}", "is not a setting of an MCP tool rule"),
            ("mcp: {resources: [{name: x}]}", "is not a setting of an MCP resource rule"),
            ("mcp: {tools: [{require: {tenants: [a]}}]}", "is required"),
            ("mcp: {methods: [tools/call]}", "decides already"),
            ("mcp: {max_body_bytes: 10}", "must be from"),
            ("mcp: {tool: []}", "is not a setting of an MCP route"),
        ]
        for (setting, fragment) in mistakes {
            let error = await #expect(throws: ConfigurationError.self, "\(setting)") {
                _ = try await RoutePolicyTests.routes("    - {prefix: /mcp, upstream: http://127.0.0.1:1, \(setting)}\n")
            }
            #expect(error?.message.contains("gateway.routes[0].mcp") == true && error?.message.contains(fragment) == true, "\(setting): \(error?.message ?? "no error")")
        }
    }

    @Test("a tool a rule allows is forwarded with its body intact; one no rule names, or whose require fails, is a JSON-RPC error with the request's id that the server never hears of; a missing rule scope is 403 insufficient_scope naming every scope needed and the metadata")
    func decisions() async throws {
        let calls = ListingUpstream.Calls()
        let upstream = try await ListingUpstream.start(recording: calls)
        let fixture = try await Self.fixture(upstream: upstream.port)
        defer { Task { try? await fixture.stop() } }
        let staff = try Self.token(fixture, groups: ["staff"])
        let admin = try Self.token(fixture, groups: ["admins"])

        let allowed = try await fixture.send(.POST, "/mcp/gh", bearer: staff, body: Self.call("search_issues"))
        #expect(allowed.status == 200 && allowed.json.value(atPath: ["result", "content"]) != nil, "\(allowed.raw)")
        #expect(calls.all == ["tools/call search_issues"])

        for (token, tool, id) in [(staff, "drop_tables", #""d1""#), (staff, "delete_repository", "42")] {
            let refused = try await fixture.send(.POST, "/mcp/gh", bearer: token, body: Self.call(tool, id: id))
            #expect(refused.status == 200 && refused.headers.first(name: "content-type") == "application/json", "\(refused.raw)")
            #expect(refused.json["jsonrpc"] == "2.0" && refused.json["id"] == (id == "42" ? 42 : "d1"), "\(refused.raw)")
            #expect(refused.json.value(atPath: ["error", "code"]) == .number(Double(JSONRPCErrorAnswer.refusedCode)))
            #expect(refused.json.value(atPath: ["error", "data", "code"]) == "mcp_tool_refused")
            #expect(refused.json.value(atPath: ["error", "message"])?.stringValue?.contains(tool) == true, "\(refused.raw)")
            // The refusal does not teach the rule: no claim or value that would pass; the log has it, under the answer's request id.
            #expect(!refused.raw.contains("admins") && !refused.raw.contains("groups"), "\(refused.raw)")
            if tool == "delete_repository" {
                let requestID = try #require(refused.headers.first(name: "x-request-id"), "the answer names its request id")
                let why = await fixture.log.lines(containing: "MCP call refused", requestID)
                #expect(why.first?.contains("this tool needs one of: groups containing admins") == true, "\(why)")
            }
        }
        let stepUp = try await fixture.send(.POST, "/mcp/gh", bearer: admin, body: Self.call("delete_repository"))
        #expect(stepUp.status == 403 && stepUp.error == "insufficient_scope", "\(stepUp.raw)")
        let challenge = stepUp.headers.first(name: "www-authenticate") ?? ""
        #expect(
            challenge.contains(#"error="insufficient_scope""#) && challenge.contains(#"scope="tools github:admin""#)
                && challenge.contains(#"resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp/gh""#), "\(challenge)")
        let stepped = try Self.token(fixture, groups: ["admins"], scope: "tools github:admin")
        #expect(try await fixture.send(.POST, "/mcp/gh", bearer: stepped, body: Self.call("delete_repository")).status == 200)
        #expect(calls.all == ["tools/call search_issues", "tools/call delete_repository"])

        // The access log: who, which client, what, the decision; never the arguments or the token.
        let lines = await fixture.log.lines(containing: #""mcp_decision":"mcp_tool_refused""#, #""mcp_name":"drop_tables""#)
        let line = try #require(lines.first)
        #expect(line.contains(#""client_id":"https://client.example/agent.json""#) && line.contains(#""mcp_method":"tools/call""#) && line.contains(#""tenant_id":"default""#))
        #expect(line.contains(#""user_id":"usr_mcpcaller0001""#) && line.contains(#""status":200"#), "\(line)")
        #expect(await !fixture.log.lines(containing: #""mcp_decision":"insufficient_scope""#).isEmpty)
        #expect(!fixture.log.text.contains("s3cr3t") && !fixture.log.text.contains(staff))
        // The metrics count calls by route, tool and decision.
        let metrics = try await fixture.send(.GET, "/metrics", port: fixture.adminPort).raw
        // Labelled by the rule that matched (a client chooses names: the labels are the configuration's), `_unlisted` for none.
        #expect(metrics.contains(#"portcullis_mcp_calls_total{route="/mcp/gh/**",method="tools/call",name="_unlisted",decision="mcp_tool_refused"} 1"#), "\(metrics.split(separator: "\n").filter { $0.contains("mcp") })")
        #expect(metrics.contains(#"portcullis_mcp_calls_total{route="/mcp/gh/**",method="tools/call",name="search_*",decision="allowed"} 1"#))
        // Counted again from each event loop's own table of handles: the same series, not a new one.
        for _ in 0..<2 { #expect(try await fixture.send(.POST, "/mcp/gh", bearer: staff, body: Self.call("search_issues")).status == 200) }
        let again = try await fixture.send(.GET, "/metrics", port: fixture.adminPort).raw
        #expect(again.contains(#"portcullis_mcp_calls_total{route="/mcp/gh/**",method="tools/call",name="search_*",decision="allowed"} 3"#), "\(again.split(separator: "\n").filter { $0.contains("mcp_calls") })")
    }

    @Test("raw: headers that disagree with the body are 400 HeaderMismatch (-32020), never forwarded; Base64-wrapped names are read; a batch mixing allowed and refused calls is refused whole; a body beyond max_body_bytes is 413, one with a content-encoding 415, one not JSON 400 (-32700)")
    func rawRequests() async throws {
        let calls = ListingUpstream.Calls()
        let upstream = try await ListingUpstream.start(recording: calls)
        let fixture = try await Self.fixture(upstream: upstream.port)
        defer { Task { try? await fixture.stop() } }
        let staff = try Self.token(fixture, groups: ["staff"])

        let disagreeing: [[(String, String)]] = [
            [("Mcp-Method", "tools/call"), ("Mcp-Name", "search_issues")],  // the body calls drop_tables
            [("Mcp-Method", "tools/list")],
            [("Mcp-Method", "tools/call")],
            [("Mcp-Method", "tools/call"), ("Mcp-Name", "=?base64?c2VhcmNoX2lzc3Vlcw==?=")],
            [("Mcp-Method", "tools/call"), ("Mcp-Name", "=?base64?not base64?=")],
        ]
        for headers in disagreeing {
            let refused = try await fixture.send(.POST, "/mcp/gh", bearer: staff, headers: headers, body: Self.call("drop_tables", id: "5"))
            #expect(refused.status == 400 && refused.json.value(atPath: ["error", "code"]) == -32020 && refused.json["id"] == 5, "\(headers): \(refused.raw)")
            #expect(refused.json.value(atPath: ["error", "data", "code"]) == "mcp_header_mismatch")
        }
        // The same name in the Base64 form (and a name only the Base64 form can carry) passes.
        let wrapped = try await fixture.send(
            .POST, "/mcp/gh", bearer: staff, headers: [("Mcp-Method", "tools/call"), ("Mcp-Name", "=?base64?c2VhcmNoX2lzc3Vlcw==?=")], body: Self.call("search_issues"))
        #expect(wrapped.status == 200, "\(wrapped.raw)")
        let unicode = try await fixture.send(
            .POST, "/mcp/gh", bearer: staff, headers: [("Mcp-Method", "tools/call"), ("Mcp-Name", "=?base64?c2VhcmNoX+S4lueVjA==?=")], body: Self.call("search_世界"))
        #expect(unicode.status == 200, "\(unicode.raw)")
        // An old-revision client sends no headers: the body decides.
        #expect(try await fixture.send(.POST, "/mcp/gh", bearer: staff, body: Self.call("search_code")).status == 200)
        #expect(calls.all == ["tools/call search_issues", "tools/call search_世界", "tools/call search_code"])

        let batch = "[" + Self.call("search_issues", id: "1") + "," + Self.call("drop_tables", id: "2") + "]"
        let refusedBatch = try await fixture.send(.POST, "/mcp/gh", bearer: staff, body: batch)
        #expect(refusedBatch.status == 200, "\(refusedBatch.raw)")
        let answers = try StrictJSONReader().parse(Array(refusedBatch.raw.utf8))
        guard case .array(let errors) = answers, errors.count == 2 else {
            Issue.record("not two answers: \(refusedBatch.raw)")
            return
        }
        #expect(errors[0].objectValue?.value(atPath: ["error", "data", "code"]) == "mcp_batch_refused" && errors[1].objectValue?["id"] == 2)
        #expect(calls.all.count == 3)

        let large = #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_issues","arguments":{"text":""# + String(repeating: "x", count: 5000) + #""}}}"#
        let tooLarge = try await fixture.send(.POST, "/mcp/gh", bearer: staff, body: large)
        #expect(tooLarge.status == 413 && tooLarge.error == "mcp_body_too_large", "\(tooLarge.raw)")
        for encoding in [[("Content-Encoding", "gzip")], [("Content-Encoding", "identity, gzip")], [("Content-Encoding", "identity"), ("Content-Encoding", "br")]] {
            let encoded = try await fixture.send(.POST, "/mcp/gh", bearer: staff, headers: encoding, body: Self.call("search_issues"))
            #expect(encoded.status == 415 && encoded.error == "mcp_body_encoded", "\(encoding): \(encoded.raw)")
        }
        #expect(try await fixture.send(.POST, "/mcp/gh", bearer: staff, headers: [("Content-Encoding", "Identity")], body: Self.call("search_issues")).status == 200)
        for text in ["not json", #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_x","name":"drop_tables"}}"#] {
            let unreadable = try await fixture.send(.POST, "/mcp/gh", bearer: staff, body: text)
            #expect(unreadable.status == 400 && unreadable.json.value(atPath: ["error", "code"]) == -32700, "\(unreadable.raw)")
        }
        // A charset the server would decode otherwise (UTF-7 hides a second "method"), or another type, is never forwarded.
        for type in ["application/json; charset=utf-7", "application/json; charset=utf-16", "text/plain", "application/json;charset=utf-8;x=y", "application/jsonx", "", "application/json;"] {
            let refused = try await fixture.send(.POST, "/mcp/gh", bearer: staff, headers: [("Content-Type", type)], body: Self.call("search_issues"))
            #expect(refused.status == 415 && refused.error == "mcp_content_type", "\(type): \(refused.raw)")
        }
        #expect(try await fixture.send(.POST, "/mcp/gh", bearer: staff, headers: [("Content-Type", "Application/JSON; Charset=UTF-8")], body: Self.call("search_code")).status == 200)
        // Only POST carries a call: another method, a body on a GET, or a method override is refused.
        let put = try await fixture.send(.PUT, "/mcp/gh", bearer: staff, body: Self.call("drop_tables"))
        #expect(put.status == 405 && put.headers.first(name: "allow") == "DELETE, GET, HEAD, OPTIONS, POST", "\(put.raw)")
        // Without a token, and with a method no route lists: the same five, never PUT or PATCH.
        for (method, bearer) in [(HTTPMethod.PATCH, nil), (.PUT, nil), (.PROPFIND, staff), (.PROPFIND, nil)] as [(HTTPMethod, String?)] {
            let refused = try await fixture.send(method, "/mcp/gh", bearer: bearer)
            #expect(refused.status == 405 && refused.headers.first(name: "allow") == "DELETE, GET, HEAD, OPTIONS, POST", "\(method) \(bearer == nil ? "no token" : "token"): \(refused.raw)")
        }
        let getWithBody = try await fixture.send(.GET, "/mcp/gh", bearer: staff, body: Self.call("drop_tables"))
        #expect(getWithBody.status == 400, "\(getWithBody.raw)")
        for field in ["X-HTTP-Method-Override", "x-method-override", "X-HTTP-METHOD"] {
            let overridden = try await fixture.send(.POST, "/mcp/gh", bearer: staff, headers: [(field, "PUT")], body: Self.call("search_issues"))
            #expect(overridden.status == 400, "\(field): \(overridden.raw)")
        }
        // A resource URI in another form than its normal one is refused, not matched byte for byte.
        let dotted = try await fixture.send(.POST, "/mcp/gh", bearer: staff, body: #"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///docs/../etc/passwd"}}"#)
        #expect(dotted.status == 400 && dotted.json.value(atPath: ["error", "code"]) == -32600 && dotted.json["id"] == 3, "\(dotted.raw)")
        #expect(calls.all.count == 5)
    }

    @Test("the methods of every revision pass (server/discover of 2026-07-28 among them); another is Method not found (-32601, mcp_method_refused): HTTP 404 to a client of 2026-07-28, 200 to earlier ones and to one that names no revision, and the server never hears of it")
    func methodsOfEveryRevision() async throws {
        let calls = ListingUpstream.Calls()
        let upstream = try await ListingUpstream.start(recording: calls)
        let fixture = try await Self.fixture(upstream: upstream.port)
        defer { Task { try? await fixture.stop() } }
        let staff = try Self.token(fixture, groups: ["staff"])
        let discover = try await fixture.send(
            .POST, "/mcp/gh", bearer: staff, headers: [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "server/discover")],
            body: #"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#)
        #expect(discover.status == 200 && discover.json["result"] != nil, "\(discover.raw)")
        let unknown = #"{"jsonrpc":"2.0","id":2,"method":"x-acme/reset","params":{}}"#
        for (version, status) in [("2026-07-28", 404), ("2026-12-01", 404), ("2025-11-25", 200), ("2025-06-18", 200), (nil, 200), ("garbage", 200)] {
            let refused = try await fixture.send(.POST, "/mcp/gh", bearer: staff, headers: version.map { [("MCP-Protocol-Version", $0)] } ?? [], body: unknown)
            #expect(refused.status == status, "\(version ?? "none"): \(refused.raw)")
            #expect(refused.json.value(atPath: ["error", "code"]) == -32601 && refused.json.value(atPath: ["error", "data", "code"]) == "mcp_method_refused" && refused.json["id"] == 2, "\(refused.raw)")
        }
        // A refused tool keeps the policy's own code, whatever the revision.
        let tool = try await fixture.send(.POST, "/mcp/gh", bearer: staff, headers: [("MCP-Protocol-Version", "2026-07-28")], body: Self.call("drop_tables"))
        #expect(tool.status == 200 && tool.json.value(atPath: ["error", "code"]) == -31403, "\(tool.raw)")
        #expect(calls.all == ["server/discover"])
    }

    @Test("a filtered list's answer that is not exactly one JSON-RPC response with the request's id is refused (502) or its stream ends: two Content-Type fields, a top-level array, another id, a notification, Tools beside tools, an SSE event never finished; a tools/list sent as a notification is refused before the server hears of it; on a filtering route another request's answer carrying a response to another id is refused or ended, its own passes")
    func listAnswersNeverFailOpen() async throws {
        let list = #"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"drop_tables"},{"name":"search_code"}]}}"#
        func json(_ body: String, contentTypes: [String] = ["application/json"]) -> ScriptedUpstream.Answer {
            .init("HTTP/1.1 200 OK\r\n" + contentTypes.map { "Content-Type: \($0)\r\n" }.joined() + "Content-Length: \(body.utf8.count)\r\n\r\n" + body, close: true)
        }
        let answers: [String: ScriptedUpstream.Answer] = [
            "/two-types": json(list, contentTypes: ["application/json", "text/event-stream"]),
            "/jsonx": json(list, contentTypes: ["application/jsonx"]),
            "/array": json("[" + list + "]"),
            "/other-id": json(list.replacingOccurrences(of: #""id":7"#, with: #""id":8"#)),
            "/notification": json(#"{"jsonrpc":"2.0","method":"notifications/message","params":{"tools":[{"name":"drop_tables"}]}}"#),
            "/loose": json(#"{"jsonrpc":"2.0","id":7,"result":{"tools":[],"Tools":[{"name":"drop_tables"}]}}"#),
            "/unfinished": .init("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + {
                let event = "data: " + list
                return String(event.utf8.count, radix: 16) + "\r\n" + event + "\r\n0\r\n\r\n"
            }(), close: true),
            "/plain": json(list),
            "/sse": .init("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + {
                let event = "data: " + list + "\n\n"
                return String(event.utf8.count, radix: 16) + "\r\n" + event + "\r\n0\r\n\r\n"
            }(), close: true),
        ]
        let upstream = try ScriptedUpstream(answers: answers)
        defer { upstream.stop() }
        let routes = try answers.keys.sorted().map { path in
            try MCPRouteTests.mcpRoute("/mcp" + path, upstream: upstream.port, scopes: ["tools"], policy: Self.policy, base: path)
        }
        let fixture = try await GatewayFixture { configuration in configuration.routes = routes }
        defer { Task { try? await fixture.stop() } }
        let request = #"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#
        for path in answers.keys.sorted() {
            let token = try MCPRouteTests.token(fixture, audience: MCPRouteTests.publicURL + "/mcp" + path, scope: "tools")
            let answer = try await fixture.send(.POST, "/mcp" + path, bearer: token, body: request)
            switch path {
            case "/plain", "/sse":
                #expect(answer.status == 200 && answer.raw.contains("search_code") && !answer.raw.contains("drop_tables"), "\(path): \(answer.raw)")
            case "/unfinished":
                #expect(!answer.raw.contains("drop_tables"), "\(path): an event never finished is dropped, not passed unread: \(answer.raw)")
            default:
                #expect(answer.status == 502 && answer.error == "mcp_answer_unfilterable" && !answer.raw.contains("drop_tables"), "\(path): \(answer.raw)")
            }
        }
        let token = try MCPRouteTests.token(fixture, audience: MCPRouteTests.publicURL + "/mcp/plain", scope: "tools")
        let before = upstream.requestHeads.count
        let notification = try await fixture.send(.POST, "/mcp/plain", bearer: token, body: #"{"jsonrpc":"2.0","method":"tools/list","params":{}}"#)
        #expect(notification.status == 403 && notification.error == "mcp_list_refused", "\(notification.raw)")
        #expect(upstream.requestHeads.count == before)
        // Another request's answer (a ping's) carrying the list's response to id 7: refused as JSON, its stream ended as SSE.
        for path in ["/plain", "/sse"] {
            let token = try MCPRouteTests.token(fixture, audience: MCPRouteTests.publicURL + "/mcp" + path, scope: "tools")
            let ping = try await fixture.send(.POST, "/mcp" + path, bearer: token, body: #"{"jsonrpc":"2.0","id":9,"method":"ping"}"#)
            #expect(!ping.raw.contains("drop_tables") && (path == "/sse" || (ping.status == 502 && ping.error == "mcp_answer_unfilterable")), "\(path): \(ping.raw)")
            // Its own response passes as it came.
            let own = try await fixture.send(.POST, "/mcp" + path, bearer: token, body: #"{"jsonrpc":"2.0","id":7,"method":"ping"}"#)
            #expect(own.status == 200 && own.raw.contains("drop_tables"), "\(path): \(own.raw)")
        }
    }

    @Test("a tools/list answer is filtered to the tools the caller may call, as JSON (its length rewritten) and as SSE (event by event, other events as they came); a tool whose scope the client lacks is still listed, for a step-up")
    func listFiltering() async throws {
        let calls = ListingUpstream.Calls()
        let upstream = try await ListingUpstream.start(recording: calls)
        let json = try await Self.fixture(upstream: upstream.port, base: "/json")
        defer { Task { try? await json.stop() } }
        let list = #"{"jsonrpc":"2.0","id":"L1","method":"tools/list"}"#
        let staff = try Self.token(json, groups: ["staff"])
        let admin = try Self.token(json, groups: ["admins"])
        let staffList = try await json.send(.POST, "/mcp/gh", bearer: staff, body: list)
        #expect(staffList.status == 200 && staffList.headers.first(name: "content-length") == String(staffList.raw.utf8.count), "\(staffList.raw)")
        let names = { (answer: Answer) -> [String] in
            guard case .array(let tools)? = answer.json.value(atPath: ["result", "tools"]) else { return [] }
            return tools.compactMap { $0.objectValue?["name"]?.stringValue }
        }
        #expect(names(staffList) == ["search_issues", "search_code"], "\(staffList.raw)")
        #expect(names(try await json.send(.POST, "/mcp/gh", bearer: admin, body: list)) == ["search_issues", "delete_repository", "search_code"])

        let sse = try await Self.fixture(upstream: upstream.port, base: "/sse")
        defer { Task { try? await sse.stop() } }
        let streamed = try await sse.send(.POST, "/mcp/gh", bearer: try Self.token(sse, groups: ["staff"]), headers: [("Accept", "application/json, text/event-stream")], body: list)
        #expect(streamed.status == 200 && streamed.headers.first(name: "content-type") == "text/event-stream", "\(streamed.raw)")
        #expect(streamed.raw.hasPrefix("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n"), "\(streamed.raw)")
        #expect(streamed.raw.contains(#""tools":[{"name":"search_issues","inputSchema":{"type":"object"}},{"name":"search_code"}]"#), "\(streamed.raw)")
        #expect(!streamed.raw.contains("drop_tables") && !streamed.raw.contains("delete_repository"))
    }

    @Test("traceparent goes to the MCP server as the client sent it; without one (or with an invalid one) the gateway starts one, and the access log line carries its trace id")
    func traceContext() async throws {
        let upstream = try await RecordingUpstream.start()
        let port = upstream.port
        let fixture = try await GatewayFixture { configuration in configuration.routes = [try! MCPRouteTests.mcpRoute("/mcp/gh", upstream: port)] }
        defer { Task { try? await fixture.stop() } }
        let token = try MCPRouteTests.token(fixture, audience: MCPRouteTests.publicURL + "/mcp/gh")
        let sent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let passed = try await fixture.send(.POST, "/mcp/gh", bearer: token, headers: [("traceparent", sent), ("tracestate", "a=b")], body: MCPRouteTests.ping)
        #expect(passed.receivedHeaders["traceparent"] == [sent] && passed.receivedHeaders["tracestate"] == ["a=b"], "\(passed.raw)")
        #expect(await !fixture.log.lines(containing: #""trace_id":"4bf92f3577b34da6a3ce929d0e0e4736""#).isEmpty)
        var startedValues: [String] = []
        for headers in [[], [("traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"), ("tracestate", "a=b")], []] {
            let started = try await fixture.send(.POST, "/mcp/gh", bearer: token, headers: headers, body: MCPRouteTests.ping)
            let value = try #require(started.receivedHeaders["traceparent"]?.first)
            #expect(started.receivedHeaders["traceparent"]?.count == 1 && started.receivedHeaders["tracestate"] == nil, "\(started.raw)")
            // 00-<32 lower-case hex>-<16 lower-case hex>-01, neither id all zeros.
            let parts = value.split(separator: "-", omittingEmptySubsequences: false)
            let isHex = { (part: Substring) in part.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) } }
            #expect(parts.count == 4 && parts[0] == "00" && parts[1].count == 32 && parts[2].count == 16 && parts[3] == "01", "\(value)")
            #expect(parts.count == 4 && isHex(parts[1]) && isHex(parts[2]) && parts[1].contains { $0 != "0" } && parts[2].contains { $0 != "0" }, "\(value)")
            if parts.count == 4 { #expect(await !fixture.log.lines(containing: #""trace_id":"\#(parts[1])""#).isEmpty) }
            startedValues.append(value)
        }
        #expect(Set(startedValues).count == startedValues.count, "each started trace is a new one: \(startedValues)")
    }
}
