import ProviderLogin
import Testing

/// The `rd` of a browser sign-in: a same-host path or an allowed origin, never a spelling a
/// browser reads as another host (the inputs of oauth2-proxy's, Pomerium's and Vouch's advisories).
@Suite("Sign-in redirect (rd): a path on this host or an allowed origin, nothing a browser reads as another site")
struct SignInRedirectTests {
    static let origins: Set<String> = ["https://app.example.com", "http://127.0.0.1:8080"]
    /// A route host check with a dot boundary: example.com and its subdomains, never badexample.com.
    static let routeHosts: @Sendable (String) -> Bool = { $0 == "example.com" || $0.hasSuffix(".example.com") }

    static func check(_ text: String) -> Result<SignInRedirect, SignInRedirect.Refusal> {
        Result { () throws(SignInRedirect.Refusal) in try SignInRedirect.check(text, allowedOrigins: origins, acceptsHost: routeHosts) }
    }

    @Test(
        "same-host paths and allowed origins pass, exactly as they came",
        arguments: [
            "/", "/dashboard", "/d/x?tab=2&next=%2Fa", "/a/b/", "/search?q=a//b", "/p#/route/x", "/%7Euser",
            // An authorization request's own escapes in its query (encodeURIComponent's %20 in scope and state).
            "/api/auth/oauth/authorize?scope=tools%20admin&state=a%20b%2Fc&redirect_uri=http%3A%2F%2F127.0.0.1%3A5555%2Fcb", "/q?x=%09%0a%C3%A9",
            "https://app.example.com/", "https://app.example.com:443/x?y=1", "HTTPS://APP.EXAMPLE.COM/x",
            "https://grafana.example.com/d/abc", "https://example.com", "http://127.0.0.1:8080/demo/", "https://grafana.example.com:8443/x",
        ])
    func accepted(text: String) throws {
        let checked = try Self.check(text).get()
        #expect(checked.target == text)
        #expect(checked.isRelative == text.hasPrefix("/"))
    }

    @Test(
        "every advisory's spelling is refused",
        arguments: [
            // Scheme-relative and backslash tricks (a browser reads them as another host).
            "//evil.com", "///evil.com", "/\\evil.com", "/\\/evil.com", "/./\\evil.com", "\\\\evil.com",
            // Escapes that decode to a separator, whitespace or a control character.
            "/%2F/evil.com", "/%2f%2fevil.com", "/%5Cevil.com", "/%09/evil.com", "/%0a/", "/%0d/", "/%0d%0aSet-Cookie:x=1", "/%00", "/%",
            "/%zz", "/x?y=%zz", "/x?y=%",
            // Raw whitespace and controls.
            "/\t\t/\t/evil.com", "/ /evil.com", "/x\r\nLocation: https://evil.com", "/\u{7F}",
            // Dot segments and empty segments.
            "/./evil", "/a/../b", "/a/%2e%2e/b", "/a/%2E/b", "/a//b",
            // Not a path and not https://.
            "evil.com", "http:www.evil.com", "https:evil.com", "https:/evil.com", "javascript:alert(1)", "data:text/html,x", "ftp://app.example.com/",
            // Hosts that are not the gateway's.
            "https://evil.com/", "https://badexample.com/", "https://example.com.evil.com/", "https://evil.com\\.example.com",
            "https://evil.com#.example.com", "https://evil.com?.example.com",
            // User information, escapes and non-ASCII in the host.
            "https://example.com@evil.com", "https://app.example.com:x@evil.com/", "https://evil%2ecom/", "https://evil。com/",
            "https://app.example.com／evil", "https:///evil.com",
            // Plain http to a host that is not loopback (127.example.com is a name, not an address).
            "http://app.example.com/", "http://grafana.example.com/", "http://127.example.com/", "http://127.0.0.1.example.com/",
            // Authorities Foundation reads and browsers refuse: a bracketed name, a port past 65535.
            "https://[app.example.com]/", "http://[127.0.0.1]:8080/", "https://app.example.com:99999999999999999999/", "https://app.example.com:65536/",
            "https://app.example.com:/", "https://app.example.com:44x/", "https://[::1/",
            "",
        ])
    func refused(text: String) {
        if case .success(let checked) = Self.check(text) {
            Issue.record("accepted: \(checked.target.debugDescription)")
        }
    }

    @Test("a refusal never quotes the target, and a target past 2048 bytes is refused")
    func refusalsAreClean() {
        let secretLooking = "/x%0a?token=eyJhbGciOi.secret.value"
        guard case .failure(let refusal) = Self.check(secretLooking) else {
            Issue.record("accepted")
            return
        }
        #expect(!refusal.message.contains("eyJ") && !refusal.message.contains("secret"))
        #expect((try? Self.check("/" + String(repeating: "a", count: 2_047)).get()) != nil)
        #expect((try? Self.check("/" + String(repeating: "a", count: 2_048)).get()) == nil)
    }

    @Test("without a route host check, only the allowed origins pass")
    func originsOnly() throws {
        #expect((try? SignInRedirect.check("https://grafana.example.com/", allowedOrigins: Self.origins)) == nil)
        #expect(try SignInRedirect.check("https://app.example.com/x", allowedOrigins: Self.origins).target == "https://app.example.com/x")
    }
}
