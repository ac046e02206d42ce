import HTTPTypes
import NIOHTTP1
import Traces

/// Who asks for an access decision.
package enum AccessAsker: Sendable, Equatable {
    /// A proxy in front (`/api/auth/verify`): an MCP route is the gateway's own to serve, never decided for it.
    case forwardAuth
    /// An Envoy (ext_authz): MCP routes are decided by their tokens; what needs the request's body,
    /// the upstream's answer or a credential sent upstream is refused as the gateway's to serve.
    case extAuthz
}

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
    /// Who asks: forward-auth's proxy, or an Envoy (ext_authz), which is also asked about MCP routes.
    package var asker: AccessAsker
    /// The trace the decision continues when the asker names its own (Envoy's span for a gRPC
    /// check, in the call's metadata); `nil`: the original request's `traceparent` among `headers`.
    package var askerTrace: TraceContextFields?

    package init(
        method: HTTPRequest.Method, path: Substring, query: Substring?, host: String?, headers: HTTPHeaders, clientAddress: String, asker: AccessAsker
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.host = host
        self.headers = headers
        self.clientAddress = clientAddress
        self.asker = asker
    }

    /// A method's metric label for a decision: its name when some route may forward it, else
    /// `OTHER` (an asker passes on the client's method; its label may not grow the metrics without bound).
    package static func metricLabel(_ method: String) -> String {
        ProxyRoute.forwardableMethods.contains { $0.rawValue == method } ? method : "OTHER"
    }
}
