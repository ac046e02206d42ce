import JOSE
import MCPPolicy
import Testing
import TrafficCop

@Suite("MCP call policy: bodies read strictly, headers checked against them, rules per tool")
struct MCPPolicyTests {
    static func body(_ text: String) throws -> MCPBody { try MCPBody.read(Array(text.utf8)) }
    static let admins: JSONObject = ["sub": "usr_a", "groups": ["admins"], "scope": "tools"]
    static let staff: JSONObject = ["sub": "usr_b", "groups": ["staff"], "scope": "tools"]

    static let policy = MCPCallPolicy(
        tools: [
            MCPRule(pattern: NamePattern("search_*")!),
            MCPRule(pattern: NamePattern("delete_repository")!, policy: RoutePolicy(anyOf: [RoutePolicy.ClaimRule(path: "groups", contains: "admins")!]), scopes: ["github:admin"]),
        ],
        resources: [MCPRule(pattern: NamePattern("file:///public/*")!)])

    func decide(_ text: String, _ claims: JSONObject = admins, policy: MCPCallPolicy = policy) throws -> MCPDecision {
        try policy.decide(Self.body(text), claims: claims, tenantID: "default", issuer: nil, hasSession: false, routeScopes: ["tools"]).body
    }

    @Test("notifications/elicitation/complete goes only to a stream that names one revision that has it (2025-11-25): not 2025-06-18, not 2026-07-28 (which took it away), not two versions or none, not a version that is not a date")
    func elicitationCompleteRevisions() {
        #expect(MCPProtocolRevision.hearsElicitationComplete(["2025-11-25"]))
        for values in [["2025-06-18"], ["2026-07-28"], ["2027-01-01"], [], ["2025-11-25", "2025-11-25"], ["2025-11-25x"], ["2025-1l-25"]] {
            #expect(!MCPProtocolRevision.hearsElicitationComplete(values), "\(values)")
        }
        let notice = JSONWriter.string(URLElicitationAnswer.completion(elicitationID: "e-1\"x"))
        #expect(notice.contains(#""method":"notifications/elicitation/complete""#) && notice.contains(#""elicitationId":"e-1\"x""#) && !notice.contains("\n"))
    }

    @Test("a glob's * stands for any run of characters, nothing else is special, and names are compared byte for byte")
    func namePatterns() throws {
        let search = try #require(NamePattern("search_*"))
        #expect(search.matches("search_") && search.matches("search_issues") && !search.matches("Search_issues") && !search.matches("xsearch_issues"))
        let middle = try #require(NamePattern("a*b*c"))
        #expect(middle.matches("abc") && middle.matches("aXXbYYc") && !middle.matches("acb") && !middle.matches("ab"))
        #expect(NamePattern("get?")!.matches("get?") && !NamePattern("get?")!.matches("getx"))
        #expect(NamePattern("*")!.matches("") && NamePattern("") == nil)
        // A name another way spelled (é composed or not) is another name.
        #expect(!NamePattern("caf\u{E9}")!.matches("cafe\u{301}"))
        #expect(NamePattern("*")!.covers(search) && search.covers(NamePattern("search_x")!) && !search.covers(NamePattern("search_*x")!))
    }

    @Test("a body is read strictly: a duplicate member, invalid UTF-8, trailing data, a non-2.0 message, a call without its name, a null id are refused with JSON-RPC's codes")
    func strictBodies() throws {
        let call = try Self.body(#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_issues","arguments":{"q":"x"}}}"#)
        #expect(call == .single(MCPMessage(kind: .request, id: 7, method: "tools/call", name: "search_issues")))
        // Escapes decode: the name the server reads is the name decided on.
        #expect(try Self.body(#"{"jsonrpc":"2.0","id":"a","method":"tools\/call","params":{"name":"delete\u005frepository"}}"#).messages[0].name == "delete_repository")
        #expect(try Self.body(#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).messages[0].kind == .notification)
        #expect(try Self.body(#"{"jsonrpc":"2.0","id":3,"result":{}}"#).messages[0].kind == .response)
        let refused: [(String, MCPBodyError.Kind)] = [
            (#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_x","name":"delete_repository"}}"#, .parse),
            (#"{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"x"}}"#, .parse),
            (#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#, .parse),
            ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\u{FFFD}\\ud800\"}", .parse),
            (#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, .invalidRequest),
            (#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#, .invalidRequest),
            (#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#, .invalidRequest),
            (#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, .invalidRequest),
            (#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, .invalidRequest),
            (#"{"jsonrpc":"2.0","id":1}"#, .invalidRequest),
            (#"[]"#, .invalidRequest),
            (#""ping""#, .invalidRequest),
            ("", .parse),
        ]
        for (text, kind) in refused {
            let error = #expect(throws: MCPBodyError.self, "\(text)") { _ = try Self.body(text) }
            #expect(error?.kind == kind, "\(text): \(String(describing: error))")
        }
        var bytes = Array(#"{"jsonrpc":"2.0","id":1,"method":"ping","x":"?"}"#.utf8)
        bytes[bytes.count - 3] = 0xFF
        #expect(throws: MCPBodyError.self) { _ = try MCPBody.read(bytes) }
        let deep = String(repeating: "[", count: 70) + String(repeating: "]", count: 70)
        #expect(throws: MCPBodyError.self) { _ = try Self.body(#"{"jsonrpc":"2.0","id":1,"method":"ping","params":"# + deep + "}") }
        let batch = "[" + Array(repeating: #"{"jsonrpc":"2.0","method":"notifications/x"}"#, count: 65).joined(separator: ",") + "]"
        #expect(throws: MCPBodyError.self) { _ = try Self.body(batch) }
    }

    @Test("Mcp-Method and Mcp-Name must agree with the body: a different method or name, a missing name beside the method, a batch, two values or bad Base64 are HeaderMismatch (-32020)")
    func headerAgreement() throws {
        let call = try Self.body(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_issues"}}"#)
        #expect(MCPRequestHeaders().mismatch(with: call) == nil)
        #expect(MCPRequestHeaders(methods: ["tools/call"], names: ["search_issues"]).mismatch(with: call) == nil)
        let encoded = "=?base64?" + "c2VhcmNoX2lzc3Vlcw==" + "?="  // search_issues
        #expect(MCPRequestHeaders(methods: ["tools/call"], names: [encoded]).mismatch(with: call) == nil)
        let unicode = try Self.body(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Hello, 世界"}}"#)
        #expect(MCPRequestHeaders(methods: ["tools/call"], names: ["=?base64?SGVsbG8sIOS4lueVjA==?="]).mismatch(with: unicode) == nil)
        let mismatches: [MCPRequestHeaders] = [
            MCPRequestHeaders(methods: ["tools/list"], names: []),
            MCPRequestHeaders(methods: ["tools/call"], names: ["delete_repository"]),
            MCPRequestHeaders(methods: ["tools/call"], names: []),
            MCPRequestHeaders(methods: ["Tools/Call"], names: ["search_issues"]),
            MCPRequestHeaders(methods: ["tools/call", "tools/call"], names: ["search_issues"]),
            MCPRequestHeaders(methods: ["tools/call"], names: ["=?base64?c2VhcmNoX2lzc3Vlcw?="]),
            MCPRequestHeaders(methods: ["tools/call"], names: ["=?base64?c2VhcmNoX2lzc3Vlcw=x?="]),
            MCPRequestHeaders(methods: ["tools/call"], names: ["=?base64?ZGVsZXRlX3JlcG9zaXRvcnk=?="]),
            MCPRequestHeaders(methods: [], names: ["delete_repository"]),
        ]
        for headers in mismatches {
            let error = headers.mismatch(with: call)
            #expect(error?.kind == .headerMismatch && error?.rpcCode == -32020 && error?.id == 1, "\(headers)")
        }
        let batch = try Self.body(#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
        #expect(MCPRequestHeaders(methods: ["ping"]).mismatch(with: batch)?.kind == .headerMismatch)
        // Mcp-Name is required beside Mcp-Method only where the transport requires it (tools/call, resources/read, prompts/get).
        let completion = try Self.body(#"{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}}"#)
        #expect(MCPRequestHeaders(methods: ["completion/complete"]).mismatch(with: completion) == nil)
        #expect(MCPRequestHeaders(methods: ["completion/complete"], names: ["q"]).mismatch(with: completion)?.kind == .headerMismatch)
        let read = try Self.body(#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a"}}"#)
        #expect(MCPRequestHeaders(methods: ["resources/read"]).mismatch(with: read)?.kind == .headerMismatch)
        #expect(MCPRequestHeaders.decodedName("=?base64?" + "_-8=" + "?=") == nil)
    }

    @Test("the first rule whose name matches decides: a listed tool is allowed, one no rule lists is refused, a rule's require refuses, its missing scope asks for a step-up naming the route's and the rule's scopes")
    func toolRules() throws {
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_issues"}}"#, Self.staff) == .allowed)
        guard case .refused(let unlisted) = try decide(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"drop_tables"}}"#) else {
            Issue.record("an unlisted tool passed")
            return
        }
        #expect(unlisted.code == "mcp_tool_refused" && unlisted.message.contains("drop_tables"))
        guard case .refused(let forbidden) = try decide(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repository"}}"#, Self.staff) else {
            Issue.record("a staff member passed the admins rule")
            return
        }
        // The agent learns which tool and that it is not theirs, never the claim that would pass; the log gets that.
        #expect(forbidden.message.contains("delete_repository") && !forbidden.message.contains("admins") && !forbidden.message.contains("route"))
        #expect(forbidden.detail?.contains("groups containing admins") == true && forbidden.detail?.contains("this tool needs") == true, "\(forbidden.detail ?? "-")")
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repository"}}"#) == .needsScopes(["tools", "github:admin"]))
        var holding = Self.admins
        holding["scope"] = "tools github:admin"
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repository"}}"#, holding) == .allowed)
        // Resources by URI; prompts unruled pass; the standard methods, notifications and responses pass; another method is refused unless listed.
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///public/a"}}"#) == .allowed)
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///etc/passwd"}}"#) != .allowed)
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"anything"}}"#) == .allowed)
        for method in ["initialize", "ping", "tools/list", "notifications/initialized", "notifications/cancelled"] {
            #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"\#(method)"}"#) == .allowed, "\(method)")
        }
        #expect(try decide(#"{"jsonrpc":"2.0","id":9,"result":{"action":"accept"}}"#) == .allowed)
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"x-acme/reindex"}"#) != .allowed)
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#) == .allowed)
        // A filtered list as a notification: no id to filter its answer by.
        #expect(try decide(#"{"jsonrpc":"2.0","method":"tools/list"}"#) == .refused(.init(code: "mcp_list_refused", message: "send tools/list as a request (with an id): its answer is filtered, and a notification's could not be")))
        #expect(try decide(#"{"jsonrpc":"2.0","method":"prompts/list"}"#) == .allowed)  // prompts are not filtered here
        var extended = Self.policy
        extended.methods = [NamePattern("x-acme/*")!]
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"x-acme/reindex"}"#, policy: extended) == .allowed)
        // No tool rules at all: every tool passes to the route's own policy.
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"drop_tables"}}"#, policy: MCPCallPolicy()) == .allowed)
        #expect(try decide(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#, policy: MCPCallPolicy(tools: [])) != .allowed)
        #expect(Self.policy.ruleScopes == ["github:admin"])
    }

    @Test("a batch is forwarded whole only when every message is allowed; a refused one refuses it all, each request answered (the refused with why, the others as not run); a missing scope anywhere asks for a step-up")
    func batches() throws {
        let allowed = #"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_a"}},{"jsonrpc":"2.0","method":"notifications/progress"}]"#
        #expect(try decide(allowed) == .allowed)
        let mixed = #"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_a"}},{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"drop_tables"}},{"jsonrpc":"2.0","method":"notifications/progress"}]"#
        let body = try Self.body(mixed)
        let (decision, decisions) = Self.policy.decide(body, claims: Self.admins, tenantID: "default", issuer: nil, hasSession: false, routeScopes: [])
        #expect(decision.label == "mcp_tool_refused")
        let answer = try StrictJSONReader().parse(try #require(JSONRPCErrorAnswer.refusal(for: body, decisions: decisions)))
        guard case .array(let errors) = answer else {
            Issue.record("not an array: \(answer)")
            return
        }
        #expect(errors.count == 2)
        #expect(errors[0].objectValue?["id"] == 1 && errors[0].objectValue?.value(atPath: ["error", "data", "code"]) == "mcp_batch_refused")
        #expect(errors[1].objectValue?["id"] == "two" && errors[1].objectValue?.value(atPath: ["error", "data", "code"]) == "mcp_tool_refused")
        #expect(errors[1].objectValue?.value(atPath: ["error", "code"]) == .number(Double(JSONRPCErrorAnswer.refusedCode)))
        let stepUp = #"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repository"}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"drop_tables"}}]"#
        #expect(try decide(stepUp) == .needsScopes(["tools", "github:admin"]))
    }

    @Test("a list answer keeps only the entries the caller may use, cut from the server's own bytes; other messages pass as they came, another id's response on the request's own answer does not")
    func listFiltering() throws {
        let filter = MCPListFilter(method: "tools/list", id: 4) { Self.policy.lists(name: $1, method: $0, claims: Self.staff, tenantID: "default", issuer: nil, hasSession: false) }
        let answer = #"{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"search_issues","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1.50}}}},{"name":"delete_repository","inputSchema":{}} , {"name":"drop_tables"},{"nameless":true}],"nextCursor":"c"}}"#
        let filtered = try #require(try filter.filtered(Array(answer.utf8)))
        #expect(String(decoding: filtered, as: UTF8.self) == #"{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"search_issues","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1.50}}}}],"nextCursor":"c"}}"#)
        // An admin keeps delete_repository (its missing scope is a step-up, not a refusal).
        let admin = MCPListFilter(method: "tools/list", id: 4) { Self.policy.lists(name: $1, method: $0, claims: Self.admins, tenantID: "default", issuer: nil, hasSession: false) }
        let kept = String(decoding: try #require(try admin.filtered(Array(answer.utf8))), as: UTF8.self)
        #expect(kept.contains("delete_repository") && !kept.contains("drop_tables"))
        // Another id's response is not this request's answer: never passed unread (the stream ends).
        #expect(throws: MCPListFilter.Unfilterable.notTheResponse) { _ = try filter.filtered(Array(#"{"jsonrpc":"2.0","id":5,"result":{"tools":[{"name":"drop_tables"}]}}"#.utf8)) }
        // A stream's filter (no id) filters every response.
        let stream = MCPListFilter(streamOf: ["tools/list"]) { Self.policy.lists(name: $1, method: $0, claims: Self.staff, tenantID: "default", issuer: nil, hasSession: false) }
        #expect(try stream.filtered(Array(#"{"jsonrpc":"2.0","id":5,"result":{"tools":[{"name":"drop_tables"}]}}"#.utf8)).map { String(decoding: $0, as: UTF8.self).contains("drop_tables") } == false)
        #expect(throws: JSONReadError.self) { _ = try filter.filtered(Array(#"{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"a","name":"b"}]}}"#.utf8)) }
        // A batch, or a member a loose decoder would read as result or tools, is never passed unread.
        #expect(throws: MCPListFilter.Unfilterable.batch) { _ = try filter.filtered(Array(("[" + answer + "]").utf8)) }
        #expect(throws: MCPListFilter.Unfilterable.ambiguous) { _ = try filter.filtered(Array(#"{"jsonrpc":"2.0","id":4,"result":{"tools":[],"Tools":[{"name":"drop_tables"}]}}"#.utf8)) }
        #expect(throws: MCPListFilter.Unfilterable.ambiguous) { _ = try filter.filtered(Array(#"{"jsonrpc":"2.0","id":4,"result":{"tools":[]},"Result":{"tools":[{"name":"drop_tables"}]}}"#.utf8)) }
        // On the request's own stream, a response to another id (`"4"` for `4`, which some clients take for it) is not passed.
        #expect(throws: MCPListFilter.Unfilterable.notTheResponse) { _ = try filter.filtered(Array(#"{"jsonrpc":"2.0","id":"4","result":{"tools":[{"name":"drop_tables"}]}}"#.utf8)) }
        // An entry a loose decoder reads another name of, and a list under another spelling.
        #expect(throws: MCPListFilter.Unfilterable.ambiguous) { _ = try filter.filtered(Array(#"{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"search_a","Name":"drop_tables"}]}}"#.utf8)) }
        let templates = MCPListFilter(method: "resources/templates/list", id: 4) { _, _ in false }
        #expect(throws: MCPListFilter.Unfilterable.ambiguous) { _ = try templates.filtered(Array(#"{"jsonrpc":"2.0","id":4,"result":{"resourcetemplates":[{"uriTemplate":"x"}]}}"#.utf8)) }
        // A whole JSON answer must be the request's response.
        #expect(try filter.filteredAnswer(Array(answer.utf8)) == filtered)
        for other in [#"{"jsonrpc":"2.0","id":5,"result":{"tools":[]}}"#, #"{"jsonrpc":"2.0","method":"x","params":{"tools":[]}}"#, "[" + answer + "]", "42", #"{"jsonrpc":"2.0","id":4}"#] {
            #expect(throws: (any Error).self, "\(other)") { _ = try filter.filteredAnswer(Array(other.utf8)) }
        }
        // Escaped member names are read as any client reads them.
        let escaped = #"{"jsonrpc":"2.0","id":4,"\u0072esult":{"tool\u0073":[{"name":"drop_tables"}]}}"#
        #expect(String(decoding: try #require(try filter.filtered(Array(escaped.utf8))), as: UTF8.self).contains("drop_tables") == false)
    }

    @Test("an SSE answer passes event by event, never in part, after the response too; the event with the list's response is filtered (its data lines rewritten), the others pass byte for byte, in whatever pieces they come; a response to another id after it ends the stream")
    func eventStreamFiltering() throws {
        let filter = MCPListFilter(method: "tools/list", id: "L") { Self.policy.lists(name: $1, method: $0, claims: Self.staff, tenantID: "default", issuer: nil, hasSession: false) }
        let progress = "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"tools\":[{\"name\":\"drop_tables\"}]}}\r\n\r\n"
        let response = "id: 7\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"L\",\ndata: \"result\":{\"tools\":[{\"name\":\"drop_tables\"},{\"name\":\"search_a\"}]}}\n\n"
        let after = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n"
        let stream = Array((": keepalive\n\n" + progress + response + after).utf8)
        for size in [1, 2, 7, 64, stream.count] {
            var events = MCPEventStreamFilter(filter: filter)
            var out: [UInt8] = []
            var index = 0
            while index < stream.count {
                let piece = stream[index..<min(index + size, stream.count)]
                let passed = try events.feed(piece)
                // Whatever passes ends at an event's end, after the response too.
                #expect(passed.isEmpty || passed.suffix(2) == [0x0A, 0x0A] || passed.suffix(4) == [0x0D, 0x0A, 0x0D, 0x0A], "\(size)")
                out += passed
                index += size
            }
            out += events.finish()
            let text = String(decoding: out, as: UTF8.self)
            #expect(text.hasPrefix(": keepalive\n\n" + progress), "\(size)")
            #expect(text.contains("id: 7\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"L\",\ndata: \"result\":{\"tools\":[{\"name\":\"search_a\"}]}}\n\n"), "\(size): \(text)")
            #expect(text.hasSuffix(after))
        }
        // After the list's response, a response to another id (a list nobody filtered) is not passed.
        var late = MCPEventStreamFilter(filter: filter)
        _ = try late.feed(Array(response.utf8))
        #expect(throws: MCPEventStreamFilter.Failure.self) { _ = try late.feed(Array("data: {\"jsonrpc\":\"2.0\",\"id\":\"M\",\"result\":{\"tools\":[]}}\n\n".utf8)) }
        // An event the stream never finished is dropped, not passed unread.
        var unfinished = MCPEventStreamFilter(filter: filter)
        #expect(try unfinished.feed(Array(": hi\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"L\",\"result\":{\"tools\":[{\"name\":\"drop_tables\"}]}}".utf8)) == Array(": hi\n\n".utf8))
        #expect(unfinished.finish().isEmpty)
    }

    @Test("a stream led by byte order marks is read as clients read it (the marks dropped, none passed on, its first line a data line), in any pieces; on a list's own stream a message with a method and a result for another id is not passed")
    func byteOrderMarkAndMethodWithResult() throws {
        let filter = MCPListFilter(method: "tools/list", id: "L") { Self.policy.lists(name: $1, method: $0, claims: Self.staff, tenantID: "default", issuer: nil, hasSession: false) }
        let event = "data: {\"jsonrpc\":\"2.0\",\"id\":\"L\",\"result\":{\"tools\":[{\"name\":\"drop_tables\"},{\"name\":\"search_a\"}]}}\n\n"
        // One mark, or two (a client drops the one that leads what it gets: none may be passed on).
        for (stream, size) in [1, 2, 3, 4, 100].flatMap({ size in [(Array(("\u{FEFF}" + event).utf8), size), (Array(("\u{FEFF}\u{FEFF}" + event).utf8), size)] }) {
            var events = MCPEventStreamFilter(filter: filter)
            var out: [UInt8] = []
            var index = 0
            while index < stream.count {
                out += try events.feed(stream[index..<min(index + size, stream.count)])
                index += size
            }
            let text = String(decoding: out, as: UTF8.self)
            #expect(text.contains("search_a") && !text.contains("drop_tables") && !out.starts(with: [0xEF, 0xBB, 0xBF]), "\(size): \(text)")
        }
        // A mark only at the stream's start: later, a line led by one is no data line to anybody.
        var later = MCPEventStreamFilter(filter: filter)
        #expect(try later.feed(Array(": hi\n\n\u{FEFF}x\n\n".utf8)) == Array(": hi\n\n\u{FEFF}x\n\n".utf8))
        #expect(throws: MCPListFilter.Unfilterable.notTheResponse) {
            _ = try filter.filtered(Array(#"{"jsonrpc":"2.0","id":"M","method":"ping","result":{"tools":[{"name":"drop_tables"}]}}"#.utf8))
        }
    }

    @Test("a resource URI is decided only in its normal form: a dot segment (plain or %2e), an encoded separator (%2f, %5c) before the query, userinfo, a backslash, an upper-case scheme or a control character is refused, never matched byte for byte")
    func resourceURIs() throws {
        for uri in ["file:///docs/a.md", "https://example.com/x?y=1", "db://main/table", "file:///docs/.hidden", "file:///a..b", "https://example.com/x?next=%2Fy", "file:///docs/a%20b"] {
            #expect(MCPMessage.isNormalURI(uri), "\(uri)")
        }
        for uri in ["file:///docs/../etc/passwd", "file:///docs/%2e%2e/etc", "file:///docs/%2E./x", "file:///docs/./x", "file:///docs/..", "FILE:///docs/a",
                    "https://user:tok@example.com/x", "file:///docs\\..\\x", "file:///docs/a\u{0}", "docs/a", ":x",
                    "file:///docs/x%2f..%2f..%2fetc%2fpasswd", "file:///docs/x%2F..%2Fy", "file:///docs/x%5c..%5cy", "file:///docs/%5C"] {
            #expect(!MCPMessage.isNormalURI(uri), "\(uri)")
            let error = #expect(throws: MCPBodyError.self) {
                _ = try Self.body(#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"# + String(decoding: JSONWriter.bytes(.string(uri)), as: UTF8.self) + "}}")
            }
            #expect(error?.kind == .invalidRequest, "\(uri)")
        }
    }

    @Test("completion/complete is decided as the prompt or resource it completes; only the standard notifications pass unless methods lists more; a filtered list in a batch is refused; metric labels are the configuration's words, never a client's free text")
    func completionsNotificationsAndLabels() throws {
        let prompts = MCPCallPolicy(prompts: [MCPRule(pattern: NamePattern("greet")!)])
        let completion = { (ref: String) in #"{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":\#(ref),"argument":{"name":"a","value":"b"}}}"# }
        #expect(try decide(completion(#"{"type":"ref/prompt","name":"greet"}"#), policy: prompts) == .allowed)
        #expect(try decide(completion(#"{"type":"ref/prompt","name":"secret_prompt"}"#), policy: prompts) != .allowed)
        #expect(throws: MCPBodyError.self) { _ = try Self.body(#"{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{}}"#) }
        #expect(try decide(#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#) == .allowed)
        #expect(try decide(#"{"jsonrpc":"2.0","method":"notifications/x-acme/reindex"}"#) != .allowed)
        let batch = "[" + #"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"# + "," + #"{"jsonrpc":"2.0","id":2,"method":"ping"}"# + "]"
        #expect(try decide(batch).label == "mcp_batch_refused")
        #expect(try decide(batch, policy: MCPCallPolicy()) == .allowed, "without rules the list is not filtered, and may be batched")
        let call = try Self.body(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_issues"}}"#).messages[0]
        #expect(Self.policy.labels(call) == ("tools/call", "search_*"))
        let unlisted = try Self.body(#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"random-\#(String(repeating: "x", count: 300))"}}"#).messages[0]
        #expect(Self.policy.labels(unlisted) == ("tools/call", "_unlisted"))
        #expect(MCPCallPolicy().labels(unlisted).name == "_long")
        let junk = try Self.body(#"{"jsonrpc":"2.0","id":1,"method":"made/up/\#(String(repeating: "y", count: 300))"}"#).messages[0]
        #expect(Self.policy.labels(junk) == ("_other", nil))
    }

    @Test("a stream's filter reads every event for a filtered list's response (a resumed request's answer included), passes empty priming events, and ends the stream at an event whose data is not JSON rather than pass it unread; templates are filtered by uriTemplate")
    func streamFilters() throws {
        let policy = MCPCallPolicy(tools: [MCPRule(pattern: NamePattern("search_*")!)], resources: [MCPRule(pattern: NamePattern("file:///docs/*")!)])
        let keeps: @Sendable (String, String) -> Bool = { policy.lists(name: $1, method: $0, claims: Self.staff, tenantID: "default", issuer: nil, hasSession: false) }
        var stream = MCPEventStreamFilter(filter: MCPListFilter(streamOf: ["tools/list", "resources/templates/list"], keeps: keeps))
        let priming = "id: 1\ndata:\n\n"
        let first = "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"search_a\"},{\"name\":\"drop\"}]}}\n\n"
        let second = "data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"resourceTemplates\":[{\"uriTemplate\":\"file:///docs/*\"},{\"uriTemplate\":\"file:///etc/{f}\"}]}}\n\n"
        let out = String(decoding: try stream.feed(Array((priming + first + second).utf8)), as: UTF8.self)
        #expect(out.hasPrefix(priming) && out.contains("search_a") && !out.contains("drop") && out.contains("file:///docs/*") && !out.contains("/etc/"), "\(out)")
        #expect(throws: MCPEventStreamFilter.Failure.self) { _ = try stream.feed(Array("data: not json\n\n".utf8)) }
        // A huge event trickled in byte by byte is scanned once (no rescan from its start each time).
        var trickled = MCPEventStreamFilter(filter: MCPListFilter(streamOf: ["tools/list"], keeps: keeps))
        let big = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"" + String(repeating: "z", count: 200_000) + "\"}}\n\n"
        var passed = 0
        let clock = ContinuousClock()
        let took = try clock.measure { for byte in big.utf8 { passed += try trickled.feed([byte]).count } }
        #expect(passed == big.utf8.count && took < .seconds(5), "\(took)")
    }
}

