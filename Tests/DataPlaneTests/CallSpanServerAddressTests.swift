import Testing

@testable import Traces

/// The peer a traced call names (`server.address`, `server.port`): read from the URL's authority
/// alone, so no path, query or user information of a peer's URL reaches a span.
@Suite("A call's span names its peer by host and port only")
struct CallSpanServerAddressTests {
    @Test("the host and port come from the authority; the scheme's port when none is written")
    func hostAndPort() {
        let cases: [(String, String, Int)] = [
            ("https://login.example.com/oauth2/token", "login.example.com", 443),
            ("http://127.0.0.1:18786/token?x=1", "127.0.0.1", 18786),
            ("http://[::1]:8080/path", "::1", 8080),
            ("https://[2001:db8::1]/token", "2001:db8::1", 443),
            ("https://user:secret@IdP.Example.com:8443/token", "idp.example.com", 8443),
            ("http://runtime.internal", "runtime.internal", 80),
            ("https://idp.example.com?q=a/b", "idp.example.com", 443),
        ]
        for (url, host, port) in cases {
            let address = CallSpans.ServerAddress(url: url)
            #expect(address?.host == host && address?.port == port, "\(url)")
        }
    }

    @Test("a URL that is not absolute http(s), or whose port is not a port, names no peer")
    func refused() {
        for url in ["", "ftp://example.com/", "/token", "http://", "http://:80/", "http://host:0/", "http://host:65536/", "http://host:8o/", "http://[::1/", "http://[::1]x/"] {
            #expect(CallSpans.ServerAddress(url: url) == nil, "\(url)")
        }
    }
}
