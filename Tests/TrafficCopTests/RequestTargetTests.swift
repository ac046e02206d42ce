import Testing
import TrafficCop

@Suite("The request target: one normalised path, the query without credentials")
struct RequestTargetTests {
    func normalized(_ path: String) -> Result<String, RequestTargetError> {
        do {
            return .success(String(try RequestTarget.normalizedPath(path[...])))
        } catch {
            return .failure(error)
        }
    }

    @Test("a canonical path is returned as it came", arguments: ["/", "/api/v1/x", "/api/v1/", "/a/b.c/..d/...", "/%252E%252E/x", "/a;b=c/d", "/~user/%C3%A9"])
    func canonical(_ path: String) {
        #expect(normalized(path) == .success(path))
    }

    @Test(
        "dot segments are removed, adjacent slashes merged, unreserved escapes decoded and the rest put in upper case",
        arguments: [
            ("/api/v1/../admin", "/api/admin"), ("/api/v1/./x", "/api/v1/x"), ("//api/v1/x", "/api/v1/x"), ("/api//v1/x", "/api/v1/x"),
            ("/api/v1/%2E%2E/%2E%2E/admin", "/admin"), ("/api/v1/%2e%2e/admin", "/api/admin"), ("/api/v1/.%2e/admin", "/api/admin"),
            ("/api/v1/%2e./admin", "/api/admin"), ("/api/v1/x/../../admin", "/api/admin"), ("/api/v1/..", "/api/"), ("/api/v1/.", "/api/v1/"),
            ("/a//", "/a/"), ("///", "/"), ("/.", "/"), ("/./././", "/"), ("/%61pi/%7Euser", "/api/~user"), ("/x/%c3%a9", "/x/%C3%A9"),
            ("/%252e%252e/x", "/%252e%252e/x"), ("/a/%2E%2E%2E", "/a/..."),
        ])
    func rewritten(_ pair: (String, String)) {
        #expect(normalized(pair.0) == .success(pair.1), "\(pair.0)")
    }

    @Test(
        "what the gateway will not route is refused with its reason",
        arguments: [
            ("/..", RequestTargetError.climbsAboveRoot), ("/api/v1/../../../etc/passwd", .climbsAboveRoot), ("/%2e%2e/x", .climbsAboveRoot),
            ("/./..", .climbsAboveRoot), ("/api/v1/..%2fadmin", .encodedSlash), ("/api/v1/..%2Fadmin", .encodedSlash),
            ("/api/v1/..%5cadmin", .encodedBackslash), ("/api/v1\\..\\admin", .backslash), ("/a%00b", .encodedNUL),
            ("/api/v1/..;/admin", .dotSegmentWithParameters), ("/api/v1/.;x/admin", .dotSegmentWithParameters), ("/api/%2e%2e;x", .dotSegmentWithParameters),
            ("/api/..%3bx", .dotSegmentWithParameters), ("/a%", .malformedEscape), ("/a%2", .malformedEscape), ("/a%zz", .malformedEscape),
            ("/a b", .invalidCharacter), ("/a#b", .invalidCharacter), ("/caf\u{e9}", .invalidCharacter), ("/a\u{7f}", .invalidCharacter),
            ("api/v1", .notOriginForm), ("*", .notOriginForm), ("", .notOriginForm),
        ])
    func refused(_ pair: (String, RequestTargetError)) {
        #expect(normalized(pair.0) == .failure(pair.1), "\(pair.0)")
    }

    @Test("normalising twice changes nothing, and a very long path is handled in one pass")
    func idempotentAndLong() {
        let long = "/" + Array(repeating: "seg%2E/./x/..", count: 20_000).joined(separator: "/")
        let once = normalized(long)
        guard case .success(let path) = once else {
            Issue.record("refused: \(once)")
            return
        }
        #expect(normalized(path) == .success(path))
        #expect(!path.contains("/./") && !path.contains("/../") && !path.contains("//"))
    }

    @Test(
        "access_token leaves the query in every spelling of its name; everything else stays byte for byte",
        arguments: [
            ("x=1&access_token=T", "x=1"), ("access_token=T", nil), ("access_token", nil), ("%61ccess_token=T&b=2", "b=2"), ("access%5Ftoken=T&b=2", "b=2"),
            ("ACCESS_TOKEN=T&b=%20", "b=%20"), ("Access_Token=T;b=2", "b=2"), ("a=1;access_token=T", "a=1"), ("a=%2F&b=c+d", "a=%2F&b=c+d"),
            ("access_tokens=1", "access_tokens=1"), ("xaccess_token=1", "xaccess_token=1"), ("", nil), ("a=1&&b=2", "a=1&&b=2"),
        ] as [(String, String?)])
    func query(_ pair: (String, String?)) {
        #expect(RequestTarget.queryWithoutCredentials(pair.0[...]).map(String.init) == pair.1, "\(pair.0)")
    }

    @Test(
        "a query byte outside printable ASCII, or #, is refused; printable ASCII and escapes pass",
        arguments: [
            ("a=caf\u{e9}", false), ("access_token\u{37E}=T", false), ("a=\u{7f}", false), ("a= b", false), ("a=\tb", false), ("a=1#f", false),
            ("a=caf%C3%A9&b=%3B", true), ("a=[1]|{2}\\^`", true), ("", true),
        ])
    func queryBytes(_ pair: (String, Bool)) {
        let accepted = (try? RequestTarget.checkQuery(pair.0[...])) != nil
        #expect(accepted == pair.1, "\(pair.0)")
        if !pair.1 {
            #expect(throws: RequestTargetError.invalidQueryCharacter) { try RequestTarget.checkQuery(pair.0[...]) }
        }
    }

    @Test("the target splits at the first question mark")
    func split() {
        let (path, query) = RequestTarget.split("/a/b?c=d?e"[...])
        #expect(path == "/a/b" && query == "c=d?e")
        #expect(RequestTarget.split("/a"[...]).query == nil)
    }
}
