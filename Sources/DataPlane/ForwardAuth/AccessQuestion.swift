import HTTPTypes
import NIOHTTP1

/// The original request an edge in front asks about: everything one access decision reads.
///
/// Forward-auth reads it from its proxy's header family (`ForwardAuthOriginal`), Envoy's
/// ext_authz from its check request; the decision (`AccessDecision`) is the same for both.
package struct AccessQuestion: Sendable {
    package var method: HTTPRequest.Method
    /// The original path, already in `RequestTarget`'s one spelling.
    package var path: Substring
    /// The original query, when there is one.
    package var query: Substring?
    /// The original host, when named: matched when routes are bound to hosts (the asker refuses a
    /// question without one then), and where a navigation's sign-in returns.
    package var host: String?
    /// The original request's fields (names in any letter case): `Authorization`, `Cookie`,
    /// `X-Session-Id`, `Origin`, `Sec-Fetch-Site`, `Sec-Fetch-Mode`, `Accept` are read.
    package var headers: HTTPHeaders
    /// The client's address, which bounds the store reads for cookies memory does not know.
    package var clientAddress: String
    /// Whether an MCP route is decided (ext_authz) or answered as the gateway's own to serve
    /// (forward-auth: its proxy is never asked to admit an MCP server's tokens).
    package var decidesMCP: Bool

    package init(
        method: HTTPRequest.Method, path: Substring, query: Substring?, host: String?, headers: HTTPHeaders, clientAddress: String, decidesMCP: Bool
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.host = host
        self.headers = headers
        self.clientAddress = clientAddress
        self.decidesMCP = decidesMCP
    }
}
